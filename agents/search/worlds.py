"""Worlds a search plans on: sampled from what a policy may see, or the true one for the clairvoyant ablation.

A *sampled world* is a simulator built only from a snapshot and a belief: every unfinished
job keeps the state the snapshot shows (allocation, progress, attained service, queueing) and
gets a total length drawn from the belief given the iterations it has attained; future
arrivals come from the belief's arrival model, given the arrival times seen so far, never
from the trace. Jobs run at the snapshot's belief model (the truth is not seen) and a running
job at the rate the snapshot shows. The *true world* is the backend's own fork, which the
information layer shows a clairvoyant policy only (:class:`~arena_gym.types.ForkableSnapshot`).

A search takes its worlds from a :class:`WorldSource`, the one thing that tells the
non-clairvoyant lookahead from its clairvoyant ablation: :class:`SampledWorlds` (``worlds``
sampled worlds per decision, at work scales drawn from the episode's posterior) or
:class:`TrueWorld` (the one true world, through :meth:`arena_gym.sim.SimBackend.fork`).

:func:`rollout` runs a policy in a world from a first decision to a time limit and scores it by
the objective itself: the integral of the number of jobs in the system over the window (its
sum over a whole episode is the total JCT).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from agents.belief import EpisodeLog, EpisodeScale, JobAttributes, WorkBelief, load_belief
from arena_gym.protocols import InvalidDecision, Policy
from arena_gym.records import EventKind
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Decision, ForkableSnapshot, JobId, JobSpec, JobView, Snapshot


def sampled_world(
    snapshot: Snapshot,
    belief: WorkBelief,
    arrivals: Sequence[float],
    until: float,
    rng: np.random.Generator,
    config: SimConfig,
    log_scale: float = 0.0,
    attributes: Callable[[JobView], JobAttributes] = JobAttributes.of,
) -> SimBackend:
    """A simulator continuing ``snapshot``: lengths given attained work, arrivals over ``(now, until]`` from the belief.

    ``arrivals`` are the submit times the policy has seen in this episode (the arrival
    model's evidence); ``config`` should end the episode at ``until`` (its ``horizon_s``);
    ``log_scale`` scales every job's work by ``exp(log_scale)`` (the episode's scale,
    :mod:`agents.belief.adaptive`); ``attributes`` gives a view's job attributes (with its
    reference iteration time, where the belief's table lacks it). A job without any reference time
    (infeasible at its request and not in the table) is left out of the world.
    """
    now = snapshot.now
    known = belief.references.knows
    views = [v for v in (*snapshot.running, *snapshot.pending) if known(attributes(v))]
    attained = np.array([v.iterations_done(now) for v in views], dtype=np.float64)
    jobs = [attributes(v) for v in views]
    totals = belief.sample_total(jobs, attained, rng, log_scale=log_scale)[:, 0] if views else ()
    current = [(_spec(v.spec, int(total)), v) for v, total in zip(views, totals)]
    types = set(snapshot.cluster.gpu_types)
    scale = math.exp(log_scale)
    future = [
        _spec(
            s,
            max(1, round(s.iterations * scale)),
            requested_type=s.requested_gpu_type if s.requested_gpu_type in types else None,
        )
        for s in belief.future_jobs(now, arrivals, until - now, rng, taken={v.job_id for v in views})
        if s.submit_time > now
    ]
    world = SimBackend(snapshot.cluster, snapshot.perf, snapshot.perf, config)
    world.restore(now, current, future)
    return world


def _spec(spec: JobSpec, iterations: int, requested_type: Any = ...) -> JobSpec:
    """A JobSpec of the same job (a hidden spec's kept fields) with the given length."""
    return JobSpec(
        spec.job_id,
        spec.model,
        spec.global_batch,
        iterations,
        spec.submit_time,
        spec.requested_gpu_type if requested_type is ... else requested_type,
        spec.requested_gpus,
        spec.deadline,
    )


def rollout(
    world: SimBackend,
    decision: Decision,
    policy: Policy,
    shown: Callable[[Snapshot], Snapshot],
    now: float,
    until: float,
) -> float:
    """Apply ``decision`` in ``world`` at ``now``, then let ``policy`` decide until ``until``; the jobs-in-system integral.

    ``shown`` is the policy's information set of ``world``. An invalid first decision scores ``inf``.
    """
    try:
        world.apply(decision)
    except InvalidDecision:
        return math.inf
    snapshot = world.advance()
    while snapshot is not None:
        world.apply(policy.decide(shown(snapshot)))
        snapshot = world.advance()
    return jobs_in_system(world, now, until)


def jobs_in_system(world: SimBackend, start: float, end: float) -> float:
    """The integral over ``[start, end]`` of the number of submitted, unfinished jobs (job-seconds)."""
    finished: dict[JobId, float] = {e.job_id: e.time for e in world.events if e.kind is EventKind.FINISH}
    total = 0.0
    for spec in world.state.jobs:
        enter = max(start, spec.submit_time)
        leave = min(end, finished.get(spec.job_id, end))
        if leave > enter:
            total += leave - enter
    return total


@dataclass(frozen=True)
class World:
    """A world to roll out in, and the log work scale it was drawn at (None: none drawn, nothing to pin a policy to)."""

    backend: SimBackend
    log_scale: float | None


class WorldSource(Protocol):
    """Where a search's worlds come from; ``clairvoyant`` when they hold the truth."""

    clairvoyant: bool

    def reset(self) -> None:
        """A new episode."""

    def observe(self, snapshot: Snapshot) -> None:
        """See a decision point's snapshot (the evidence of later worlds)."""

    def worlds(self, snapshot: Snapshot, until: float, config: SimConfig) -> Iterator[World]:
        """The worlds of one decision, each ending at ``until``; a search may stop drawing early."""


class SampledWorlds:
    """``count`` sampled worlds per decision from a belief given what the policy has seen (non-clairvoyant).

    ``belief`` is a packaged kind or a belief file (loaded on first use); with ``adapt`` each
    world is drawn at a log work scale from the episode's posterior (:mod:`agents.belief.adaptive`),
    else at the belief's own scale. ``seed`` restarts the random stream every episode.
    """

    clairvoyant = False

    def __init__(self, belief: str, count: int, adapt: bool, seed: int) -> None:
        self.belief_spec, self.count, self.adapt, self.seed = belief, count, adapt, seed
        self._belief: WorkBelief | None = None
        self._rng = np.random.default_rng(seed)
        self._log = EpisodeLog()

    @property
    def belief(self) -> WorkBelief:
        """The belief the worlds are sampled from (loaded on first use)."""
        if self._belief is None:
            self._belief = load_belief(self.belief_spec)
        return self._belief

    def reset(self) -> None:
        """Forget the episode's arrivals and restart the random stream."""
        self._rng = np.random.default_rng(self.seed)
        self._log.reset()

    def observe(self, snapshot: Snapshot) -> None:
        """Log the jobs and arrivals the snapshot shows."""
        self._log.observe(snapshot)

    def worlds(self, snapshot: Snapshot, until: float, config: SimConfig) -> Iterator[World]:
        """The log scales first (one draw of the posterior for all), then one sampled world per scale."""
        scales = self._log_scales() if self.adapt else np.zeros(self.count)
        arrivals = sorted(t for t in self._log.arrivals.values() if t <= snapshot.now)
        for log_scale in map(float, scales):
            backend = sampled_world(
                snapshot, self.belief, arrivals, until, self._rng, config, log_scale, self._log.attributes
            )
            yield World(backend, log_scale if self.adapt else None)

    def _log_scales(self) -> np.ndarray:
        """``count`` draws of the episode's log work scale from its posterior given the jobs seen."""
        scale = EpisodeScale(self.belief)
        return self._rng.choice(np.asarray(scale.grid), size=self.count, p=self._log.posterior(scale))


class TrueWorld:
    """The one true world: the backend's fork at the decision point (clairvoyant: true lengths and future)."""

    clairvoyant = True

    def __init__(self, name: str) -> None:
        self.name = name

    def reset(self) -> None:
        """Nothing to forget."""

    def observe(self, snapshot: Snapshot) -> None:
        """Nothing to learn: the world is the truth."""

    def worlds(self, snapshot: Snapshot, until: float, config: SimConfig) -> Iterator[World]:
        """The backend's fork, ending at ``until`` (its own settings otherwise)."""
        if not isinstance(snapshot, ForkableSnapshot):
            raise ValueError(f"{self.name}: the oracle plans on the true world, which this backend cannot fork")
        yield World(snapshot.fork(until), None)
