"""SimBackend: the event-driven cluster simulator behind the ClusterBackend protocol.

Semantics (docs/simulator.md): jobs progress at the speed the ground-truth
``PerfModel`` gives their grid, integrated exactly between events; every allocation change
costs a reconfiguration overhead during which the job holds its GPUs and makes no progress (with a
``truth`` that knows measured restart costs, :class:`~arena_gym.restarts.RestartCosts`, those of the
job's model replace the checkpoint-resume constant);
completions are scheduled at their exact time. Policies see ``belief`` estimates, never the
truth. A decision that breaks an invariant raises :class:`InvalidDecision` and changes nothing.

The cluster state (validation, GPU accounting, job states, snapshots, event log) is the
shared :class:`arena_gym.core.ClusterState` and when decisions are due (arrivals, rounds, the
stall rule, the horizon) the shared :class:`arena_gym.core.triggers.Triggers`; this module adds
only the simulated clock and its event heap, which holds the next arrival the triggers hand over,
the next round they schedule, and the jobs' starts and completions.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import math
from collections.abc import Sequence

from arena_gym.core import ClusterState
from arena_gym.core.triggers import Triggers
from arena_gym.perf import describe_unschedulable, unschedulable_reason
from arena_gym.records import EpisodeRecord, Event
from arena_gym.restarts import RestartCost, RestartCosts
from arena_gym.sim.config import SimConfig
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    Decision,
    JobId,
    JobSpec,
    JobStatus,
    JobView,
    ModelRef,
    PerfModel,
    Snapshot,
)

log = logging.getLogger(__name__)

# Same-time events run in this order: releases first, then progress starts, then arrivals.
_FINISH, _RUN, _SUBMIT, _ROUND = 0, 1, 2, 3
_NO_JOB = JobId("")


class SimBackend:
    """Discrete-event simulator of a GPU cluster (simulated time)."""

    def __init__(
        self,
        cluster: ClusterSpec,
        truth: PerfModel,
        belief: PerfModel | None = None,
        config: SimConfig | None = None,
    ) -> None:
        self.cluster = cluster
        self.truth = truth
        self.belief = belief if belief is not None else truth
        self.config = config if config is not None else SimConfig()
        self.state = ClusterState(cluster, truth, self.belief, self.config.horizon_s)
        self.triggers = Triggers(self.config.schedule)
        self._events = self.triggers.events  # whether arrivals and completions are decision points
        self._overheads: dict[int, float] = {}  # reconfiguration overhead by GPU count (the config is frozen)
        self._restarts = truth if isinstance(truth, RestartCosts) else None
        self._restart_costs: dict[tuple[ModelRef, str], RestartCost | None] = {}  # by (model, GPU type)
        self._reset_clock(0.0)

    def _reset_clock(self, start: float) -> None:
        self._now = start
        self._start = start
        self._heap: list[tuple[float, int, int, JobId, int]] = []
        self._seq = 0
        self._arrivals: list[JobId] = []
        self._departures: list[JobId] = []
        self._ended = False
        self._stuck: tuple[JobSpec, ...] = ()  # jobs left queued with nothing left to wait for (warned at record)

    def fork(self, horizon_s: float | None = None) -> SimBackend:
        """An independent copy at this point: under the same decisions it continues exactly as this one does.

        Cheap: the cluster state and the event heap are copied, the performance models and
        the configuration shared. Snapshots taken before stay bound to this backend. With
        ``horizon_s`` the copy's episode ends then instead (a rollout's window), this one's not.
        A clairvoyant policy is shown it beside each snapshot (:mod:`arena_gym.core.information`).
        """
        new = SimBackend.__new__(SimBackend)
        new.cluster, new.truth, new.belief, new.config = self.cluster, self.truth, self.belief, self.config
        new.state = self.state.fork()
        if horizon_s is not None:
            new.config = dataclasses.replace(self.config, horizon_s=horizon_s)
            new.state.horizon = horizon_s
        new.triggers, new._events = self.triggers.fork(), self._events
        new._overheads = self._overheads  # a memo of a pure function of the GPU count
        new._restarts, new._restart_costs = self._restarts, self._restart_costs  # likewise, of (model, GPU type)
        new._now, new._start, new._seq = self._now, self._start, self._seq
        new._heap = list(self._heap)
        new._arrivals, new._departures = list(self._arrivals), list(self._departures)
        new._ended, new._stuck = self._ended, self._stuck
        return new

    def restore(self, now: float, current: Sequence[tuple[JobSpec, JobView]], future: Sequence[JobSpec] = ()) -> None:
        """Continue from a moment of another episode (a sampled world): see :meth:`ClusterState.restore`.

        Running jobs finish at their rate, reconfiguring ones start at their view's ``run_start``
        (at ``now`` at the earliest), future jobs arrive at their submit times (after ``now``);
        rounds, if configured, fire every ``round_s`` from ``now + round_s``. Apply a decision
        next (or call :meth:`advance`).
        """
        if any(spec.submit_time <= now for spec in future):
            raise ValueError("future jobs must be submitted after now")
        self.state.restore(now, current, future)
        self._reset_clock(now)
        state = self.state
        for spec, view in current:
            if view.status is JobStatus.RUNNING:
                job = spec.job_id
                self._push(state.expected_finish(job, now), _FINISH, job, state.version(job))
            elif view.status is JobStatus.RECONFIGURING:
                run_at = max(now, view.run_start if view.run_start is not None else now)
                self._push(run_at, _RUN, spec.job_id, state.version(spec.job_id))
        self.triggers.restore(now, future)
        self._schedule_triggers()

    # ----------------------------------------------------------------- protocol
    def reset(self, jobs: Sequence[JobSpec]) -> Snapshot | None:
        """Load ``jobs`` and run to the first decision point."""
        self.state.load(jobs)
        self.triggers.reset(jobs)
        self._reset_clock(self.triggers.start)
        self._schedule_triggers()
        return self.advance()

    def now(self) -> float:
        """Simulated time in seconds (the trace's clock)."""
        return self._now

    def close(self) -> None:
        """Nothing to release in simulation."""

    def apply(self, decision: Decision) -> None:
        """Validate the whole decision, then commit it; InvalidDecision (nothing changed) otherwise."""
        if decision.is_empty:
            return
        overheads: dict[JobId, float] = {}

        def overhead_s(job_id: JobId, alloc: Allocation) -> float:
            seconds = overheads[job_id] = self._overhead_s(job_id, alloc)  # asked before the state changes
            return seconds

        checked = self.state.apply(decision, self._now, overhead_s)
        for job_id, _, _ in checked.allocations:
            self._push(self._now + overheads[job_id], _RUN, job_id, self.state.version(job_id))

    def advance(self) -> Snapshot | None:
        """Process events up to the next decision point; None once drained or past the horizon.

        Outdated events (of a superseded allocation, or rounds after the last job) are dropped
        without moving the clock, so the episode ends at its last real event.
        """
        self._arrivals, self._departures = [], []
        triggered = False
        horizon = self.triggers.horizon
        heap = self._heap
        while heap:
            t, kind, _, job_id, version = heap[0]
            if not self._current(kind, job_id, version):
                heapq.heappop(heap)
                continue
            if t > horizon or (triggered and t > self._now):  # t after the horizon: inlined, hot
                break
            heapq.heappop(heap)
            self._now = t
            triggered |= self._process(kind, job_id)
        if triggered:
            round_index = self.triggers.round_index
            return self.state.snapshot(self._now, self._arrivals, self._departures, round_index)
        self._end(horizon if heap else self._now)
        return None

    # ----------------------------------------------------------------- results
    def record(self, policy: str, decisions: int = 0, decide_wall_s: float = 0.0) -> EpisodeRecord:
        """The episode so far as an EpisodeRecord (call after ``advance`` returned None).

        Jobs the episode left waiting with nothing left to wait for are logged (once) with ``policy``
        and the reason: their requested type is absent, they run out of memory on every shape, or the
        policy never started them.
        """
        if self._stuck:
            reasons: dict[str, str] = {
                j.job_id: unschedulable_reason(j, self.truth, self.cluster) or "fits the cluster, but was never started"
                for j in self._stuck
            }
            log.warning(
                "policy %s ended the episode with %d job(s) waiting and nothing left to wait for: %s",
                policy,
                len(reasons),
                describe_unschedulable(reasons),
            )
            self._stuck = ()
        return self.state.record(policy, self._start, self._now, decisions, decide_wall_s)

    @property
    def events(self) -> tuple[Event, ...]:
        """The event log so far."""
        return self.state.events

    def check_invariants(self) -> None:
        """Raise AssertionError if the cluster state is inconsistent (used by tests)."""
        self.state.check_invariants()

    # ----------------------------------------------------------------- internals
    def _overhead_s(self, job_id: JobId, alloc: Allocation) -> float:
        """The reconfiguration overhead of (re)starting ``job_id`` on ``alloc``: with the measured restart
        costs of its model, those its kind of (re)start pays; else the constants (memoised by GPU count)."""
        if self._restarts is not None:
            model = self.state.spec(job_id).model
            key = (model, alloc.shape.gpu_type)
            if key not in self._restart_costs:
                self._restart_costs[key] = self._restarts.restart_cost(model, alloc.shape.gpu_type)
            cost = self._restart_costs[key]
            if cost is not None:
                return self.config.overhead_s(alloc.num_gpus, cost.seconds(self.state.restart_kind(job_id)))
        n = alloc.num_gpus
        seconds = self._overheads.get(n)
        if seconds is None:
            seconds = self._overheads[n] = self.config.overhead_s(n)
        return seconds

    def _push(self, t: float, kind: int, job_id: JobId, version: int) -> None:
        heapq.heappush(self._heap, (t, kind, self._seq, job_id, version))
        self._seq += 1

    def _schedule_triggers(self) -> None:
        """Put the first arrival and the first round the triggers hold on the heap."""
        self._push_arrival()
        if self.triggers.next_round < math.inf:
            self._push(self.triggers.next_round, _ROUND, _NO_JOB, 0)

    def _push_arrival(self) -> None:
        """Put the next arrival on the heap: one at a time, in the order all of them at once would pop."""
        spec = self.triggers.take_arrival()
        if spec is not None:
            self._push(spec.submit_time, _SUBMIT, spec.job_id, 0)

    def _current(self, kind: int, job_id: JobId, version: int) -> bool:
        """Whether a scheduled event still means something (rounds: as the triggers say)."""
        if kind == _ROUND:
            return self.triggers.round_live(self.state)
        return version == self.state.version(job_id)

    def _process(self, kind: int, job_id: JobId) -> bool:
        """Handle one current event; True if it is a decision trigger."""
        state = self.state
        if kind == _ROUND:
            self.triggers.count_round(state)  # the stall rule may stop the rounds here
            if self.triggers.next_round < math.inf:
                self._push(self.triggers.next_round, _ROUND, _NO_JOB, 0)
            return True
        if kind == _SUBMIT:
            state.submit(job_id, self._now)
            self._arrivals.append(job_id)
            self._push_arrival()
            return self._events
        if kind == _RUN:
            finish = state.start_running(job_id, self._now)
            self._push(finish, _FINISH, job_id, state.version(job_id))
            return False
        state.finish(job_id, self._now)
        self._departures.append(job_id)
        return self._events

    def _end(self, t: float) -> None:
        if self._ended:
            return
        self._ended = True
        self._now = max(self._now, t)
        self.state.close(self._now)
        if self.state.queued and not self._heap:
            state = self.state
            self._stuck = tuple(j for j in state.jobs if state.status(j.job_id) is JobStatus.PENDING)
