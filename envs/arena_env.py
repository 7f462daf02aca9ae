"""ArenaSchedEnv: the decide-apply-advance loop of arena-gym turned inside out, as a gymnasium Env."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from arena_gym.cluster import resolve_cluster
from arena_gym.core.information import Masker
from arena_gym.fields import fits
from arena_gym.metrics import compute_metrics
from arena_gym.protocols import InvalidDecision
from arena_gym.records import EpisodeRecord, EventKind
from arena_gym.scenario import Scenario
from arena_gym.sim import SimBackend
from arena_gym.types import ClusterSpec, JobSpec, Snapshot
from envs.advisor import Advisor
from envs.builder import DecisionBuilder
from envs.capacity import CapacityIndex
from envs.clusters import check_same_grid
from envs.codec import ActionCodec
from envs.config import EnvConfig
from envs.encoder import ObservationEncoder
from envs.rewards import RateReward, reward_registry
from envs.scenario import env_scenario
from envs.table import GridTable
from envs.workload import Workload, WorkloadSampler

log = logging.getLogger(__name__)

#: The viewer name of the agent's hidden specs (what its errors name).
AGENT = "agent"


#: Keys ``reset(options=...)`` accepts.
RESET_OPTIONS: tuple[str, ...] = ("jobs", "workload", "cluster")


@dataclass(frozen=True)
class ClusterParts:
    """Everything an episode needs that depends on its cluster (one per cluster variant): its scenario
    (cluster, truth, belief, simulator settings) and what the agent sees of it."""

    scenario: Scenario
    codec: ActionCodec
    capacity: CapacityIndex
    table: GridTable
    truth_table: GridTable
    encoder: ObservationEncoder
    backend: SimBackend


def build_parts(cluster: ClusterSpec, config: EnvConfig) -> ClusterParts:
    """The simulator, codec, tables and encoder of ``config`` on one cluster."""
    scenario = env_scenario(config, cluster)
    codec = ActionCodec(cluster, config)
    if codec.n_cells == 0:
        raise ValueError(f"cluster {cluster.name!r} has no grid cells")
    table = GridTable(codec, scenario.belief)
    truth_table = table if scenario.truth is scenario.belief else GridTable(codec, scenario.truth)
    return ClusterParts(
        scenario,
        codec,
        CapacityIndex(codec),
        table,
        truth_table,
        ObservationEncoder(cluster, codec, config),
        scenario.backend(),
    )


def check_action(action: Any, n_actions: int) -> int:
    """The action as an int; TypeError for a non-integer (floats, strings, bools), ValueError out of range."""
    if isinstance(action, np.ndarray) and action.shape == ():
        action = action[()]
    if not fits(action, int):  # numpy integers too; never a bool
        raise TypeError(f"action must be an integer in 0..{n_actions - 1}, got {action!r} ({type(action).__name__})")
    value = int(action)
    if not 0 <= value < n_actions:
        raise ValueError(f"action {value} out of range 0..{n_actions - 1}")
    return value


def check_jobs(jobs: Any) -> tuple[JobSpec, ...]:
    """``options["jobs"]`` as a non-empty tuple of JobSpec; TypeError/ValueError naming what is wrong."""
    if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
        raise TypeError(f"reset: options['jobs'] must be a sequence of JobSpec, got {type(jobs).__name__}")
    for i, job in enumerate(jobs):
        if not isinstance(job, JobSpec):
            raise TypeError(f"reset: options['jobs'][{i}] must be a JobSpec, got {job!r} ({type(job).__name__})")
    if not jobs:
        raise ValueError("reset: options['jobs'] is empty")
    return tuple(jobs)


class ArenaSchedEnv(gym.Env):
    """Schedule training jobs on a heterogeneous GPU cluster, one (job, grid cell) choice per step.

    The simulator (:class:`arena_gym.sim.SimBackend`) runs to a decision point (a job arrives or
    finishes, or a round starts). The agent then builds that point's decision with sub-actions,
    each a (job slot, grid cell) pair, and ends it with "done": the decision is applied and time
    advances to the next decision point.

    ## Action Space

    ``Discrete(S * (C + 1) + 1)`` with ``S = K + R`` job slots (``max_pending`` K queue slots,
    first come first served or least attained service first per ``pending_order``, then
    ``max_running`` R slots for running jobs) and ``C`` grid cells: GPU type x GPU count
    (powers of two up to 16 that the type holds), stages taken from the planner's proxy plan
    (``fold_stages=True``), or GPU type x count x pipeline stages (stages <= count). Action
    ``s * (C + 1) + c`` puts slot ``s``'s job on cell ``c``: a pending job starts, a running job
    is resized / moved to another type / re-planned (its GPUs are given back first). ``c = C``
    preempts a running job. The last action is "done". Placement uses the most packed locality
    of the cell that fits and is feasible (best-fit nodes). Masked (``action_masks()`` and
    ``info["action_mask"]``): empty or already-touched slots, cells without enough free GPUs,
    cells that are out of memory / have no plan, stage counts above the GPU count, preempting a
    queued job, and a running job's current cell. Once no arrival or round is left to happen,
    two more are masked so that the cluster cannot idle for good with runnable jobs queued:
    "done" while no job would run and a sub-action is available, and preempting the last
    running job unless a queued job could take its place. A masked action taken anyway is a
    no-op with reward ``-invalid_action_penalty``; it still counts as a sub-step. An action
    that is not an integer (``3.7``, ``"3"``, ``np.float32(2.9)``) raises TypeError, one
    outside the action space ValueError.

    When only "done" is valid, the env applies the decision and advances by itself (so every
    step offers a real choice); after ``max_substeps`` sub-actions the decision is applied as if
    "done" were chosen (in a stall, the lowest valid sub-action is applied first).

    ## Observation Space

    ``Dict`` of ``Box(0, 1, float32)`` arrays (see :class:`envs.encoder.ObservationEncoder`),
    encoded from the snapshot as a non-clairvoyant policy observes it
    (:mod:`arena_gym.core.information`): ``jobs (S, F)`` per-slot features of what a real
    scheduler knows (waiting time, age, attained iterations and GPU service and their rank
    among the jobs, current allocation and its belief speed, requested shape, model family and
    size, batch, best belief iteration time, preemptions, slack to a declared deadline (none for
    a deadline derived from the true length), requested / current GPU type one-hot; with
    ``oracle_remaining=True`` also the true progress and remaining work, a clairvoyant
    ablation); ``grid (S, C)`` each job's belief throughput per cell relative to its best cell
    (0 = infeasible); ``mask (S, C + 1)`` the builder's mask without "done" (the two stall
    rules apply to ``action_masks()`` only); ``cluster (T, 4)`` per GPU type free share, whole
    free nodes, fragmentation and queued demand, after the sub-actions so far; ``clock``
    time, horizon progress, sub-step, queue length and running count; with ``advisor`` set,
    ``advice (S, C + 1)`` marks the advising heuristic's still-valid sub-actions.

    ## Rewards

    ``reward`` names an option of :func:`envs.rewards.reward_registry`, accrued over simulated
    time on the step that advances it: ``jct`` (default) ``-(jobs in system) x elapsed``,
    summing to minus the total JCT; ``slowdown`` the same weighted by 1 / each job's ideal run
    time (minus the total slowdown); ``throughput`` samples trained. Each episode's reward is
    divided by a normaliser (``reward_norm``: ``jobs`` (default) = job count x 1 h, so the
    ``jct`` return is minus the average JCT in hours; ``ideal`` = the jobs' total ideal run
    time; ``none`` = 1 s) and multiplied by ``reward_scale`` (default 1). A constant per
    episode, so the return still orders an episode's schedules exactly as its total JCT does.
    Invalid actions add ``-invalid_action_penalty``.

    ## Episode End

    ``terminated`` when every job of the workload has finished; ``truncated`` at ``horizon_s``
    or when the workload can make no more progress (jobs that fit nowhere). At the end
    ``info["metrics"]`` holds :func:`arena_gym.metrics.compute_metrics` of the episode and
    ``env.unwrapped.last_record`` the :class:`arena_gym.records.EpisodeRecord`.

    ## Arguments

    ``ArenaSchedEnv(config: EnvConfig | None = None, render_mode: str | None = None, **overrides)``
    with overrides replacing :class:`envs.config.EnvConfig` fields (``gymnasium.make`` passes its
    keyword arguments through; a value of the wrong type raises TypeError, a bad value
    ValueError, both naming the field). ``reset(seed=..., options=...)`` with options
    ``jobs`` (a sequence of JobSpec to replay instead of sampling a workload), ``workload`` (an
    :class:`envs.workload.Workload`) and ``cluster`` (the name of one of the env's clusters, for
    ``jobs``); any other key raises ValueError. ``step`` before the first ``reset`` raises
    ``gymnasium.error.ResetNeeded``. Render modes: ``ansi`` (text) and ``rgb_array`` (one pixel
    row per node, one column per GPU slot: green free, blue busy).

    ## Version History

    * v1: non-clairvoyant observation by default (``oracle_remaining`` for the old
      remaining-work columns), real-trace workloads with train / validation / test splits,
      cluster variants, strict action and option checks. Revised in place: the observation is
      encoded from the observed snapshot, so a deadline derived from the true length (ITP,
      the artifact's traces, the synthetic generator's) no longer reaches the slack columns.
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, config: EnvConfig | None = None, render_mode: str | None = None, **overrides: Any) -> None:
        if config is not None and not isinstance(config, EnvConfig):
            raise TypeError(f"config must be an EnvConfig, got {type(config).__name__}")
        base = config if config is not None else EnvConfig()
        self.config = base.replace(**overrides) if overrides else base
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode {render_mode!r} not supported; valid: {', '.join(self.metadata['render_modes'])}"
            )
        self.render_mode = render_mode
        cfg = self.config
        clusters = [resolve_cluster(c) for c in cfg.clusters]
        self._parts = {c.name: build_parts(c, cfg) for c in clusters}
        check_same_grid(clusters, {name: p.codec.cells for name, p in self._parts.items()})
        self._use(self._parts[clusters[0].name])
        self.workload = WorkloadSampler(cfg, self.cluster, self.truth)
        self.advisor = Advisor(cfg.advisor, cfg.seed) if cfg.advisor is not None else None
        self.advice: tuple[int, ...] = ()
        self.reward_fn: RateReward = reward_registry().make(cfg.reward)
        self.action_space = spaces.Discrete(self.codec.n_actions)
        self.observation_space = self.encoder.space
        self.jobs: tuple[JobSpec, ...] = ()
        self.episode: Workload | None = None
        self.snapshot: Snapshot | None = None
        self.builder: DecisionBuilder | None = None
        self.decision_index = 0
        self.last_record: EpisodeRecord | None = None
        self._events_seen = 0
        self._last_submit = 0.0
        self._carry = 0.0
        self._ended = (False, False)
        self._mask: np.ndarray | None = None
        self._started = False
        self._reward_factor = self.config.reward_scale
        #: What the agent observes of each snapshot: computed for it, or the truth in the clairvoyant ablation.
        self._shown = (lambda snapshot: snapshot) if self.config.oracle_remaining else Masker(AGENT).snapshot

    @property
    def cluster_names(self) -> tuple[str, ...]:
        """The clusters episodes run on: the config's cluster, then its variants."""
        return tuple(self._parts)

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode: draw a workload (or take ``options``) and run to the first choice."""
        jobs, workload, cluster = self._options(options)
        if seed is None and self._np_random is None:
            seed = self.config.seed
        super().reset(seed=seed)
        if jobs is None and workload is None:
            key = int(seed) if seed is not None else int(self.np_random.integers(2**63))
            workload = self.workload.sample(key, [p.scenario.cluster for p in self._parts.values()])
        if workload is not None:
            jobs, cluster = workload.jobs, workload.cluster
        assert jobs is not None
        self._use(self._parts[cluster or self.cluster_names[0]])
        self.episode = workload
        self.jobs = jobs
        self._started = True
        self._last_submit = max(j.submit_time for j in jobs)
        self._events_seen = 0
        self._ended = (False, False)
        self.last_record = None
        self.decision_index = 0
        self.advice = ()
        if self.advisor is not None:
            self.advisor.reset()
        snapshot = self.backend.reset(jobs)
        if snapshot is None:
            raise ValueError(f"reset: no decision point before the horizon ({self.config.horizon_s:g} s)")
        self.reward_fn.reset(jobs, self.backend.now(), lambda s: self.truth_table.best_time(s.model, s.global_batch))
        self._reward_factor = self.config.reward_scale / self._normaliser(jobs)
        self._carry = self._accrue()
        self._carry += self._enter(snapshot)
        return self._observe(), self._info(False)

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply one sub-action (or "done"); advance time when the decision is complete."""
        if not self._started:
            raise gym.error.ResetNeeded("Cannot call env.step() before calling env.reset()")
        action = check_action(action, self.codec.n_actions)
        if self.builder is None:  # the episode has ended (possibly already in reset): stay there
            terminated, truncated = self._ended
            reward, self._carry = self._carry, 0.0
            info = self._info(False)
            if self.last_record is not None:
                info["metrics"] = compute_metrics(self.last_record)
            return self.encoder.blank(), reward, terminated, truncated, info
        builder = self.builder
        reward, self._carry = self._carry, 0.0
        mask = self.action_masks()
        invalid = not mask[action]
        commit = action == self.codec.done_action and not invalid
        if invalid:
            reward -= self.config.invalid_action_penalty
            builder.substeps += 1
        elif not commit:
            builder.apply(action)
        self._mask = None
        if not commit and (builder.substeps >= self.config.max_substeps or not self._has_choice()):
            while not self.action_masks()[-1]:  # a stall: apply the lowest valid sub-action first
                builder.apply(int(np.flatnonzero(self.action_masks())[0]))
                self._mask = None
            commit = True
        if commit:
            reward += self._commit()
        obs = self._observe()
        terminated, truncated = self._ended
        info = self._info(invalid)
        if terminated or truncated:
            info["metrics"] = compute_metrics(self.last_record)  # type: ignore[arg-type]
            info["workload"] = self.episode.label if self.episode is not None else "given jobs"
        return obs, float(reward), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Boolean mask over actions (sb3-contrib's MaskablePPO convention); only "done" after the end."""
        if self.builder is None:
            mask = np.zeros(self.codec.n_actions, dtype=bool)
            mask[-1] = True
            return mask
        if self._mask is None:
            self._mask = self._stall_guard(self.builder.mask())
        return self._mask.copy()

    def render(self) -> str | np.ndarray | None:
        """Text (``ansi``) or an occupancy image (``rgb_array``) of the current state."""
        if self.render_mode == "ansi":
            return self._render_text()
        if self.render_mode == "rgb_array":
            return self._render_image()
        return None

    # ------------------------------------------------------------------ internals
    def _use(self, parts: ClusterParts) -> None:
        """Make one cluster's simulator, codec, tables and encoder current."""
        self.cluster, self.truth, self.belief = parts.scenario.cluster, parts.scenario.truth, parts.scenario.belief
        self.codec, self.capacity, self.encoder = parts.codec, parts.capacity, parts.encoder
        self.table, self.truth_table, self.backend = parts.table, parts.truth_table, parts.backend

    def _options(
        self, options: dict[str, Any] | None
    ) -> tuple[tuple[JobSpec, ...] | None, Workload | None, str | None]:
        """Validated ``reset`` options: (jobs, workload, cluster name)."""
        if options is None:
            return None, None, None
        if not isinstance(options, dict):
            raise TypeError(f"reset: options must be a dict, got {type(options).__name__}")
        unknown = sorted(set(map(str, options)) - set(RESET_OPTIONS))
        if unknown:
            raise ValueError(f"reset: unknown option(s) {', '.join(unknown)}; valid: {', '.join(RESET_OPTIONS)}")
        if "jobs" in options and "workload" in options:
            raise ValueError("reset: give options['jobs'] or options['workload'], not both")
        jobs = check_jobs(options["jobs"]) if "jobs" in options else None
        workload = options.get("workload")
        if workload is not None and not isinstance(workload, Workload):
            raise TypeError(f"reset: options['workload'] must be an envs.Workload, got {type(workload).__name__}")
        cluster = options.get("cluster")
        if cluster is not None and (workload is not None or cluster not in self._parts):
            raise ValueError(
                f"reset: options['cluster'] must name one of {', '.join(self._parts)} and go with 'jobs', "
                f"got {cluster!r}"
            )
        if workload is not None and workload.cluster not in self._parts:
            raise ValueError(
                f"reset: the workload is for cluster {workload.cluster!r}; this env has {', '.join(self._parts)}"
            )
        return jobs, workload, cluster

    def _enter(self, snapshot: Snapshot | None) -> float:
        """Make ``snapshot`` current, advancing past points that offer no choice; the reward accrued."""
        reward = 0.0
        while snapshot is not None:
            self.snapshot = snapshot  # the truth, for experts and advisors (each applies its own information set)
            self.builder = DecisionBuilder(self._shown(snapshot), self.codec, self.config, self.table, self.capacity)
            self._mask = None
            if self._has_choice():
                if self.advisor is not None:
                    self.advice = self.advisor.advise(snapshot, self.codec, self.config, self.table, self.capacity)
                return reward
            self.decision_index += 1  # an empty decision, as a policy would return
            snapshot = self.backend.advance()
            reward += self._accrue()
        self._finish()
        return reward

    def _commit(self) -> float:
        """Apply the builder's decision, advance, and return the reward accrued meanwhile."""
        builder = self.builder
        assert builder is not None
        reward = 0.0
        try:
            self.backend.apply(builder.decision())
        except InvalidDecision as exc:  # belief said feasible, the ground truth disagrees
            log.warning("decision rejected by the simulator, nothing applied: %s", exc)
            reward -= self.config.invalid_action_penalty
        self.decision_index += 1
        snapshot = self.backend.advance()
        reward += self._accrue()
        return reward + self._enter(snapshot)

    def _accrue(self) -> float:
        events = self.backend.events
        new = events[self._events_seen :]
        self._events_seen = len(events)
        return self._reward_factor * self.reward_fn.accrue(new, self.backend.now())

    def _normaliser(self, jobs: tuple[JobSpec, ...]) -> float:
        """The episode's reward normaliser (``EnvConfig.reward_norm``), in seconds."""
        norm = self.config.reward_norm
        if norm == "jobs":
            return len(jobs) * 3600.0
        if norm == "ideal":
            ideal = [j.iterations * self.truth_table.best_time(j.model, j.global_batch) for j in jobs]
            total = sum(t for t in ideal if math.isfinite(t))
            return total if total > 0 else 1.0
        return 1.0

    def _finish(self) -> None:
        record = self.backend.record("env", self.decision_index, 0.0)
        self.last_record = record
        finished = sum(1 for ev in record.events if ev.kind is EventKind.FINISH)
        terminated = finished == len(self.jobs)
        self._ended = (terminated, not terminated)
        self.snapshot = None
        self.builder = None
        self._mask = None

    def _stall_guard(self, mask: np.ndarray) -> np.ndarray:
        """Mask what would idle the cluster for good with jobs still queued (no arrival or round left).

        With nothing left to happen, "done" is masked while no job would run and a sub-action
        is available, and preempting the last running job is masked unless a queued job could
        take its place.
        """
        builder, snapshot = self.builder, self.snapshot
        assert builder is not None and snapshot is not None
        if self.config.round_s is not None or (snapshot.now < self._last_submit <= self.config.horizon_s):
            return mask
        k = self.config.max_pending
        running_after = builder.running_after()
        if running_after == 1 and not builder.open[:k].any():
            mask[self.codec.n_cells : -1 : self.codec.width] = False
        if running_after == 0 and mask[:-1].any():
            mask[-1] = False
        return mask

    def _has_choice(self) -> bool:
        return bool(self.action_masks()[:-1].any())

    def _observe(self) -> dict[str, np.ndarray]:
        if self.builder is None or self.snapshot is None:
            return self.encoder.blank()
        return self.encoder.encode(self.builder.snapshot, self.builder, self.advice)  # what the agent observes

    def _info(self, invalid: bool) -> dict[str, Any]:
        return {
            "action_mask": self.action_masks(),
            "decision": self.decision_index,
            "substep": self.builder.substeps if self.builder is not None else 0,
            "time_s": self.backend.now(),
            "invalid": invalid,
        }

    def _render_text(self) -> str:
        lines = [f"t={self.backend.now():.0f}s decision={self.decision_index}"]
        builder = self.builder
        for group in self.cluster.groups:
            free = builder.free_of(group.gpu_type) if builder is not None else np.full(group.nodes, group.gpus_per_node)
            lines.append(f"  {group.gpu_type}: {int(free.sum())}/{group.total_gpus} free")
        if builder is not None:
            for s, view in enumerate(builder.slots):
                if view is None:
                    continue
                where = str(view.allocation.shape) if view.allocation is not None else "queued"
                mark = "*" if builder.touched[s] else " "
                lines.append(f" {mark}[{s}] {view.job_id} {view.spec.model} b{view.spec.global_batch} {where}")
        return "\n".join(lines)

    def _render_image(self) -> np.ndarray:
        width = max(g.gpus_per_node for g in self.cluster.groups)
        rows = []
        for group in self.cluster.groups:
            free = (
                self.builder.free_of(group.gpu_type)
                if self.builder is not None
                else np.full(group.nodes, group.gpus_per_node)
            )
            row = np.zeros((group.nodes, width, 3), dtype=np.uint8)
            cols = np.arange(width)[None, :]
            row[(cols < group.gpus_per_node) & (cols < free[:, None])] = (40, 170, 60)
            row[(cols < group.gpus_per_node) & (cols >= free[:, None])] = (40, 90, 200)
            rows.append(row)
        return np.concatenate(rows).repeat(4, axis=0).repeat(4, axis=1)
