"""LiveBackend: the cluster core on the wall clock, driving real training jobs on a testbed.

It implements :class:`arena_gym.protocols.ClusterBackend` on top of the shared
:class:`arena_gym.core.ClusterState` (``docs/simulator.md`` lists what a live backend calls):

* the trace is replayed on the wall clock (t = seconds since the deployment began): a job is
  submitted when its submit time has come;
* a decision becomes processes: a preempted job's generation is stopped gracefully (SIGTERM:
  checkpoint, exit 0), a moved or resized job's too, and a new generation is launched on the
  allocation's device slots with the allocation's plan (or the belief's), made executable by
  :mod:`real_runner.live.planning`. New generations are pre-launched (held: they import torch
  while the old ones save) and released once the slots they need are free of other processes;
* the jobs' progress channels feed the core: the first step of a generation is its RUN (so the
  logged reconfiguration overhead, ALLOCATE to RUN, is the real one), measured rates become
  PROGRESS events, the ``done`` record a FINISH;
* faults: a rank that exits non-zero, a generation whose progress goes stale, or one that never
  starts is killed (every rank, by pid) and relaunched from its latest checkpoint on the same
  devices (a FAIL event), at most ``max_retries`` times per job;
* every operation on the cluster state and every generation is journaled (:mod:`real_runner.live.journal`)
  before processes are launched for it, so :meth:`reset` on the journal of an interrupted
  deployment rebuilds the state, reattaches to the generations still running, relaunches the
  others from their checkpoints and goes on.

Decision points: arrivals, completions and failures (``event_decisions``) and optional rounds, as
the core's :class:`~arena_gym.core.triggers.Triggers` say on the wall clock: the same object
the simulator drives, so both decide at the same times (rounds from the first submission, rounds
stopping after two stalled ones, the horizon).
This module is the protocol and the controller's cycle; :mod:`.reports` translates progress
records, :mod:`.processes` runs the generations and handles their faults, :mod:`.resume` takes
over an interrupted deployment, :mod:`.state` keeps the clock and the journaled state.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from arena_gym.core import ClusterState
from arena_gym.core.oplog import Close, Submit
from arena_gym.core.triggers import Triggers
from arena_gym.protocols import InvalidDecision
from arena_gym.records import EpisodeRecord
from arena_gym.types import Decision, JobId, JobSpec, PerfModel, Snapshot
from estimator.zoo import get_model
from real_runner.checkpoint_files import JobIdentity
from real_runner.launchers.base import GenerationHandle, Launcher
from real_runner.live.config import LiveConfig
from real_runner.live.devices import DeviceMap
from real_runner.live.generations import LiveJob, dirname
from real_runner.live.journal import Journal, JournalError
from real_runner.live.json_forms import job_from_dict, job_to_dict
from real_runner.live.planning import executable_plan
from real_runner.live.processes import Processes
from real_runner.live.reports import ProgressReader
from real_runner.live.resume import resume
from real_runner.live.state import JournaledState, LiveError
from real_runner.live.status import JobLine, LiveStatus, live_status
from real_runner.plans import ExecutedPlan
from real_runner.testbed import Testbed

__all__ = ["JobLine", "LiveBackend", "LiveError", "LiveStatus"]

log = logging.getLogger(__name__)


class LiveBackend:
    """A :class:`~arena_gym.protocols.ClusterBackend` that runs the jobs as real training processes.

    ``testbed`` gives the devices (its one-type cluster is what policies see), ``perf`` the model
    that decides feasibility and expected iteration times, ``belief`` what snapshots hand to
    policies (default ``perf``); ``run_dir`` holds a directory per job (worker specs, logs,
    progress channel, checkpoints) and, unless ``journal`` is given, the journal. ``launcher``
    starts generations, ``env`` is the workers' base environment, ``cores`` the CPU cores this
    controller may pin to (default: its affinity). ``on_status`` receives a :class:`LiveStatus`
    every ``config.status_every_s``; ``interrupt`` is polled and, when true, ends :meth:`advance`
    with KeyboardInterrupt at a safe point. ``clock``/``sleep``: the wall clock (epoch seconds)
    and the wait.
    """

    def __init__(
        self,
        testbed: Testbed,
        perf: PerfModel,
        run_dir: str | Path,
        launcher: Launcher,
        *,
        belief: PerfModel | None = None,
        config: LiveConfig | None = None,
        journal: Journal | None = None,
        env: Mapping[str, str] | None = None,
        cores: Iterable[int] | None = None,
        on_status: Callable[[LiveStatus], None] | None = None,
        interrupt: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.testbed = testbed
        self.cluster = testbed.cluster()
        self.perf = perf
        self.belief = belief if belief is not None else perf
        self.config = config if config is not None else LiveConfig()
        if self.config.precision == "auto":  # the run's setting first, then the testbed's
            self.config = replace(self.config, precision=testbed.precision)
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.launcher = launcher
        self.journal = journal if journal is not None else Journal(self.run_dir / Journal.FILENAME)
        self.env = dict(env or {})
        self.cores = sorted(cores) if cores is not None else sorted(os.sched_getaffinity(0))
        self.oversubscription = testbed.oversubscription(len(self.cores))
        self.devices = DeviceMap(testbed, self.cores)
        if self.oversubscription > 1 or self.devices.oversubscribed:
            log.warning(
                "testbed %s: %d CPU devices on %d core(s), oversubscribed %.1fx: its jobs slow each other down",
                testbed.name,
                testbed.total_devices,
                len(self.cores),
                self.oversubscription,
            )
        self.state = ClusterState(self.cluster, perf, self.belief, self.config.horizon_s)
        self.on_status, self.interrupt = on_status, interrupt
        self._sleep = sleep
        self.books = JournaledState(self.state, self.journal, clock)
        self.reader = ProgressReader(self.books, self.config, self._finished)
        self.processes = Processes(self.books, self.reader, launcher, self.config, self.env, not testbed.is_cpu, sleep)
        self.triggers = Triggers(self.config.schedule)
        self._submitted: set[JobId] = set()
        self._arrivals: list[JobId] = []
        self._departures: list[JobId] = []
        self._next_status = 0.0
        self._prior_decisions = 0
        self._prior_wall = 0.0
        self._closed = False
        self.resumed = False

    # ------------------------------------------------------------------ protocol
    def reset(self, jobs: Sequence[JobSpec]) -> Snapshot | None:
        """Start the deployment of ``jobs``, or resume it from the journal of an interrupted one; first decision point."""
        jobs = tuple(jobs)
        self.state.load(jobs)
        self.processes.load(LiveJob(j, self.run_dir / "jobs" / dirname(j.job_id), self._identity(j)) for j in jobs)
        self.triggers.reset(jobs)
        self._arrivals, self._departures = [], []
        journaled = self.journal.meta("workload")
        if journaled is None and (self.journal.ops() or self.journal.generations()):
            raise JournalError(f"journal {self.journal.path}: holds operations but no workload (damaged)")
        if journaled is None:
            self.books.start(self.books.clock())
            with self.journal.transaction():
                self.journal.set_meta("workload", [job_to_dict(j) for j in jobs])
                self.journal.set_meta("t0", self.books.t0)
                self.journal.set_meta("status", "running")
        else:
            try:
                workload = [job_from_dict(d) for d in journaled]
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise JournalError(f"journal {self.journal.path}: its workload is damaged ({exc})") from None
            if workload != list(jobs):
                raise ValueError(f"journal {self.journal.path} holds another workload than the one to resume")
            self.resumed = True
            resumed = resume(self.books, self.processes, self.devices)
            self._submitted = set(resumed.submitted)
            self.triggers.resume(self.books.t, self._submitted)
            self._prior_decisions, self._prior_wall = resumed.decisions, resumed.decide_wall_s
        if self.resumed:
            self._cycle(self.books.now())
            return self._snapshot()
        return self.advance()

    def now(self) -> float:
        """Seconds since the deployment began (wall clock)."""
        return self.books.t

    def apply(self, decision: Decision) -> None:
        """Validate the whole decision, commit it, then stop and launch the processes it implies.

        InvalidDecision (nothing changed) when it breaks an invariant or an allocation has no plan
        the runner can execute on its devices.
        """
        if decision.is_empty:
            return
        t = self.books.now()
        checked = self.state.validate(decision)
        jobs = self.processes.jobs
        plans: dict[JobId, ExecutedPlan] = {}
        for job_id, alloc, _ in checked.allocations:
            spec = jobs[job_id].spec
            try:
                plans[job_id] = executable_plan(spec.model, spec.global_batch, alloc, self.belief)
            except ValueError as exc:
                raise InvalidDecision(f"job {job_id}: {exc}") from None
        self.state.commit(checked, t)
        self.books.op_t = t
        moved = [*checked.preemptions, *(job_id for job_id, _, _ in checked.allocations)]
        previous = {job_id: self.devices.slots(job_id) for job_id in moved}
        for job_id in moved:
            self.devices.release(job_id)
        with self.journal.transaction():
            self.books.journal_ops()
            for job_id in moved:
                job = jobs[job_id]
                if job.current is not None:
                    self.processes.stop(job.current, t)
                    job.current = None
            for job_id, alloc, _ in checked.allocations:
                slots = self.devices.acquire(job_id, alloc.placement, previous[job_id])
                self.processes.plan(jobs[job_id], alloc, slots, plans[job_id])
        self.processes.launch_planned(t)

    def advance(self) -> Snapshot | None:
        """Wait for the next decision point and return its snapshot; None once every job finished (or the horizon)."""
        self._arrivals, self._departures = [], []
        while True:
            if self.interrupt is not None and self.interrupt():
                raise KeyboardInterrupt
            t = self.books.now()
            if self._cycle(t):
                return self._snapshot()
            if self.triggers.idle(self.state) and not self.processes.alive():
                if self.state.queued:
                    log.warning(
                        "%d job(s) wait, none holds devices and nothing else can happen; ending", self.state.queued
                    )
                return self._end()
            if self.triggers.over(t):
                log.warning("horizon %.0f s reached with %d job(s) unfinished; stopping them", t, self.state.unfinished)
                self.stop_all()
                return self._end()
            self._sleep(min(self.config.poll_s, max(0.0, self.triggers.next_due(self.state) - t)))

    def close(self) -> None:
        """Kill any generation still running, release the launcher and close the journal."""
        if self._closed:
            return
        self._closed = True
        self.processes.kill_all()
        self.launcher.close()
        self.journal.close()

    def record(self, policy: str, decisions: int = 0, decide_wall_s: float = 0.0) -> EpisodeRecord:
        """The deployment's event log and workload (decisions made before a resume included)."""
        decisions += self._prior_decisions
        decide_wall_s += self._prior_wall
        with self.journal.transaction():
            self.journal.set_meta("decisions", decisions)
            self.journal.set_meta("decide_wall_s", decide_wall_s)
        return self.state.record(policy, 0.0, self.books.t, decisions, decide_wall_s)

    # ------------------------------------------------------------------ control
    def stop_all(self, wait_s: float | None = None) -> None:
        """Stop every generation gracefully (checkpoint, exit) and wait for them; the deployment stays resumable."""
        self.processes.stop_all(self.config.stop_grace_s if wait_s is None else wait_s)
        with self.journal.transaction():
            self.journal.set_meta("status", "interrupted")

    def next_due(self) -> float:
        """The wall-clock time (``clock()``'s seconds) at which an arrival, a round or the horizon is next due (inf: none)."""
        return self.books.t0 + self.triggers.next_due(self.state)

    def progress_path(self, job_id: str) -> Path:
        """Where a job's progress channel is (all its generations)."""
        return self.run_dir / "jobs" / dirname(job_id) / "progress.jsonl"

    def generation(self, job_id: str) -> GenerationHandle | None:
        """The process handle of a job's current generation (None when it has none)."""
        job = self.processes.jobs.get(JobId(job_id))
        return None if job is None or job.current is None else job.current.handle

    def status(self) -> LiveStatus:
        """What runs, waits and is done, with each submitted unfinished job's progress and rate."""
        return live_status(self.books.t, self.state, self.processes.jobs, self._submitted)

    # ------------------------------------------------------------------ the cycle
    def _cycle(self, t: float) -> bool:
        """Arrivals, progress, exits, releases, timeouts and rounds up to ``t``; True at a decision point."""
        triggered = False
        with self.journal.transaction():
            triggers = self.triggers
            while triggers.next_arrival <= t:
                spec = triggers.take_arrival()
                assert spec is not None
                when = max(spec.submit_time, self.books.op_t)
                self.books.op(Submit(when, spec.job_id))
                self._submitted.add(spec.job_id)
                self._arrivals.append(spec.job_id)
                triggered |= triggers.events
            for job in self.processes.jobs.values():
                if job.gens and self.processes.watch(job):  # a job completed or failed
                    triggered |= triggers.events
            self.processes.release_ready()
            if triggers.next_round <= t and triggers.round_live(self.state):
                triggers.count_round(self.state)
                triggered = True
        self.processes.launch_planned(self.books.now())
        if self.on_status is not None and t >= self._next_status:
            self._next_status = t + self.config.status_every_s
            self.on_status(self.status())
        return triggered

    def _finished(self, job_id: JobId) -> None:
        """A job completed: its devices are free, and it departs at this decision point."""
        self.devices.release(job_id)
        self._departures.append(job_id)

    def _snapshot(self) -> Snapshot:
        return self.state.snapshot(self.books.t, self._arrivals, self._departures, self.triggers.round_index)

    def _end(self) -> None:
        with self.journal.transaction():
            self.books.op(Close(self.books.t))
            self.journal.set_meta("status", "finished" if self.state.unfinished == 0 else "ended")

    def _identity(self, job: JobSpec) -> JobIdentity:
        arch = get_model(job.model.name)
        return JobIdentity(arch.name, arch.fingerprint(), self.config.seed, job.global_batch, self.config.lr)
