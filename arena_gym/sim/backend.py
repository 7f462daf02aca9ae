"""SimBackend: the event-driven cluster simulator behind the ClusterBackend protocol.

Semantics (DESIGN.md, "Simulator semantics"): jobs progress at the speed the ground-truth
``PerfModel`` gives their grid, integrated exactly between events; every allocation change
costs a reconfiguration overhead during which the job holds its GPUs and makes no progress;
completions are scheduled at their exact time. Policies see ``belief`` estimates, never the
truth. A decision that breaks an invariant raises :class:`InvalidDecision` and changes nothing.
"""

from __future__ import annotations

import bisect
import heapq
import logging
import math
from collections.abc import Sequence

import numpy as np

from arena_gym.protocols import InvalidDecision, PerfModel
from arena_gym.records import EpisodeRecord, Event, EventKind
from arena_gym.sim.config import SimConfig
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    Decision,
    JobId,
    JobSpec,
    JobStatus,
    JobView,
    Snapshot,
)

log = logging.getLogger(__name__)

# Same-time events run in this order: releases first, then progress starts, then arrivals.
_FINISH, _RUN, _SUBMIT, _ROUND = 0, 1, 2, 3


class _Job:
    """Mutable per-job state, private to the simulator (policies see frozen JobViews)."""

    __slots__ = (
        "spec", "status", "alloc", "done", "mark", "rate", "samples", "run_start", "version",
        "first_start", "attained", "queued", "reconfigs", "preempts", "finish", "view",
    )

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.status = JobStatus.PENDING
        self.alloc: Allocation | None = None
        self.done = 0.0
        self.mark = spec.submit_time
        self.rate = 0.0
        self.samples = 0.0
        self.run_start: float | None = None
        self.version = 0
        self.first_start: float | None = None
        self.attained = 0.0
        self.queued = 0.0
        self.reconfigs = 0
        self.preempts = 0
        self.finish: float | None = None
        self.view: JobView | None = None

    def settle(self, t: float) -> None:
        """Credit progress (or queueing) up to time ``t`` and move the mark there."""
        if self.status is JobStatus.RUNNING:
            dt = t - max(self.mark, self.run_start if self.run_start is not None else self.mark)
            if dt > 0:
                self.done = min(float(self.spec.iterations), self.done + self.rate * dt)
                self.attained += self.alloc.num_gpus * dt  # type: ignore[union-attr]
        elif self.status is JobStatus.PENDING:
            self.queued += t - self.mark
        self.mark = t
        self.view = None


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
        self._capacity = {g.gpu_type: g.gpus_per_node for g in cluster.groups}
        self._reset_state()

    def _reset_state(self) -> None:
        self._now = 0.0
        self._start = 0.0
        self._free = {g.gpu_type: np.full(g.nodes, g.gpus_per_node, dtype=np.int64) for g in self.cluster.groups}
        self._jobs: dict[JobId, _Job] = {}
        self._pending: list[tuple[float, str]] = []  # sorted (submit time, job id): FIFO order
        self._active: dict[JobId, _Job] = {}  # holding GPUs (reconfiguring or running)
        self._heap: list[tuple[float, int, int, JobId, int]] = []
        self._seq = 0
        self._events: list[Event] = []
        self._arrivals: list[JobId] = []
        self._departures: list[JobId] = []
        self._round = 0
        self._stalled_rounds = 0
        self._ap_search = "pruned"
        self._unfinished = 0
        self._ended = False

    # ----------------------------------------------------------------- protocol
    def reset(self, jobs: Sequence[JobSpec], ap_search: str = "pruned") -> Snapshot | None:
        """Load ``jobs`` and run to the first decision point."""
        self.config.overhead.seconds(ap_search, 1)  # validates the class name
        self._reset_state()
        self._ap_search = ap_search
        ids = [j.job_id for j in jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique within a workload")
        for spec in jobs:
            self._jobs[spec.job_id] = _Job(spec)
            self._push(spec.submit_time, _SUBMIT, spec.job_id, 0)
        self._unfinished = len(jobs)
        self._start = min((j.submit_time for j in jobs), default=0.0)
        self._now = self._start
        if self.config.round_s is not None and jobs:
            self._push(self._start, _ROUND, JobId(""), 0)
        return self.advance()

    def now(self) -> float:
        """Simulated time in seconds (the trace's clock)."""
        return self._now

    def close(self) -> None:
        """Nothing to release in simulation."""

    def apply(self, decision: Decision) -> None:
        """Validate the whole decision on scratch state, then commit it; InvalidDecision otherwise."""
        if decision.is_empty:
            return
        plans = self._validate(decision)
        for job in plans[0]:
            self._preempt(job)
        for job, alloc, iter_time in plans[1]:
            self._allocate(job, alloc, iter_time)

    def advance(self) -> Snapshot | None:
        """Process events up to the next decision point; None once drained or past the horizon."""
        self._arrivals, self._departures = [], []
        triggered = False
        horizon = self.config.horizon_s
        while self._heap:
            t = self._heap[0][0]
            if t > horizon or (triggered and t > self._now):
                break
            _, kind, _, job_id, version = heapq.heappop(self._heap)
            self._now = t
            triggered |= self._process(kind, job_id, version)
        if triggered:
            return self._snapshot()
        self._end(min(horizon, self._now) if not self._heap else horizon)
        return None

    # ----------------------------------------------------------------- results
    def record(self, policy: str, decisions: int = 0, decide_wall_s: float = 0.0) -> EpisodeRecord:
        """The episode so far as an EpisodeRecord (call after ``advance`` returned None)."""
        return EpisodeRecord(
            policy=policy,
            cluster=self.cluster,
            jobs=tuple(j.spec for j in self._jobs.values()),
            events=tuple(self._events),
            start_time=self._start,
            end_time=self._now,
            horizon=self.config.horizon_s,
            decisions=decisions,
            decide_wall_s=decide_wall_s,
        )

    @property
    def events(self) -> tuple[Event, ...]:
        """The event log so far."""
        return tuple(self._events)

    def check_invariants(self) -> None:
        """Raise AssertionError if GPU accounting is inconsistent (used by property tests)."""
        used = {t: np.zeros_like(f) for t, f in self._free.items()}
        for job in self._active.values():
            assert job.alloc is not None and job.status in (JobStatus.RUNNING, JobStatus.RECONFIGURING)
            p = job.alloc.placement
            for node in p.nodes:
                used[p.gpu_type][node] += p.gpus_per_node
            assert math.isfinite(self.truth.grid_iter_time(job.spec.model, job.spec.global_batch, job.alloc.grid))
        for g in self.cluster.groups:
            free, u = self._free[g.gpu_type], used[g.gpu_type]
            assert (free >= 0).all(), f"negative free GPUs on {g.gpu_type}"
            assert (free + u == g.gpus_per_node).all(), f"allocated + free != total on {g.gpu_type}"
        for job in self._jobs.values():
            assert 0.0 <= job.done <= job.spec.iterations + 1e-6

    # ----------------------------------------------------------------- internals
    def _push(self, t: float, kind: int, job_id: JobId, version: int) -> None:
        heapq.heappush(self._heap, (t, kind, self._seq, job_id, version))
        self._seq += 1

    def _log(self, kind: EventKind, job: _Job, overhead: float = 0.0) -> None:
        alloc = job.alloc
        gpu_type, n, shape = (alloc.shape.gpu_type, alloc.num_gpus, str(alloc.shape)) if alloc else ("", 0, "")
        rate = job.samples if kind is EventKind.RUN else 0.0
        self._events.append(Event(self._now, kind, job.spec.job_id, gpu_type, n, shape, rate, overhead))

    def _process(self, kind: int, job_id: JobId, version: int) -> bool:
        """Handle one event; True if it is a decision trigger."""
        if kind == _ROUND:
            self._round += 1
            # A round with nothing running and nothing left to happen is a stall; after two in a
            # row (the policy declined to start anything in between) no further round can change
            # anything, so rounds stop and the episode ends instead of looping forever.
            stalled = not self._active and not self._heap
            self._stalled_rounds = self._stalled_rounds + 1 if stalled else 0
            if self._unfinished > 0 and self.config.round_s is not None and self._stalled_rounds < 2:
                self._push(self._now + self.config.round_s, _ROUND, JobId(""), 0)
            return self._unfinished > 0
        job = self._jobs[job_id]
        if version != job.version:
            return False  # stale event of a superseded allocation
        if kind == _SUBMIT:
            job.mark = self._now
            bisect.insort(self._pending, (job.spec.submit_time, job_id))
            self._arrivals.append(job_id)
            self._log(EventKind.SUBMIT, job)
            return self.config.event_decisions
        if kind == _RUN:
            job.settle(self._now)
            job.status = JobStatus.RUNNING
            job.run_start = self._now
            self._log(EventKind.RUN, job)
            self._push(self._now + (job.spec.iterations - job.done) / job.rate, _FINISH, job_id, job.version)
            return False
        # _FINISH
        job.settle(self._now)
        job.done = float(job.spec.iterations)
        self._release(job)
        job.status = JobStatus.FINISHED
        job.finish = self._now
        job.version += 1
        self._unfinished -= 1
        self._departures.append(job_id)
        self._log(EventKind.FINISH, job)
        return self.config.event_decisions

    def _release(self, job: _Job) -> None:
        alloc = job.alloc
        if alloc is not None:
            free = self._free[alloc.placement.gpu_type]
            for node in alloc.placement.nodes:
                free[node] += alloc.placement.gpus_per_node
            self._active.pop(job.spec.job_id, None)

    def _validate(self, decision: Decision) -> tuple[list[_Job], list[tuple[_Job, Allocation, float]]]:
        scratch = {t: f.copy() for t, f in self._free.items()}
        seen: set[JobId] = set()
        preempt: list[_Job] = []
        for job_id in decision.preemptions:
            job = self._known(job_id, seen)
            if job.alloc is None:
                raise InvalidDecision(f"cannot preempt job {job_id}: it holds no GPUs ({job.status.value})")
            self._give_back(scratch, job.alloc)
            preempt.append(job)
        allocate: list[tuple[_Job, Allocation, float]] = []
        for job_id, alloc in decision.allocations:
            job = self._known(job_id, seen)
            if job.status is JobStatus.FINISHED:
                raise InvalidDecision(f"cannot allocate job {job_id}: it has finished")
            if alloc == job.alloc:
                continue  # unchanged: no reconfiguration
            p = alloc.placement
            if p.gpu_type not in scratch:
                raise InvalidDecision(
                    f"job {job_id}: unknown GPU type {p.gpu_type!r}; cluster has {', '.join(self.cluster.gpu_types)}"
                )
            nodes = scratch[p.gpu_type]
            if len(set(p.nodes)) != len(p.nodes) or any(not 0 <= n < len(nodes) for n in p.nodes):
                raise InvalidDecision(f"job {job_id}: bad node list {p.nodes} for {p.gpu_type} (0..{len(nodes) - 1}, distinct)")
            if p.gpus_per_node > self._capacity[p.gpu_type]:
                raise InvalidDecision(f"job {job_id}: {p.gpus_per_node} GPUs per node exceeds {p.gpu_type} node size {self._capacity[p.gpu_type]}")
            iter_time = self.truth.grid_iter_time(job.spec.model, job.spec.global_batch, alloc.grid)
            if not math.isfinite(iter_time) or iter_time <= 0:
                raise InvalidDecision(f"job {job_id}: no feasible plan for {job.spec.model} batch {job.spec.global_batch} on grid {alloc.grid.shape} pp{alloc.grid.n_stages} (out of memory)")
            if job.alloc is not None:
                self._give_back(scratch, job.alloc)
            allocate.append((job, alloc, iter_time))
        for job, alloc, _ in allocate:
            p = alloc.placement
            for node in p.nodes:
                scratch[p.gpu_type][node] -= p.gpus_per_node
                if scratch[p.gpu_type][node] < 0:
                    raise InvalidDecision(
                        f"job {job.spec.job_id}: node {node} of {p.gpu_type} has too few free GPUs for {p.gpus_per_node} more"
                    )
        return preempt, allocate

    def _known(self, job_id: JobId, seen: set[JobId]) -> _Job:
        job = self._jobs.get(job_id)
        if job is None or (job.status is JobStatus.PENDING and not self._is_queued(job)):
            raise InvalidDecision(f"job {job_id} is not in the cluster (unknown or not yet submitted)")
        if job_id in seen:
            raise InvalidDecision(f"job {job_id} appears twice in one decision")
        seen.add(job_id)
        return job

    def _is_queued(self, job: _Job) -> bool:
        key = (job.spec.submit_time, job.spec.job_id)
        i = bisect.bisect_left(self._pending, key)
        return i < len(self._pending) and self._pending[i] == key

    @staticmethod
    def _give_back(scratch: dict[str, np.ndarray], alloc: Allocation) -> None:
        p = alloc.placement
        for node in p.nodes:
            scratch[p.gpu_type][node] += p.gpus_per_node

    def _preempt(self, job: _Job) -> None:
        job.settle(self._now)
        self._log(EventKind.PREEMPT, job)
        self._release(job)
        job.alloc = None
        job.status = JobStatus.PENDING
        job.rate = job.samples = 0.0
        job.run_start = None
        job.version += 1
        job.preempts += 1
        bisect.insort(self._pending, (job.spec.submit_time, job.spec.job_id))

    def _allocate(self, job: _Job, alloc: Allocation, iter_time: float) -> None:
        job.settle(self._now)
        if job.alloc is None:
            del self._pending[bisect.bisect_left(self._pending, (job.spec.submit_time, job.spec.job_id))]
        else:
            self._release(job)
        if job.first_start is None:
            job.first_start = self._now
        else:
            job.reconfigs += 1
        p = alloc.placement
        free = self._free[p.gpu_type]
        for node in p.nodes:
            free[node] -= p.gpus_per_node
        job.alloc = alloc
        self._active[job.spec.job_id] = job
        job.rate = 1.0 / iter_time
        job.samples = job.spec.global_batch / iter_time
        job.version += 1
        overhead = self.config.overhead.seconds(self._ap_search, alloc.num_gpus)
        job.status = JobStatus.RECONFIGURING
        job.run_start = self._now + overhead
        self._log(EventKind.ALLOCATE, job, overhead)
        self._push(self._now + overhead, _RUN, job.spec.job_id, job.version)

    def _view(self, job: _Job) -> JobView:
        if job.view is None:
            job.view = JobView(
                spec=job.spec,
                status=job.status,
                allocation=job.alloc,
                done_at_mark=job.done,
                mark_time=job.mark,
                rate=job.rate if job.status is JobStatus.RUNNING else 0.0,
                run_start=job.run_start,
                first_start=job.first_start,
                attained_gpu_s=job.attained,
                queued_s_at_mark=job.queued,
                reconfigurations=job.reconfigs,
                preemptions=job.preempts,
            )
        return job.view

    def _snapshot(self) -> Snapshot:
        jobs = self._jobs
        free = {}
        for t, f in self._free.items():
            c = f.copy()
            c.flags.writeable = False
            free[t] = c
        return Snapshot(
            now=self._now,
            cluster=self.cluster,
            free=free,
            pending=tuple(self._view(jobs[JobId(k[1])]) for k in self._pending),
            running=tuple(self._view(j) for j in self._active.values()),
            perf=self.belief,
            arrivals=tuple(self._arrivals),
            departures=tuple(self._departures),
            round_index=self._round,
            horizon=self.config.horizon_s,
        )

    def _end(self, t: float) -> None:
        if self._ended:
            return
        self._ended = True
        self._now = max(self._now, t) if math.isfinite(t) else self._now
        for job in self._jobs.values():
            if job.status is not JobStatus.FINISHED:
                job.settle(self._now)
        stuck = len(self._pending)
        if stuck and not self._heap:
            log.warning("episode ended with %d job(s) never scheduled (no event left to wait for)", stuck)
