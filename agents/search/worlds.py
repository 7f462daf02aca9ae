"""Worlds a search plans on: sampled from what a policy may see, or the true one for the clairvoyant ablation.

A *sampled world* is a simulator built only from a snapshot and a belief: every unfinished
job keeps the state the snapshot shows (allocation, progress, attained service, queueing) and
gets a total length drawn from the belief given the iterations it has attained; future
arrivals come from the belief's arrival model, given the arrival times seen so far, never
from the trace. Jobs run at the snapshot's belief model (the truth is not seen) and a running
job at the rate the snapshot shows. The *true world* is the backend's own fork.

:func:`rollout` runs a policy in a world from a first decision to a time limit and scores it by
the objective itself: the integral of the number of jobs in the system over the window (its
sum over a whole episode is the total JCT).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agents.search.arrivals import JobAttributes
from agents.search.belief import WorkBelief
from arena_gym.protocols import InvalidDecision, Policy
from arena_gym.records import EventKind
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Decision, JobId, JobSpec, JobView, Snapshot


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
    :mod:`agents.search.adaptive`); ``attributes`` gives a view's job attributes (with its
    reference iteration time, where the belief's table lacks it).
    """
    now = snapshot.now
    views = (*snapshot.running, *snapshot.pending)
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

    ``shown`` is the policy's information set. An invalid first decision scores ``inf``.
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
