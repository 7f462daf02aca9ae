"""ClusterState: the cluster core both backends share.

It owns decision validation, GPU accounting, per-job state, snapshots and the event log. It
has no clock: every operation takes the time ``t`` from its caller (simulated time for
:class:`arena_gym.sim.SimBackend`, wall-clock seconds since the start for a live backend),
and times must never go backwards. The lifecycle of a job::

    submit -> [allocate -> start_running (-> update_progress | fail -> start_running)*
               -> preempt | allocate (resize, move) ...] -> finish

Every operation is also appended to the state's operation log (:mod:`arena_gym.core.oplog`):
replayed into a state loaded with the same workload, it rebuilds the job states and the event
log exactly. ``docs/simulator.md`` spells out what a backend calls, in which order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from arena_gym.core.job import JobState
from arena_gym.core.observed import Observer
from arena_gym.core.oplog import Close, Commit, Fail, Finish, Op, Progress, Run, Submit
from arena_gym.core.queue import JobQueue
from arena_gym.core.views import ActiveViews, Epoch, QueueViews
from arena_gym.protocols import InvalidDecision
from arena_gym.records import EpisodeRecord, Event, EventKind
from arena_gym.restarts import RestartKind
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    Decision,
    JobId,
    JobSpec,
    JobStatus,
    JobView,
    PerfModel,
    Snapshot,
)


def _no_overhead(job_id: JobId, alloc: Allocation) -> float:
    """No reconfiguration overhead (a live backend's default: the RUN event tells the real one)."""
    return 0.0


@dataclass(frozen=True, slots=True)
class CheckedDecision:
    """A decision that passed :meth:`ClusterState.validate`, in the order to commit it.

    ``allocations`` hold (job, allocation, iteration time on it per the state's ``truth``);
    allocations equal to what a job already holds are dropped (no reconfiguration). It can
    be committed only to the state it was validated against, unchanged since (``epoch``).
    """

    preemptions: tuple[JobId, ...]
    allocations: tuple[tuple[JobId, Allocation, float], ...]
    epoch: int

    @property
    def is_empty(self) -> bool:
        """True when committing it changes nothing."""
        return not self.preemptions and not self.allocations


class _Scratch(dict[str, np.ndarray]):
    """Free GPUs per node of each type, copied from ``source`` when a type is first read (validation scratch)."""

    def __init__(self, source: dict[str, np.ndarray]) -> None:
        super().__init__()
        self._source = source

    def __contains__(self, gpu_type: object) -> bool:
        return gpu_type in self._source

    def __missing__(self, gpu_type: str) -> np.ndarray:
        copy = self[gpu_type] = self._source[gpu_type].copy()
        return copy


class ClusterState:
    """GPU accounting, job states, snapshots and the event log of one cluster (no clock).

    ``truth`` decides feasibility (a job never runs on a plan it calls infeasible) and gives
    the expected iteration time of an allocation; ``belief`` is the model snapshots hand to
    policies; ``horizon`` is copied into snapshots. Call :meth:`load` to start an episode.
    """

    def __init__(
        self, cluster: ClusterSpec, truth: PerfModel, belief: PerfModel | None = None, horizon: float = math.inf
    ) -> None:
        self.cluster = cluster
        self.truth = truth
        self.belief = belief if belief is not None else truth
        self.horizon = horizon
        self._capacity = {g.gpu_type: g.gpus_per_node for g in cluster.groups}
        self._epoch = Epoch()
        self.load(())

    # ------------------------------------------------------------------ workload
    def load(self, jobs: Sequence[JobSpec]) -> None:
        """Forget everything and register a workload (unique ids); no job is submitted yet."""
        ids = [j.job_id for j in jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique within a workload")
        self._free: dict[str, np.ndarray] = {
            g.gpu_type: np.full(g.nodes, g.gpus_per_node, dtype=np.int64) for g in self.cluster.groups
        }
        self._free_ro: dict[str, np.ndarray] = {}
        self._jobs: dict[JobId, JobState] = {spec.job_id: JobState(spec) for spec in jobs}
        self._queue = JobQueue()  # waiting jobs: FIFO order, indexed by requested type and configuration
        self._active: dict[JobId, JobState] = {}  # holding GPUs (reconfiguring or running)
        self._events: list[Event] = []
        self._ops: list[Op] = []
        self._unsubmitted = len(self._jobs)
        self._unfinished = len(self._jobs)
        self._clock = -math.inf
        self._epoch.value += 1  # never repeats: views of an earlier episode go stale
        self._observers: dict[str, Observer] = {}

    def fork(self) -> ClusterState:
        """An independent copy of the whole state (performance models shared, finished jobs shared: they never change).

        Under the same operations the copy and the original go on identically.
        """
        new = ClusterState.__new__(ClusterState)
        new.cluster, new.truth, new.belief, new.horizon = self.cluster, self.truth, self.belief, self.horizon
        new._capacity = self._capacity
        new._free = {t: free.copy() for t, free in self._free.items()}
        new._free_ro = {}
        finished = JobStatus.FINISHED
        new._jobs = {j: job if job.status is finished else job.copy() for j, job in self._jobs.items()}
        new._queue = self._queue.copy()
        new._active = {j: new._jobs[j] for j in self._active}
        new._events = list(self._events)
        new._ops = list(self._ops)
        new._unsubmitted, new._unfinished = self._unsubmitted, self._unfinished
        new._clock, new._epoch = self._clock, Epoch(self._epoch.value)
        new._observers = {viewer: observer.copy() for viewer, observer in self._observers.items()}
        return new

    def restore(self, now: float, current: Sequence[tuple[JobSpec, JobView]], future: Sequence[JobSpec]) -> None:
        """Start from a moment of another episode: ``current`` jobs as their views say at ``now``, ``future`` ones to come.

        Each current job takes the state its view shows (status, allocation, progress, attained
        service, queueing, counters) with the spec given beside it (the same job, perhaps with
        another length: a sampled world); progress is settled at ``now``. A running job keeps
        its view's rate; a reconfiguring one gets ``truth``'s rate of its grid. The future jobs
        are loaded unsubmitted. The event log and the operation log start empty (a replay of
        the log applies to a state restored the same way); times start at ``now``.
        """
        self.load([*(spec for spec, _ in current), *future])
        for spec, view in current:
            if view.job_id != spec.job_id or view.status is JobStatus.FINISHED:
                raise ValueError(
                    f"cannot restore job {spec.job_id} from the view of {view.job_id} ({view.status.value})"
                )
            job = self._jobs[spec.job_id]
            job.submitted = True
            self._unsubmitted -= 1
            job.status, job.alloc, job.mark = view.status, view.allocation, now
            job.done = min(float(spec.iterations), view.iterations_done(now))
            job.attained, job.queued = view.attained_gpu_seconds(now), view.queued_s(now)
            job.first_start, job.reconfigs, job.preempts = view.first_start, view.reconfigurations, view.preemptions
            if view.allocation is None:
                self._queue.add(spec)
                continue
            p = view.allocation.placement
            free = self._free[p.gpu_type]
            for node in p.nodes:
                free[node] -= p.gpus_per_node
            if (free < 0).any():
                raise ValueError(f"cannot restore job {spec.job_id}: its GPUs on {p.gpu_type} are taken twice")
            self._active[spec.job_id] = job
            if view.status is JobStatus.RUNNING and view.rate > 0:
                self._set_rate(job, 1.0 / view.rate)
            else:
                self._set_rate(job, self.truth.grid_iter_time(spec.model, spec.global_batch, view.allocation.grid))
            job.run_start = view.run_start
            job.version = 1
        self._clock = now

    # ------------------------------------------------------------------ reads
    @property
    def epoch(self) -> int:
        """A counter that moves on every change (lazy snapshot views check it)."""
        return self._epoch.value

    @property
    def unfinished(self) -> int:
        """Jobs of the workload not finished yet (submitted or not)."""
        return self._unfinished

    @property
    def unsubmitted(self) -> int:
        """Jobs of the workload not submitted yet."""
        return self._unsubmitted

    @property
    def queued(self) -> int:
        """Jobs waiting in the queue."""
        return len(self._queue)

    @property
    def active(self) -> tuple[JobId, ...]:
        """Jobs holding GPUs (reconfiguring or running), in allocation order."""
        return tuple(self._active)

    @property
    def events(self) -> tuple[Event, ...]:
        """The event log so far."""
        return tuple(self._events)

    def events_since(self, index: int) -> tuple[Event, ...]:
        """The events logged after the first ``index`` ones (O(new events), for incremental readers)."""
        return tuple(self._events[index:])

    @property
    def n_events(self) -> int:
        """How many events the log holds."""
        return len(self._events)

    @property
    def ops(self) -> tuple[Op, ...]:
        """The operation log so far (:mod:`arena_gym.core.oplog`)."""
        return tuple(self._ops)

    def ops_since(self, index: int) -> tuple[Op, ...]:
        """The operations logged after the first ``index`` ones."""
        return tuple(self._ops[index:])

    @property
    def n_ops(self) -> int:
        """How many operations the log holds."""
        return len(self._ops)

    @property
    def jobs(self) -> tuple[JobSpec, ...]:
        """The loaded workload, in load order."""
        return tuple(j.spec for j in self._jobs.values())

    def view(self, job_id: JobId) -> JobView:
        """The frozen view of any loaded job (KeyError if unknown)."""
        return self._jobs[job_id].frozen()

    def status(self, job_id: JobId) -> JobStatus:
        """A loaded job's status (a job not yet submitted is PENDING)."""
        return self._jobs[job_id].status

    def spec(self, job_id: JobId) -> JobSpec:
        """A loaded job's spec (KeyError if unknown)."""
        return self._jobs[job_id].spec

    def restart_kind(self, job_id: JobId) -> RestartKind:
        """What allocating the job now would be: its first start, a resume from the queue, or a move."""
        job = self._jobs[job_id]
        if job.first_start is None:
            return RestartKind.FIRST
        return RestartKind.RESUME if job.alloc is None else RestartKind.MOVE

    def version(self, job_id: JobId) -> int:
        """Changes whenever the job's expected start of progress or completion becomes void."""
        return self._jobs[job_id].version

    def expected_finish(self, job_id: JobId, now: float) -> float:
        """When a running job completes at its current rate, seen from ``now``."""
        job = self._jobs[job_id]
        return now + (job.spec.iterations - job.iterations_at(now)) / job.rate

    def free(self, gpu_type: str) -> np.ndarray:
        """A read-only array of free GPUs per node of a type."""
        return self._free_view(gpu_type)

    # ------------------------------------------------------------------ decisions
    def validate(self, decision: Decision) -> CheckedDecision:
        """Check a whole decision against the current state; InvalidDecision naming the problem, nothing changed.

        Preemptions count first (their GPUs are free for the allocations), then every
        allocation: the job is submitted and unfinished, named once, its GPU type, nodes and
        GPUs per node exist, its grid is feasible for ``truth``, and every node has the GPUs.
        """
        scratch = _Scratch(self._free)
        seen: set[JobId] = set()
        preempt: list[JobId] = []
        for job_id in decision.preemptions:
            job = self._known(job_id, seen)
            if job.alloc is None:
                raise InvalidDecision(f"cannot preempt job {job_id}: it holds no GPUs ({job.status.value})")
            self._give_back(scratch, job.alloc)
            preempt.append(job_id)
        allocate: list[tuple[JobId, Allocation, float]] = []
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
                raise InvalidDecision(
                    f"job {job_id}: bad node list {p.nodes} for {p.gpu_type} (0..{len(nodes) - 1}, distinct)"
                )
            if p.gpus_per_node > self._capacity[p.gpu_type]:
                raise InvalidDecision(
                    f"job {job_id}: {p.gpus_per_node} GPUs per node exceeds {p.gpu_type} node size {self._capacity[p.gpu_type]}"
                )
            iter_time = self.truth.grid_iter_time(job.spec.model, job.spec.global_batch, alloc.grid)
            if not math.isfinite(iter_time) or iter_time <= 0:
                raise InvalidDecision(
                    f"job {job_id}: no feasible plan for {job.spec.model} batch {job.spec.global_batch} on grid {alloc.grid.shape} pp{alloc.grid.n_stages} (out of memory)"
                )
            if job.alloc is not None:
                self._give_back(scratch, job.alloc)
            allocate.append((job_id, alloc, iter_time))
        for job_id, alloc, _ in allocate:
            p = alloc.placement
            for node in p.nodes:
                scratch[p.gpu_type][node] -= p.gpus_per_node
                if scratch[p.gpu_type][node] < 0:
                    raise InvalidDecision(
                        f"job {job_id}: node {node} of {p.gpu_type} has too few free GPUs for {p.gpus_per_node} more"
                    )
        return CheckedDecision(tuple(preempt), tuple(allocate), self._epoch.value)

    # ------------------------------------------------------------------ transitions
    def commit(
        self, checked: CheckedDecision, t: float, overhead_s: Callable[[JobId, Allocation], float] = _no_overhead
    ) -> None:
        """Commit a validated decision at ``t``: its preemptions, then its allocations.

        Each allocated job is RECONFIGURING and expected to make progress after
        ``overhead_s(job, allocation)`` seconds, asked before anything changes (logged with its
        ALLOCATE event; a live backend that cannot know it passes the default 0 and the RUN event
        tells the real one).
        """
        if checked.epoch != self._epoch.value:
            raise ValueError("the decision was validated against an older state; validate it again")
        self._check_time(t)
        overheads = [overhead_s(job_id, alloc) for job_id, alloc, _ in checked.allocations]
        if not all(o >= 0 and math.isfinite(o) for o in overheads):
            raise ValueError(f"reconfiguration overheads must be finite and >= 0, got {overheads}")
        for job_id in checked.preemptions:
            self._preempt(self._jobs[job_id], t)
        for (job_id, alloc, iter_time), overhead in zip(checked.allocations, overheads):
            self._allocate(self._jobs[job_id], alloc, t, iter_time, overhead)
        if not checked.is_empty:
            self._tick(t)
            allocations = tuple([(job_id, alloc) for job_id, alloc, _ in checked.allocations])
            self._ops.append(Commit(t, checked.preemptions, allocations, tuple(overheads)))

    def apply(
        self, decision: Decision, t: float, overhead_s: Callable[[JobId, Allocation], float] = _no_overhead
    ) -> CheckedDecision:
        """:meth:`validate` then :meth:`commit` (InvalidDecision: nothing changed); returns what was committed."""
        checked = self.validate(decision)
        self.commit(checked, t, overhead_s)
        return checked

    def submit(self, job_id: JobId, t: float) -> None:
        """The job enters the queue at ``t`` (SUBMIT)."""
        job = self._job(job_id, t)
        if job.submitted:
            raise ValueError(f"job {job_id} was submitted already")
        self._tick(t)
        job.submitted = True
        job.mark = t
        job.view = None
        self._unsubmitted -= 1
        self._queue.add(job.spec)
        self._log(t, EventKind.SUBMIT, job)
        self._ops.append(Submit(t, job_id))

    def preempt(self, job_id: JobId, t: float) -> None:
        """The job gives its GPUs back and re-queues (PREEMPT); its progress so far is kept."""
        self.apply(Decision(preemptions=(job_id,)), t)

    def allocate(self, job_id: JobId, alloc: Allocation, t: float, overhead_s: float = 0.0) -> None:
        """The job takes ``alloc`` (from the queue, or instead of what it holds) and is RECONFIGURING (ALLOCATE).

        The one-job form of :meth:`apply` (validated the same way; InvalidDecision otherwise).
        """
        self.apply(Decision(allocations=((job_id, alloc),)), t, lambda _job, _alloc: overhead_s)

    def start_running(self, job_id: JobId, t: float, iter_time: float | None = None) -> float:
        """Overhead paid: the job makes progress from ``t`` (RUN); returns its expected completion time.

        ``iter_time`` replaces the expected seconds per iteration (a live backend passes the
        first measured one); by default the allocation's expected time holds.
        """
        job = self._job(job_id, t)
        if job.status is not JobStatus.RECONFIGURING:
            raise ValueError(f"job {job_id} cannot start running: it is {job.status.value}, not reconfiguring")
        if iter_time is not None:
            self._check_iter_time(job, iter_time)
        self._tick(t)
        job.settle(t)
        if iter_time is not None:
            self._set_rate(job, iter_time)
        job.status = JobStatus.RUNNING
        job.run_start = t
        self._log(t, EventKind.RUN, job)
        self._ops.append(Run(t, job_id, iter_time))
        return t + (job.spec.iterations - job.done) / job.rate

    def update_progress(self, job_id: JobId, t: float, iterations_done: float, iter_time: float) -> float:
        """A measured progress report of a running job (PROGRESS); returns its new expected completion time.

        ``iterations_done`` replaces the extrapolated count (clipped to the job's iterations);
        ``iter_time`` is the measured seconds per iteration from now on.
        """
        job = self._job(job_id, t)
        if job.status is not JobStatus.RUNNING:
            raise ValueError(f"job {job_id} reports progress but is {job.status.value}, not running")
        if not (iterations_done >= 0 and math.isfinite(iterations_done)):
            raise ValueError(f"job {job_id}: iterations_done must be finite and >= 0, got {iterations_done}")
        self._check_iter_time(job, iter_time)
        self._tick(t)
        job.settle(t)
        job.done = min(float(job.spec.iterations), float(iterations_done))
        self._set_rate(job, iter_time)
        job.version += 1
        self._log(t, EventKind.PROGRESS, job)
        self._ops.append(Progress(t, job_id, float(iterations_done), iter_time))
        return t + (job.spec.iterations - job.done) / job.rate

    def fail(self, job_id: JobId, t: float, iterations_done: float, reason: str = "") -> None:
        """The job's processes failed and are being relaunched on the same GPUs (FAIL).

        Progress falls back to ``iterations_done`` (the checkpoint it resumes from; never more
        than it had); the job holds its GPUs, is RECONFIGURING, and runs again at the next
        :meth:`start_running`. ``reason`` goes into the operation log.
        """
        job = self._job(job_id, t)
        if job.alloc is None:
            raise ValueError(f"job {job_id} cannot fail: it holds no GPUs ({job.status.value})")
        self._tick(t)
        job.settle(t)
        job.done = max(0.0, min(job.done, float(iterations_done)))
        job.status = JobStatus.RECONFIGURING
        job.run_start = None
        job.version += 1
        job.failures += 1
        self._log(t, EventKind.FAIL, job)
        self._ops.append(Fail(t, job_id, float(iterations_done), reason))

    def finish(self, job_id: JobId, t: float) -> None:
        """The job completed all its iterations and releases its GPUs (FINISH)."""
        job = self._job(job_id, t)
        if job.status is not JobStatus.RUNNING:
            raise ValueError(f"job {job_id} cannot finish: it is {job.status.value}, not running")
        self._tick(t)
        job.settle(t)
        job.done = float(job.spec.iterations)
        self._release(job)
        job.status = JobStatus.FINISHED
        job.finish = t
        job.version += 1
        self._unfinished -= 1
        self._log(t, EventKind.FINISH, job)
        self._ops.append(Finish(t, job_id))

    def close(self, t: float) -> None:
        """End of the episode at ``t``: credit the progress and queueing of every unfinished job up to ``t``."""
        self._check_time(t)
        self._tick(t)
        for job in self._jobs.values():
            if job.submitted and job.status is not JobStatus.FINISHED:
                job.settle(t)
        self._observers.clear()  # settling logs no event: observers start over if asked again
        self._ops.append(Close(t))

    # ------------------------------------------------------------------ outputs
    def snapshot(
        self,
        now: float,
        arrivals: Iterable[JobId] = (),
        departures: Iterable[JobId] = (),
        round_index: int = 0,
    ) -> Snapshot:
        """A snapshot at ``now``: O(1) to build; its job views are read lazily (valid until the next change).

        The snapshot's ``observe(viewer)`` is :meth:`observed` at the same moment.
        """
        arrived, departed = tuple(arrivals), tuple(departures)
        epoch = self._epoch
        return Snapshot(
            now=now,
            cluster=self.cluster,
            free={t: self._free_view(t) for t in self._free},
            pending=QueueViews(epoch, self._queue.keys, self._jobs, self._queue),
            running=ActiveViews(epoch, self._active),
            perf=self.belief,
            arrivals=arrived,
            departures=departed,
            round_index=round_index,
            horizon=self.horizon,
            observe=lambda viewer: self.observed(viewer, now, arrived, departed, round_index, epoch.value),
        )

    def observed(
        self,
        viewer: str,
        now: float,
        arrivals: tuple[JobId, ...] = (),
        departures: tuple[JobId, ...] = (),
        round_index: int = 0,
        epoch: int | None = None,
    ) -> Snapshot:
        """The snapshot at ``now`` as the non-clairvoyant policy ``viewer`` observes it (:mod:`arena_gym.core.observed`).

        Its job views come from the viewer's :class:`~arena_gym.core.observed.Observer`, kept
        up to date here; it has no ``observe``. ``epoch``, when given, must be
        the state's (RuntimeError: a stale snapshot).
        """
        if epoch is not None and epoch != self._epoch.value:
            raise RuntimeError("stale snapshot: the backend has changed since this snapshot was taken")
        observer = self._observer(viewer)
        return Snapshot(
            now=now,
            cluster=self.cluster,
            free={t: self._free_view(t) for t in self._free},
            pending=QueueViews(self._epoch, self._queue.keys, observer.jobs, self._queue),
            running=ActiveViews(self._epoch, observer.active),
            perf=self.belief,
            arrivals=arrivals,
            departures=departures,
            round_index=round_index,
            horizon=self.horizon,
        )

    def record(
        self, policy: str, start_time: float, end_time: float, decisions: int = 0, decide_wall_s: float = 0.0
    ) -> EpisodeRecord:
        """The workload and event log as an EpisodeRecord spanning ``[start_time, end_time]``."""
        return EpisodeRecord(
            policy=policy,
            cluster=self.cluster,
            jobs=self.jobs,
            events=self.events,
            start_time=start_time,
            end_time=end_time,
            horizon=self.horizon,
            decisions=decisions,
            decide_wall_s=decide_wall_s,
        )

    def check_invariants(self) -> None:
        """Raise AssertionError if the accounting is inconsistent.

        Every GPU belongs to at most one job; allocated + free = total per node; every job
        holding GPUs does so on a plan ``truth`` calls feasible; progress stays within bounds;
        the queue holds exactly the submitted jobs without GPUs.
        """
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
        queued = {k[1] for k in self._queue.keys}
        assert len(queued) == len(self._queue), "a job is queued twice"
        self._queue.check()
        for job_id, job in self._jobs.items():
            assert 0.0 <= job.done <= job.spec.iterations + 1e-6
            assert (job_id in queued) == job.queued_now, f"job {job_id}: queue membership disagrees with its status"
            assert (job_id in self._active) == (job.alloc is not None and job.status is not JobStatus.FINISHED)

    # ------------------------------------------------------------------ internals
    def _observer(self, viewer: str) -> Observer:
        """``viewer``'s observer, brought up to date with the event log."""
        observer = self._observers.get(viewer)
        jobs, events = self._jobs, self._events
        if observer is None:
            observer = self._observers[viewer] = Observer(viewer)
            finished = JobStatus.FINISHED
            current = [job.frozen() for job in jobs.values() if job.submitted and job.status is not finished]
            observer.rebuild(current, list(self._active), len(events))
        elif observer.seen < len(events):
            new = events[observer.seen :]
            observer.follow(new, {event.job_id: jobs[event.job_id].frozen() for event in new})
        return observer

    def _job(self, job_id: JobId, t: float) -> JobState:
        job = self._jobs.get(job_id)
        if job is None:
            raise KeyError(f"job {job_id} is not in the workload")
        self._check_time(t)
        return job

    def _check_time(self, t: float) -> None:
        if not t >= self._clock:
            raise ValueError(f"time went backwards: {t} after {self._clock}")

    def _tick(self, t: float) -> None:
        self._clock = t
        self._epoch.value += 1

    def _preempt(self, job: JobState, t: float) -> None:
        job.settle(t)
        self._log(t, EventKind.PREEMPT, job)
        self._release(job)
        job.alloc = None
        job.status = JobStatus.PENDING
        job.rate = job.samples = 0.0
        job.run_start = None
        job.version += 1
        job.preempts += 1
        self._queue.add(job.spec)

    def _allocate(self, job: JobState, alloc: Allocation, t: float, iter_time: float, overhead_s: float) -> None:
        job.settle(t)
        if job.alloc is None:
            self._queue.remove(job.spec)
        else:
            self._release(job)
        if job.first_start is None:
            job.first_start = t
        else:
            job.reconfigs += 1
        p = alloc.placement
        free = self._free[p.gpu_type]
        for node in p.nodes:
            free[node] -= p.gpus_per_node
        self._free_ro.pop(p.gpu_type, None)
        job.alloc = alloc
        self._active[job.spec.job_id] = job
        self._set_rate(job, iter_time)
        job.version += 1
        job.status = JobStatus.RECONFIGURING
        job.run_start = t + overhead_s
        self._log(t, EventKind.ALLOCATE, job, overhead_s)

    def _known(self, job_id: JobId, seen: set[JobId]) -> JobState:
        job = self._jobs.get(job_id)
        if job is None or not job.submitted:
            raise InvalidDecision(f"job {job_id} is not in the cluster (unknown or not yet submitted)")
        if job_id in seen:
            raise InvalidDecision(f"job {job_id} appears twice in one decision")
        seen.add(job_id)
        return job

    @staticmethod
    def _give_back(scratch: dict[str, np.ndarray], alloc: Allocation) -> None:
        p = alloc.placement
        for node in p.nodes:
            scratch[p.gpu_type][node] += p.gpus_per_node

    def _release(self, job: JobState) -> None:
        alloc = job.alloc
        if alloc is not None:
            p = alloc.placement
            free = self._free[p.gpu_type]
            for node in p.nodes:
                free[node] += p.gpus_per_node
            self._free_ro.pop(p.gpu_type, None)
            self._active.pop(job.spec.job_id, None)

    def _free_view(self, gpu_type: str) -> np.ndarray:
        view = self._free_ro.get(gpu_type)
        if view is None:
            view = self._free[gpu_type].copy()
            view.flags.writeable = False
            self._free_ro[gpu_type] = view
        return view

    @staticmethod
    def _check_iter_time(job: JobState, iter_time: float) -> None:
        if not (iter_time > 0 and math.isfinite(iter_time)):
            raise ValueError(f"job {job.spec.job_id}: iteration time must be finite and > 0, got {iter_time}")

    @staticmethod
    def _set_rate(job: JobState, iter_time: float) -> None:
        job.rate = 1.0 / iter_time
        job.samples = job.spec.global_batch / iter_time

    def _log(self, t: float, kind: EventKind, job: JobState, overhead: float = 0.0) -> None:
        alloc = job.alloc
        gpu_type, n, shape = (alloc.shape.gpu_type, alloc.num_gpus, str(alloc.shape)) if alloc else ("", 0, "")
        rate = job.samples if kind in (EventKind.RUN, EventKind.PROGRESS) else 0.0
        self._events.append(Event(t, kind, job.spec.job_id, gpu_type, n, shape, rate, overhead))
