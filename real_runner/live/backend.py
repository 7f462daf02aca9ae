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
* every operation on the core and every generation is journaled (:mod:`real_runner.live.journal`)
  before processes are launched for it, so :meth:`reset` on the journal of an interrupted
  deployment rebuilds the state, reattaches to the generations still running, relaunches the
  others from their checkpoints and goes on.

Decision points: arrivals, completions and failures (``event_decisions``) and optional rounds.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena_gym.core import ClusterState
from arena_gym.core.oplog import Close, Fail, Finish, Op, Progress, Run, Submit, replay
from arena_gym.protocols import InvalidDecision
from arena_gym.records import EpisodeRecord
from arena_gym.types import Allocation, Decision, JobId, JobSpec, JobStatus, PerfModel, Snapshot
from estimator.zoo import get_model
from real_runner.checkpoint_files import CheckpointError, JobIdentity, select_checkpoint
from real_runner.launchers.base import GenerationHandle, Launcher, LaunchRequest, RankSlot
from real_runner.live.codec import (
    alloc_from_dict,
    alloc_to_dict,
    job_from_dict,
    job_to_dict,
    slots_from_list,
    slots_to_list,
)
from real_runner.live.config import LiveConfig
from real_runner.live.devices import DeviceMap
from real_runner.live.journal import GenerationRow, Journal
from real_runner.live.planning import executable_plan
from real_runner.plans import ExecutedPlan, plan_from_dict
from real_runner.progress import ProgressRecord, ProgressTail
from real_runner.spec import WorkerSpec
from real_runner.testbed import Testbed
from real_runner.worker import EXIT_BAD_INPUT

log = logging.getLogger(__name__)


class LiveError(RuntimeError):
    """A deployment cannot go on (a job failed more often than allowed, or its input is bad); it stays resumable."""


@dataclass(frozen=True)
class JobLine:
    """One job in a status report: state, progress, measured rate, devices and generation."""

    job_id: str
    status: str
    step: int
    target: int
    steps_per_s: float
    devices: str
    generation: int
    pids: tuple[int, ...]


@dataclass(frozen=True)
class LiveStatus:
    """What the deployment is doing: jobs by state and a line per submitted, unfinished job."""

    t: float
    running: int
    reconfiguring: int
    queued: int
    finished: int
    total: int
    jobs: tuple[JobLine, ...]


class _Gen:
    """One generation of a job: its allocation, slots, plan, spec and processes, and where it stands.

    Phases: planned (journaled, not launched), held (launched, waiting for its release),
    released (training), stopping (SIGTERM sent), exited.
    """

    def __init__(
        self,
        job_id: JobId,
        number: int,
        alloc: Allocation,
        slots: tuple[RankSlot, ...],
        executed: ExecutedPlan,
        directory: Path,
    ) -> None:
        self.job_id, self.number, self.alloc, self.slots, self.executed = job_id, number, alloc, slots, executed
        self.dir = directory
        self.spec_path = directory / "spec.json"
        self.handle: GenerationHandle | None = None
        self.phase = "planned"
        self.launched_at = self.released_at = self.stop_at = self.last_record_at = math.nan
        self.end: str | None = None  # done / stopped / error record seen after its release
        self.failing: str | None = None  # why it is being killed as failed
        self.iter_times: deque[float] = deque(maxlen=20)

    @property
    def alive(self) -> bool:
        """Launched and not every rank has exited."""
        return self.phase in ("held", "released", "stopping")

    @property
    def keys(self) -> set[tuple[int, int]]:
        """Its device slots as (node, device)."""
        return {(s.node, s.device) for s in self.slots}

    def facts(self) -> dict[str, Any]:
        """The journal's record of it."""
        return {
            "alloc": alloc_to_dict(self.alloc),
            "slots": slots_to_list(self.slots),
            "plan": self.executed.to_dict(),
            "dir": str(self.dir),
            "handle": self.handle.describe() if self.handle is not None else None,
            "launched_at": _num(self.launched_at),
            "released_at": _num(self.released_at),
            "end": self.end,
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


class _Job:
    """A job's runtime: its directories, progress tail, generations, retries and last reports."""

    def __init__(self, spec: JobSpec, directory: Path, identity: JobIdentity) -> None:
        self.spec = spec
        self.dir = directory
        self.identity = identity
        self.ckpt_dir = directory / "ckpt"
        self.progress_path = directory / "progress.jsonl"
        self.tail = ProgressTail(self.progress_path)
        self.gens: list[_Gen] = []
        self.current: _Gen | None = None
        self.number = 0
        self.retries = 0
        self.step = 0
        self.ckpt_step: int | None = None
        self.win = (math.nan, 0)  # (time, step) of the last rate reported to the core

    @property
    def reader(self) -> _Gen | None:
        """The released generation whose records the progress channel carries now (at most one)."""
        for gen in self.gens:
            if gen.phase in ("released", "stopping") and not math.isnan(gen.released_at):
                return gen
        return None


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
        self._clock, self._sleep = clock, sleep
        self._t0 = math.nan
        self._t = 0.0
        self._op_t = 0.0
        self._journaled = 0
        self._jobs: dict[JobId, _Job] = {}
        self._arrival_queue: deque[JobSpec] = deque()
        self._submitted: set[JobId] = set()
        self._arrivals: list[JobId] = []
        self._departures: list[JobId] = []
        self._round = 0
        self._next_round = math.inf
        self._next_status = 0.0
        self._prior_decisions = 0
        self._prior_wall = 0.0
        self._to_launch: list[_Gen] = []
        self._closed = False
        self.resumed = False

    # ------------------------------------------------------------------ protocol
    def reset(self, jobs: Sequence[JobSpec]) -> Snapshot | None:
        """Start the deployment of ``jobs``, or resume it from the journal of an interrupted one; first decision point."""
        jobs = tuple(jobs)
        self.state.load(jobs)
        self._journaled = 0
        self._jobs = {j.job_id: _Job(j, self.run_dir / "jobs" / _dirname(j.job_id), self._identity(j)) for j in jobs}
        self._arrival_queue = deque(sorted(jobs, key=lambda j: (j.submit_time, j.job_id)))
        self._arrivals, self._departures = [], []
        journaled = self.journal.meta("workload")
        if journaled is None:
            self._t0 = self._clock()
            with self.journal.transaction():
                self.journal.set_meta("workload", [job_to_dict(j) for j in jobs])
                self.journal.set_meta("t0", self._t0)
                self.journal.set_meta("status", "running")
        else:
            if [job_from_dict(d) for d in journaled] != list(jobs):
                raise ValueError(f"journal {self.journal.path} holds another workload than the one to resume")
            self._resume()
        if self.config.round_s is not None:
            self._next_round = (math.floor(self._t / self.config.round_s) + 1) * self.config.round_s
        if self.resumed:
            self._cycle(self._now())
            return self.state.snapshot(self._t, self._arrivals, self._departures, self._round)
        return self.advance()

    def now(self) -> float:
        """Seconds since the deployment began (wall clock)."""
        return self._t

    def apply(self, decision: Decision) -> None:
        """Validate the whole decision, commit it, then stop and launch the processes it implies.

        InvalidDecision (nothing changed) when it breaks an invariant or an allocation has no plan
        the runner can execute on its devices.
        """
        if decision.is_empty:
            return
        t = self._now()
        checked = self.state.validate(decision)
        plans: dict[JobId, ExecutedPlan] = {}
        for job_id, alloc, _ in checked.allocations:
            spec = self._jobs[job_id].spec
            try:
                plans[job_id] = executable_plan(spec.model, spec.global_batch, alloc, self.belief)
            except ValueError as exc:
                raise InvalidDecision(f"job {job_id}: {exc}") from None
        self.state.commit(checked, t)
        self._op_t = t
        moved = [*checked.preemptions, *(job_id for job_id, _, _ in checked.allocations)]
        previous = {job_id: self.devices.slots(job_id) for job_id in moved}
        for job_id in moved:
            self.devices.release(job_id)
        with self.journal.transaction():
            self._journal_ops()
            for job_id in moved:
                job = self._jobs[job_id]
                if job.current is not None:
                    self._stop(job.current, t)
                    job.current = None
            for job_id, alloc, _ in checked.allocations:
                slots = self.devices.acquire(job_id, alloc.placement, previous[job_id])
                self._new_gen(self._jobs[job_id], alloc, slots, plans[job_id])
        self._launch_planned(t)

    def advance(self) -> Snapshot | None:
        """Wait for the next decision point and return its snapshot; None once every job finished (or the horizon)."""
        self._arrivals, self._departures = [], []
        while True:
            if self.interrupt is not None and self.interrupt():
                raise KeyboardInterrupt
            t = self._now()
            if self._cycle(t):
                return self.state.snapshot(self._t, self._arrivals, self._departures, self._round)
            if self.state.unfinished == 0 and not self._alive():
                return self._end()
            if t >= self.config.horizon_s:
                log.warning("horizon %.0f s reached with %d job(s) unfinished; stopping them", t, self.state.unfinished)
                self.stop_all()
                return self._end()
            if self._stuck():
                log.warning("%d job(s) wait, none holds devices and nothing else can happen; ending", self.state.queued)
                return self._end()
            self._sleep(self.config.poll_s)

    def close(self) -> None:
        """Kill any generation still running, release the launcher and close the journal."""
        if self._closed:
            return
        self._closed = True
        for job in self._jobs.values():
            for gen in job.gens:
                if gen.handle is not None and gen.alive:
                    log.warning("closing: killing job %s generation %d", gen.job_id, gen.number)
                    gen.handle.kill()
                    gen.handle.close()
        self.launcher.close()
        self.journal.close()

    def record(self, policy: str, decisions: int = 0, decide_wall_s: float = 0.0) -> EpisodeRecord:
        """The deployment's event log and workload (decisions made before a resume included)."""
        decisions += self._prior_decisions
        decide_wall_s += self._prior_wall
        with self.journal.transaction():
            self.journal.set_meta("decisions", decisions)
            self.journal.set_meta("decide_wall_s", decide_wall_s)
        return self.state.record(policy, 0.0, self._t, decisions, decide_wall_s)

    # ------------------------------------------------------------------ control
    def stop_all(self, wait_s: float | None = None) -> None:
        """Stop every generation gracefully (checkpoint, exit) and wait for them; the deployment stays resumable."""
        t = self._now()
        with self.journal.transaction():
            for job in self._jobs.values():
                for gen in job.gens:
                    if gen.phase in ("held", "released"):
                        self._stop(gen, t)
                    elif gen.phase == "planned":
                        self._to_launch = [g for g in self._to_launch if g is not gen]
        deadline = time.monotonic() + (self.config.stop_grace_s if wait_s is None else wait_s)
        while self._alive() and time.monotonic() < deadline:
            self._sleep(self.config.poll_s)
            self._reap(self._now())
        for job in self._jobs.values():
            for gen in job.gens:
                if gen.alive and gen.handle is not None:
                    log.warning("job %s generation %d did not stop in time; killing it", gen.job_id, gen.number)
                    gen.handle.kill()
        self._reap(self._now(), wait=True)
        with self.journal.transaction():
            self.journal.set_meta("status", "interrupted")

    def progress_path(self, job_id: str) -> Path:
        """Where a job's progress channel is (all its generations)."""
        return self.run_dir / "jobs" / _dirname(job_id) / "progress.jsonl"

    def generation(self, job_id: str) -> GenerationHandle | None:
        """The process handle of a job's current generation (None when it has none)."""
        job = self._jobs.get(JobId(job_id))
        return None if job is None or job.current is None else job.current.handle

    def status(self) -> LiveStatus:
        """What runs, waits and is done, with each submitted unfinished job's progress and rate."""
        lines = []
        counts = dict.fromkeys(JobStatus, 0)
        for job_id, job in self._jobs.items():
            st = self.state.status(job_id)
            counts[st] += 1
            if st is JobStatus.FINISHED or job_id not in self._submitted:
                continue
            gen = job.current
            rate = (
                1.0 / statistics.median(gen.iter_times) if gen and gen.iter_times and st is JobStatus.RUNNING else 0.0
            )
            devices = ",".join(f"{s.node}:{s.device}" for s in (gen.slots if gen else ()))
            lines.append(
                JobLine(
                    job_id,
                    st.value,
                    job.step,
                    job.spec.iterations,
                    rate,
                    devices,
                    gen.number if gen else 0,
                    gen.handle.pids if gen and gen.handle else (),
                )
            )
        return LiveStatus(
            self._t,
            counts[JobStatus.RUNNING],
            counts[JobStatus.RECONFIGURING],
            self.state.queued,
            counts[JobStatus.FINISHED],
            len(self._jobs),
            tuple(lines),
        )

    # ------------------------------------------------------------------ the cycle
    def _now(self) -> float:
        self._t = max(self._t, self._clock() - self._t0)
        return self._t

    def _cycle(self, t: float) -> bool:
        """Arrivals, progress, exits, releases, timeouts and rounds up to ``t``; True at a decision point."""
        triggered = False
        with self.journal.transaction():
            while self._arrival_queue and self._arrival_queue[0].submit_time <= t:
                spec = self._arrival_queue.popleft()
                when = max(spec.submit_time, self._op_t)
                self._op(Submit(when, spec.job_id))
                self._submitted.add(spec.job_id)
                self._arrivals.append(spec.job_id)
                triggered |= self.config.event_decisions
            for job in self._jobs.values():
                if job.gens:
                    triggered |= self._watch(job)
            if self._next_round <= t and self.state.unfinished:
                self._round += 1
                self._next_round += self.config.round_s or math.inf
                triggered = True
        self._launch_planned(self._now())
        if self.on_status is not None and t >= self._next_status:
            self._next_status = t + self.config.status_every_s
            self.on_status(self.status())
        return triggered

    def _op(self, op: Op) -> None:
        """Apply one operation to the core and journal it (the same record replays it on resume)."""
        op.apply(self.state)
        self._journal_ops()
        self._op_t = op.t

    def _journal_ops(self) -> None:
        """Journal the operations the core logged since the last call (the journal holds its whole log)."""
        for op in self.state.ops_since(self._journaled):
            self.journal.add_op(op)
        self._journaled = self.state.n_ops

    def _watch(self, job: _Job) -> bool:
        """Progress, exits, releases and timeouts of one job's generations; True at a decision point."""
        triggered = self._read(job)
        for gen in list(job.gens):
            if gen.handle is not None and gen.alive:
                triggered |= self._check_exit(job, gen)
        current = job.current
        if (
            current is not None
            and current.phase == "held"
            and current.handle is not None
            and current.handle.held_ready()
        ):
            self._maybe_release(job, current)
        for gen in job.gens:
            if gen.alive:
                self._check_time(job, gen, self._now())
        job.gens = [g for g in job.gens if g.alive or g is job.current]
        return triggered

    def _read(self, job: _Job, gen: _Gen | None = None) -> bool:
        """Apply the job's new progress records (of ``gen``, by default the released one); True when it completed."""
        records = job.tail.poll()
        if not records:
            return False
        gen = gen if gen is not None else job.reader
        done = False
        for rec in records:
            done |= self._on_record(job, gen, rec)
        self.journal.set_offset(job.spec.job_id, job.tail.offset)
        return done and self.config.event_decisions

    def _record_time(self, rec: ProgressRecord, back_s: float = 0.0) -> float:
        """A record's wall time on the deployment's clock, in order with the core's operations, never ahead of now."""
        return min(self._now(), max(self._op_t, rec.t - self._t0 - back_s))

    def _on_record(self, job: _Job, gen: _Gen | None, rec: ProgressRecord) -> bool:
        job_id = job.spec.job_id
        if gen is not None:
            gen.last_record_at = self._t
        if rec.ckpt_step is not None and rec.event in ("checkpoint", "done", "stopped"):
            job.ckpt_step = rec.ckpt_step
            self.journal.add_checkpoint(job_id, rec.ckpt_step, rec.t - self._t0)
        if rec.event in ("done", "stopped", "error") and gen is not None:
            gen.end = rec.event
            if rec.event == "error":
                log.warning("job %s generation %d reports an error: %s", job_id, gen.number, rec.info.get("message"))
        if rec.step >= 0:
            job.step = rec.step
        status = self.state.status(job_id)
        if gen is None or gen is not job.current or status is JobStatus.FINISHED:
            return False
        if rec.event == "step" and rec.iter_s is not None:
            gen.iter_times.append(rec.iter_s)
            if status is JobStatus.RECONFIGURING:
                self._op(Run(self._record_time(rec, rec.iter_s), job_id, rec.iter_s))
                self._progress(job, self._record_time(rec), rec.step, rec.iter_s)
                log.info(
                    "job %s runs generation %d (%s) from step %d",
                    job_id,
                    gen.number,
                    gen.executed.describe(),
                    rec.step - 1,
                )
            else:
                when = self._record_time(rec)
                last_t, last_step = job.win
                if math.isnan(last_t):  # reattached after a controller restart: measure from here
                    job.win = (when, rec.step)
                elif when - last_t >= self.config.progress_every_s and rec.step > last_step:
                    self._progress(job, when, rec.step, (when - last_t) / (rec.step - last_step))
            return False
        if rec.event == "done":
            when = self._record_time(rec)
            if status is JobStatus.RECONFIGURING:
                self._op(Run(when, job_id))
            self._op(Finish(when, job_id))
            self.devices.release(job_id)
            self._departures.append(job_id)
            log.info("job %s finished at t=%.1f s (generation %d)", job_id, when, gen.number)
            return True
        return False

    def _progress(self, job: _Job, t: float, step: int, iter_time: float) -> None:
        self._op(Progress(t, job.spec.job_id, step, max(iter_time, 1e-6)))
        job.win = (t, step)

    def _check_exit(self, job: _Job, gen: _Gen) -> bool:
        """Handle ranks that exited; True when a failure of the current generation was handled (decision point)."""
        assert gen.handle is not None
        codes = gen.handle.poll()
        bad = [c for c in codes if c not in (None, 0)]
        if any(c is None for c in codes):
            if bad:  # the others would wait in a collective until the group timeout
                if gen.failing is None:
                    gen.failing = f"rank exit code(s) {bad}"
                    (log.warning if gen is job.current else log.debug)(
                        "job %s generation %d: a rank exited with %s; killing the others", gen.job_id, gen.number, bad
                    )
                gen.handle.kill()
            return False
        self._read(job)  # everything it wrote before it exited
        self._exited(gen)
        if gen is not job.current or self.state.status(job.spec.job_id) is JobStatus.FINISHED:
            return False
        if EXIT_BAD_INPUT in codes and gen.failing is None:
            last = gen.handle.log_tail(codes.index(EXIT_BAD_INPUT)).strip().splitlines()[-1:]
            raise LiveError(f"job {gen.job_id} generation {gen.number} refused its input (exit 2): {' '.join(last)}")
        reason = gen.failing or (
            f"exit codes {codes}" if bad else f"exited without completing ({gen.end or 'no record'})"
        )
        self._fail(job, gen, reason)
        return self.config.event_decisions

    def _exited(self, gen: _Gen) -> None:
        gen.phase = "exited"
        if gen.handle is not None:
            gen.handle.close()
        self._put(gen)

    def _fail(self, job: _Job, gen: _Gen, reason: str) -> None:
        """The current generation failed: fall back to the latest checkpoint and relaunch on the same devices."""
        job.retries += 1
        if job.retries > self.config.max_retries:
            raise LiveError(
                f"job {job.spec.job_id} failed {job.retries} times (last: {reason}); giving up "
                "(fix the cause, then resume the deployment)"
            )
        step = self._latest_checkpoint(job)
        log.warning(
            "job %s generation %d failed (%s); relaunching from step %d (retry %d of %d)",
            job.spec.job_id,
            gen.number,
            reason,
            step,
            job.retries,
            self.config.max_retries,
        )
        self._op(Fail(self._now(), job.spec.job_id, step, reason))
        self._new_gen(job, gen.alloc, gen.slots, gen.executed)

    def _latest_checkpoint(self, job: _Job) -> int:
        """Step of the newest verified checkpoint (0: none)."""
        try:
            info = select_checkpoint(job.ckpt_dir, job.identity)
        except CheckpointError as exc:
            raise LiveError(f"job {job.spec.job_id}: {exc}") from None
        return 0 if info is None else info.step

    def _maybe_release(self, job: _Job, gen: _Gen) -> None:
        """Release a held generation once its job's older ones exited and its slots are free of other processes."""
        if any(g.alive for g in job.gens if g is not gen):
            return
        if any(g is not gen and g.alive and g.keys & gen.keys for other in self._jobs.values() for g in other.gens):
            return
        self._read(job)
        assert gen.handle is not None
        gen.phase = "released"
        gen.released_at = self._now()
        self.journal.set_offset(job.spec.job_id, job.tail.offset)
        self._put(gen)
        gen.handle.release()

    def _check_time(self, job: _Job, gen: _Gen, t: float) -> None:
        """Timeouts: a start that never comes, stale progress, a stop that takes too long."""
        assert gen.handle is not None
        cfg = self.config
        if gen.phase == "stopping":
            if t - gen.stop_at > cfg.stop_grace_s and gen.failing is None:
                self._kill_failing(gen, f"still running {cfg.stop_grace_s:.0f} s after SIGTERM")
            return
        if gen.failing is not None or gen is not job.current:
            return
        if gen.phase == "held":
            if t - gen.launched_at > cfg.start_timeout_s:
                self._kill_failing(gen, f"not ready {cfg.start_timeout_s:.0f} s after its launch")
            return
        if math.isnan(gen.last_record_at) or gen.last_record_at < gen.released_at:
            if t - gen.released_at > cfg.start_timeout_s:
                self._kill_failing(gen, f"no progress record {cfg.start_timeout_s:.0f} s after its release")
            return
        limit = cfg.stale_timeout_s
        if gen.iter_times:
            limit = max(limit, cfg.stale_steps * statistics.median(gen.iter_times))
        if t - gen.last_record_at > limit:
            self._kill_failing(gen, f"progress stale for {t - gen.last_record_at:.0f} s (limit {limit:.0f} s)")

    def _kill_failing(self, gen: _Gen, reason: str) -> None:
        log.warning(
            "job %s generation %d: %s; killing its ranks %s",
            gen.job_id,
            gen.number,
            reason,
            list(gen.handle.pids) if gen.handle else [],
        )
        gen.failing = reason
        if gen.handle is not None:
            gen.handle.kill()

    # ------------------------------------------------------------------ generations
    def _new_gen(self, job: _Job, alloc: Allocation, slots: tuple[RankSlot, ...], executed: ExecutedPlan) -> _Gen:
        """Plan (and journal) the job's next generation as its current one; it is launched after the journal commits."""
        job.number += 1
        gen = _Gen(job.spec.job_id, job.number, alloc, slots, executed, job.dir / f"gen{job.number:03d}")
        job.current = gen
        job.gens.append(gen)
        self._put(gen)
        self._to_launch.append(gen)
        return gen

    def _worker_spec(self, job: _Job, gen: _Gen) -> WorkerSpec:
        cfg = self.config
        device = cfg.device if cfg.device != "auto" else ("cpu" if self.testbed.is_cpu else "cuda")
        return WorkerSpec(
            job_id=job.spec.job_id,
            model=job.spec.model.name,
            global_batch=job.spec.global_batch,
            plan=gen.executed.plan,
            target_step=job.spec.iterations,
            checkpoint_dir=str(job.ckpt_dir),
            progress_path=str(job.progress_path),
            seed=cfg.seed,
            checkpoint_every_steps=cfg.checkpoint_every_steps,
            checkpoint_every_s=cfg.checkpoint_every_s,
            lr=cfg.lr,
            device=device,
            require_checkpoint=job.ckpt_step is not None,
            group_timeout_s=cfg.group_timeout_s,
        )

    def _request(self, job: _Job, gen: _Gen) -> LaunchRequest:
        return LaunchRequest(
            job.spec.job_id, gen.number, gen.spec_path, gen.slots, gen.dir, self.env, cuda=not self.testbed.is_cpu
        )

    def _launch_planned(self, t: float) -> None:
        """Launch the planned generations (their journal entries are on disk by now)."""
        planned, self._to_launch = self._to_launch, []
        for gen in planned:
            job = self._jobs[gen.job_id]
            if gen is not job.current or gen.phase != "planned":
                continue
            gen.dir.mkdir(parents=True, exist_ok=True)
            gen.spec_path.write_text(self._worker_spec(job, gen).to_json(), encoding="utf-8")
            gen.handle = self.launcher.launch(self._request(job, gen))
            gen.phase = "held"
            gen.launched_at = t
            with self.journal.transaction():
                self._put(gen)
            log.info(
                "job %s generation %d launched on %s: %s",
                gen.job_id,
                gen.number,
                [f"{s.host}:{s.device}" for s in gen.slots],
                gen.executed.describe(),
            )

    def _stop(self, gen: _Gen, t: float) -> None:
        """Stop a generation gracefully: a held one exits at once, a released one checkpoints first."""
        if gen.phase == "planned":
            gen.phase = "exited"
        elif gen.alive and gen.handle is not None:
            gen.handle.terminate()
            gen.phase = "stopping"
            gen.stop_at = t
        self._put(gen)

    def _put(self, gen: _Gen) -> None:
        self.journal.put_generation(gen.job_id, gen.number, gen.phase, gen.facts())

    def _alive(self) -> bool:
        return any(g.alive for job in self._jobs.values() for g in job.gens)

    def _reap(self, t: float, wait: bool = False) -> None:
        """Mark generations whose ranks all exited (``wait``: until they have)."""
        with self.journal.transaction():
            for job in self._jobs.values():
                for gen in job.gens:
                    while gen.alive and gen.handle is not None:
                        if all(c is not None for c in gen.handle.poll()):
                            self._read(job)
                            self._exited(gen)
                        elif wait:
                            self._sleep(self.config.poll_s)
                        else:
                            break

    def _stuck(self) -> bool:
        """Jobs wait, none holds devices, none is left to arrive, no round is due: nothing can change."""
        return (
            self.state.queued > 0
            and not self.state.active
            and not self._arrival_queue
            and not self._alive()
            and self.config.round_s is None
        )

    def _end(self) -> None:
        with self.journal.transaction():
            self._op(Close(self._t))
            self.journal.set_meta("status", "finished" if self.state.unfinished == 0 else "ended")

    def _identity(self, job: JobSpec) -> JobIdentity:
        arch = get_model(job.model.name)
        return JobIdentity(arch.name, arch.fingerprint(), self.config.seed, job.global_batch, self.config.lr)

    # ------------------------------------------------------------------ resume
    def _resume(self) -> None:
        """Rebuild the core from the journal and take over the generations of the previous controller."""
        self.resumed = True
        self._t0 = float(self.journal.meta("t0"))
        ops = self.journal.ops()
        replay(ops, self.state)
        self._journaled = self.state.n_ops
        self._op_t = ops[-1].t if ops else 0.0
        self._submitted = {op.job_id for op in ops if isinstance(op, Submit)}
        self._arrival_queue = deque(j for j in self._arrival_queue if j.job_id not in self._submitted)
        self._prior_decisions = int(self.journal.meta("decisions", 0))
        self._prior_wall = float(self.journal.meta("decide_wall_s", 0.0))
        self._t = max(self._op_t, self._clock() - self._t0)
        for job_id, offset in self.journal.offsets().items():
            if JobId(job_id) in self._jobs:
                self._jobs[JobId(job_id)].tail.offset = offset
        rows: dict[str, list[GenerationRow]] = {}
        for row in self.journal.generations():
            rows.setdefault(row.job_id, []).append(row)
        with self.journal.transaction():
            for job_id, job in self._jobs.items():
                job.ckpt_step = next((s for s, _ in reversed(self.journal.checkpoints(job_id))), None)
                self._take_over(job, rows.get(job_id, []))
            self.journal.set_meta("status", "running")
        log.info("resumed the deployment at t=%.1f s: %d job(s) unfinished", self._t, self.state.unfinished)

    def _take_over(self, job: _Job, rows: Sequence[GenerationRow]) -> None:
        """Reattach to or stop every generation of ``job`` the journal lists; relaunch its current one if it is gone."""
        job_id = job.spec.job_id
        view = self.state.view(job_id)
        job.number = max((r.gen for r in rows), default=0)
        holds = view.status in (
            JobStatus.RUNNING,
            JobStatus.RECONFIGURING,
        )  # a finished job's view keeps its allocation
        current = rows[-1] if rows and holds else None
        if holds and (current is None or alloc_from_dict(current.data["alloc"]) != view.allocation):
            raise LiveError(
                f"journal {self.journal.path}: job {job_id} holds devices but its generation is not journaled"
            )
        for row in rows:
            if row.phase == "exited" and row is not current:
                continue
            gen = self._gen_from_row(job, row)
            handle = (
                self.launcher.reattach(self._request(job, gen), row.data.get("handle") or {})
                if row.phase != "exited"
                else None
            )
            if row is current:
                self.devices.restore(job_id, gen.slots)
                job.current = gen
            if handle is None:
                gen.phase = "exited"
                self._put(gen)
                continue
            gen.handle, gen.launched_at = handle, self._t
            job.gens.append(gen)
            if row is current and row.phase in ("planned", "held", "released"):
                gen.phase = "released" if row.phase == "released" else "held"
                if gen.phase == "released":
                    gen.released_at = gen.last_record_at = self._t
                    handle.release()  # idempotent: the crash may have come between the journal entry and the release
                log.info("job %s: reattached to generation %d (pids %s)", job_id, gen.number, list(handle.pids))
            else:
                gen.phase = row.phase if row.phase != "planned" else "held"
                gen.released_at = self._t if row.phase in ("released", "stopping") else math.nan
                self._stop(gen, self._t)
                log.info("job %s: stopping leftover generation %d (pids %s)", job_id, gen.number, list(handle.pids))
            self._put(gen)
        gone = job.current
        if gone is None or gone.phase != "exited" or self.state.status(job_id) is JobStatus.FINISHED:
            return
        if current is not None and current.data.get("released_at") is not None:
            self._read(job, gone)  # what it wrote while no controller watched
        if self.state.status(job_id) is JobStatus.FINISHED:
            self.devices.release(job_id)
            self._departures.append(job_id)
            return
        if self.state.status(job_id) is JobStatus.RUNNING:
            step = self._latest_checkpoint(job)
            self._op(Fail(self._t, job_id, step, "its processes ended while no controller ran"))
            log.info("job %s: its generation %d is gone; relaunching from step %d", job_id, gone.number, step)
        self._new_gen(job, gone.alloc, gone.slots, gone.executed)

    def _gen_from_row(self, job: _Job, row: GenerationRow) -> _Gen:
        data = row.data
        plan = data["plan"]
        executed = ExecutedPlan(plan_from_dict(plan["requested"]), plan_from_dict(plan["plan"]), tuple(plan["notes"]))
        gen = _Gen(
            job.spec.job_id,
            row.gen,
            alloc_from_dict(data["alloc"]),
            slots_from_list(data["slots"]),
            executed,
            Path(data["dir"]),
        )
        gen.end = data.get("end")
        return gen


def _dirname(job_id: str) -> str:
    """A job id as a directory name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id) or "job"
