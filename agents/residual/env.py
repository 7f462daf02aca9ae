"""ResidualArenaEnv: the parameterised Arena action space as a gymnasium Env, for SB3 or any RL library.

Each step is one decision point where Arena acts (a job arrives or finishes). The agent gives
every listed job two log-multipliers, on its Gittins index (the queue order) and on its
urgency (its weight in the downgrade search), and ``arena-gittins-32-f``'s allocation
machinery turns them into the decision; time then advances to the next such point. An all-zero
action is exactly ``arena-gittins-32-f``. The same features and multipliers as the
``residual:PATH`` policies (:mod:`agents.residual.priority`), so a policy learned here is a
learned residual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agents.belief import load_belief
from agents.residual.priority import (
    RESIDUAL_FEATURES,
    ResidualPriority,
    ResidualWeights,
    arena_with,
)
from arena_gym.core.information import information_set
from arena_gym.metrics import compute_metrics
from arena_gym.records import EpisodeRecord
from arena_gym.types import JobId, JobView, Snapshot
from envs import EnvConfig
from envs.scenario import env_scenario
from envs.workload import WorkloadSampler

HOUR_S = 3600.0


class _ActionPriority(ResidualPriority):
    """The residual priority with each job's multipliers set by the env from the agent's action."""

    def __init__(self, weights: ResidualWeights) -> None:
        super().__init__(load_belief(weights.belief), weights)
        self.scales: dict[JobId, tuple[float, float]] = {}

    def _scales(self, snapshot: Snapshot) -> dict[JobId, tuple[float, float]]:
        """The multipliers the env set for this decision point (none, so 1, for a job the action did not list)."""
        return self.scales


class ResidualArenaEnv(gym.Env):
    """Set each job's order and urgency multipliers; ``arena-gittins-32-f`` allocates.

    ## Action Space

    ``Box(-clip, clip, (max_jobs, 2))``: row ``i`` is the log-multiplier of the ``i``-th listed
    job's Gittins index and of its urgency (jobs listed waiting first, then running, as the
    snapshot orders them; rows past the listed jobs, and jobs past ``max_jobs``, are ignored).

    ## Observation Space

    ``Dict``: ``jobs`` ``Box(-3, 3, (max_jobs, F))`` each listed job's :data:`RESIDUAL_FEATURES`
    (non-clairvoyant: the env shows the policy's hidden view), ``present`` ``Box(0, 1,
    (max_jobs,))`` which rows hold a job.

    ## Rewards

    ``-(jobs in the system) x elapsed seconds / (job count x 1 h)`` accrued up to the next
    decision point: the return is minus the episode's average JCT in hours.

    ## Episode End

    ``terminated`` when every job has finished, ``truncated`` at the horizon; ``info["metrics"]``
    then holds :func:`arena_gym.metrics.compute_metrics` of the episode.

    ## Arguments

    ``ResidualArenaEnv(config: EnvConfig | None = None, max_jobs: int = 64, clip: float = 3.0,
    **overrides)``: the workload, clusters and simulation settings are the :class:`EnvConfig`'s
    (its agent-interface fields are not used). An episode runs on the config's cluster or one of
    its ``cluster_variants`` (any GPU types and sizes: the spaces do not depend on the cluster), a
    drawn workload's; ``reset(options={"jobs": [...], "cluster": NAME})`` replays jobs on a named
    one (default: the config's cluster).
    """

    metadata = {"render_modes": []}

    def __init__(
        self, config: EnvConfig | None = None, max_jobs: int = 64, clip: float = 3.0, **overrides: Any
    ) -> None:
        base = config if config is not None else EnvConfig()
        self.config = base.replace(**overrides) if overrides else base
        if not 1 <= max_jobs <= 4096:
            raise ValueError(f"ResidualArenaEnv: max_jobs must be in 1..4096, got {max_jobs}")
        self.max_jobs = max_jobs
        scenarios = [env_scenario(self.config, c) for c in self.config.clusters]
        self.cluster = scenarios[0].cluster
        self.priority = _ActionPriority(ResidualWeights(clip=clip))
        self.policy = arena_with(self.priority, "residual-env")
        self._backends = {s.cluster.name: s.backend(self.policy.ap_search) for s in scenarios}
        self.backend = self._backends[self.cluster.name]
        self.workloads = WorkloadSampler(self.config, self.cluster, scenarios[0].truth)
        self.clip = clip
        n = len(RESIDUAL_FEATURES)
        self.action_space = spaces.Box(-clip, clip, (max_jobs, 2), np.float32)
        self.observation_space = spaces.Dict(
            {
                "jobs": spaces.Box(-3.0, 3.0, (max_jobs, n), np.float32),
                "present": spaces.Box(0.0, 1.0, (max_jobs,), np.float32),
            }
        )
        self._shown = information_set(self.policy, self.backend)
        self._snapshot: Snapshot | None = None
        self._listed: list[JobView] = []
        self._observed: tuple[Snapshot | None, Snapshot | None] = (None, None)
        self._carry = 0.0
        self._n_jobs = 1
        self.last_record: EpisodeRecord | None = None

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode on a drawn workload (or ``options["jobs"]`` on ``options["cluster"]``) and run to Arena's
        first choice."""
        super().reset(seed=seed)
        options = options or {}
        unknown = set(options) - {"jobs", "cluster"}
        if unknown:
            raise ValueError(f"reset: unknown option(s) {', '.join(sorted(unknown))}; valid: jobs, cluster")
        jobs, cluster = options.get("jobs"), options.get("cluster", self.cluster.name)
        if cluster not in self._backends or (jobs is None and "cluster" in options):
            raise ValueError(
                f"reset: options['cluster'] must name one of {', '.join(self._backends)} and go with 'jobs', "
                f"got {cluster!r}"
            )
        if jobs is None:
            clusters = [b.cluster for b in self._backends.values()]
            drawn = self.workloads.sample(int(self.np_random.integers(2**63)), clusters)
            jobs, cluster = drawn.jobs, drawn.cluster
        jobs = tuple(jobs)
        if not jobs:
            raise ValueError("reset: options['jobs'] is empty")
        self.backend = self._backends[cluster]
        self._n_jobs = len(jobs)
        self.policy.reset()
        # one per episode: its memo is by job id, and ids repeat
        self._shown = information_set(self.policy, self.backend)
        self.last_record = None
        self._snapshot = self.backend.reset(jobs)
        self._carry = self._to_choice()  # paid with the first step's reward
        if self._snapshot is None:
            raise ValueError("reset: no decision point before the horizon")
        return self._observe(), {}

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply the multipliers at this decision point; advance to the next one."""
        if self._snapshot is None:
            raise gym.error.ResetNeeded("call reset() first (or again: the episode has ended)")
        act = np.asarray(action, dtype=float)
        if act.shape != (self.max_jobs, 2) or not np.isfinite(act).all():
            raise ValueError(f"action must be a finite array of shape {(self.max_jobs, 2)}, got shape {act.shape}")
        rows = np.exp(np.clip(act, -self.clip, self.clip))
        self.priority.scales = {v.job_id: (float(a), float(b)) for v, (a, b) in zip(self._listed, rows)}
        reward, self._carry = self._carry + self._decide(), 0.0
        reward += self._to_choice()
        if self._snapshot is not None:
            return self._observe(), reward, False, False, {}
        record = self.last_record = self.backend.record(self.policy.name, 0, 0.0)
        metrics = compute_metrics(record)
        finished = metrics["jobs_finished"] == self._n_jobs
        return self._blank(), reward, finished, not finished, {"metrics": metrics}

    def _decide(self) -> float:
        """Apply the policy's decision at the current snapshot and advance; the reward accrued meanwhile."""
        snapshot = self._snapshot
        assert snapshot is not None
        in_system, now = len(snapshot.pending) + len(snapshot.running), snapshot.now
        shown = self._observed[1] if self._observed[0] is snapshot else self._shown(snapshot)
        self.backend.apply(self.policy.decide(shown))
        self._snapshot = self.backend.advance()
        until = self._snapshot.now if self._snapshot is not None else self.backend.now()
        return -in_system * (until - now) / (self._n_jobs * HOUR_S)

    def _to_choice(self) -> float:
        """Advance (deciding with the current multipliers) to a point where Arena acts, or the end."""
        reward = 0.0
        self.priority.scales = {}
        while self._snapshot is not None and not (self._snapshot.arrivals or self._snapshot.departures):
            reward += self._decide()
        return reward

    def _blank(self) -> dict[str, np.ndarray]:
        return {
            "jobs": np.zeros((self.max_jobs, len(RESIDUAL_FEATURES)), np.float32),
            "present": np.zeros(self.max_jobs, np.float32),
        }

    def _observe(self) -> dict[str, np.ndarray]:
        """The listed jobs' features, from the view the policy is shown (kept for its decision)."""
        snapshot = self._snapshot
        assert snapshot is not None
        shown = self._shown(snapshot)
        self._observed = (snapshot, shown)
        views = [*shown.pending, *shown.running][: self.max_jobs]
        self._listed = views
        out = self._blank()
        jobs, present = out["jobs"], out["present"]
        if views:
            jobs[: len(views)] = self.priority.features(views, shown)
            present[: len(views)] = 1.0
        return out
