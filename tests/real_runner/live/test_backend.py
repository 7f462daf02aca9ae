"""LiveBackend with real worker processes: resize, preemption, resume, faults (marker ``distributed``).

A scripted policy (a pure function of the snapshot plus per-episode memo, like any policy) makes
the reconfigurations happen at known progress points, so the test does not depend on timing:
job A starts on both devices, shrinks to one when B starts, B is preempted for A to grow back,
and B resumes when A is done. The fault test kills one rank of a two-rank job (kill -9) and
stops (SIGSTOP) a rank of another: both must be relaunched from their checkpoints and finish.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from arena_gym.core.oplog import replay
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics, job_outcomes
from arena_gym.placement import allocation
from arena_gym.records import EventKind
from arena_gym.registry import make_policy
from arena_gym.types import Decision, GpuType, JobId, JobSpec, JobStatus, ModelRef, Placement, Snapshot
from estimator import default_perf_model
from real_runner.launchers.local import LocalLauncher
from real_runner.live import LiveBackend, LiveConfig, LiveStatus
from real_runner.live.journal import Journal
from real_runner.live.trajectory import check_progress_file
from real_runner.progress import read_progress
from real_runner.testbed import load_testbed

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(400)]

TINY = ModelRef.parse("gpt__tiny")
CPU = GpuType("cpu")
REPO = Path(__file__).resolve().parents[3]


def job(job_id: str, iters: int, gpus: int, batch: int = 16, submit: float = 0.0) -> JobSpec:
    return JobSpec(JobId(job_id), TINY, batch, iters, submit, CPU, gpus)


class Scripted:
    """A on both devices; at A's step 10 shrink A and start B; at B's step 6 preempt B, grow A; B after A."""

    name, ap_search = "scripted", "none"

    def reset(self) -> None:
        self.phase = 0

    def decide(self, snap: Snapshot) -> Decision:
        perf = snap.perf
        a, b = snap.job(JobId("a")), snap.job(JobId("b"))

        def on(view, nodes_devices: int, node: int = 0):
            return view.job_id, allocation(perf, view.spec, Placement(CPU, (node,), nodes_devices))

        if self.phase == 0 and a is not None and a.status is JobStatus.PENDING:
            self.phase = 1
            return Decision(allocations=(on(a, 2),))
        if self.phase == 1 and a.status is JobStatus.RUNNING and a.iterations_done(snap.now) >= 10 and b is not None:
            self.phase = 2
            return Decision(allocations=(on(a, 1), on(b, 1)))
        # a's shrunk generation must have run too (on a busy machine b can reach step 6 before a's relaunch does)
        if (
            self.phase == 2
            and b is not None
            and b.status is JobStatus.RUNNING
            and b.iterations_done(snap.now) >= 6
            and a is not None
            and a.status is JobStatus.RUNNING
        ):
            self.phase = 3
            return Decision(allocations=(on(a, 2),), preemptions=(JobId("b"),))
        if self.phase == 3 and a is None and b.status is JobStatus.PENDING:  # a finished: out of the snapshot
            self.phase = 4
            return Decision(allocations=(on(b, 1),))
        return Decision()


def backend(tmp_path: Path, config: LiveConfig, on_status=None) -> LiveBackend:
    bed = load_testbed("cpu-2")
    return LiveBackend(
        bed,
        default_perf_model(bed.cluster()),
        tmp_path / "run",
        LocalLauncher(cwd=REPO),
        config=config,
        env=os.environ,
        cores=sorted(os.sched_getaffinity(0))[:2],
        on_status=on_status,
    )


@pytest.mark.slow  # about 2 minutes, in the serial group of process-spawning tests: make test-slow runs it
def test_resize_preemption_and_resume_continue_each_loss_trajectory(tmp_path) -> None:
    pins: dict[int, set[int]] = {}

    def watch(status: LiveStatus) -> None:
        for line in status.jobs:
            for pid in line.pids:
                try:
                    pins[pid] = os.sched_getaffinity(pid)
                except OSError:
                    pass

    # each job outlasts the other's launch (2-3 s, 20-40 s on a loaded host): b must still run when a's
    # shrunk generation starts (400 iterations did not), a must still run when b reaches step 6 (50 did not)
    jobs = [job("a", 300, 2), job("b", 1200, 1, batch=8, submit=1.0)]
    config = LiveConfig(
        round_s=1.0, checkpoint_every_s=0, checkpoint_every_steps=0, status_every_s=0.5, stale_timeout_s=120
    )
    be = backend(tmp_path, config, watch)
    try:
        record = run_episode(be, Scripted(), jobs)
    finally:
        be.close()
    m = compute_metrics(record)
    assert (m["jobs_finished"], m["preemptions"], m["failures"]) == (2, 1, 0)
    outcomes = {o.job_id: o for o in job_outcomes(record)}
    assert outcomes["a"].reconfigurations == 2 and outcomes["b"].reconfigurations == 1
    # every allocation is followed by a RUN (the first step of its generation): the real overhead
    for job_id in ("a", "b"):
        kinds = [
            (e.kind, e.time)
            for e in record.events
            if e.job_id == job_id and e.kind in (EventKind.ALLOCATE, EventKind.RUN)
        ]
        assert [k for k, _ in kinds] == [EventKind.ALLOCATE, EventKind.RUN] * (3 if job_id == "a" else 2)
        assert all(run > alloc for (_, alloc), (_, run) in zip(kinds[::2], kinds[1::2]))
    for spec in jobs:
        report = check_progress_file(tmp_path / "run" / "jobs" / spec.job_id / "progress.jsonl", spec.iterations)
        assert report.ok, report.problems
        assert report.resumes == (2 if spec.job_id == "a" else 1) and report.repeated_steps == 0
    # every rank was pinned to one core of its device slot
    assert pins and all(len(cores) == 1 for cores in pins.values())
    # the journal replays into the same event log
    journal = Journal(tmp_path / "run" / Journal.FILENAME)
    rebuilt = be.state.__class__(be.cluster, be.perf)
    rebuilt.load(tuple(jobs))
    replay(journal.ops(), rebuilt)
    assert (
        journal.ops() == list(be.state.ops) and rebuilt.events == record.events and journal.meta("status") == "finished"
    )
    assert not any(os.path.exists(f"/proc/{pid}") and _running(pid) for pid in pins)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_killed_and_stopped_ranks_are_relaunched_from_their_checkpoints(tmp_path, caplog) -> None:
    injected: dict[str, int] = {}

    def inject(status: LiveStatus) -> None:
        for line in status.jobs:
            if line.status == "running" and line.step >= 8 and line.job_id not in injected and len(line.pids) == 2:
                sig = signal.SIGKILL if line.job_id == "a" else signal.SIGSTOP
                os.kill(line.pids[1], sig)
                injected[line.job_id] = line.pids[1]

    jobs = [job("a", 30, 2), job("b", 30, 2, submit=0.5)]
    config = LiveConfig(
        checkpoint_every_steps=5,
        checkpoint_every_s=0,
        status_every_s=0.3,
        stale_timeout_s=10,
        stale_steps=5,
        group_timeout_s=120,
    )
    be = backend(tmp_path, config, inject)
    caplog.set_level(logging.WARNING, logger="real_runner.live")
    try:
        record = run_episode(be, make_policy("fcfs"), jobs)
    finally:
        be.close()
    assert set(injected) == {"a", "b"}
    m = compute_metrics(record)
    assert (m["jobs_finished"], m["failures"]) == (2, 2)
    fails = [e for e in record.events if e.kind is EventKind.FAIL]
    assert sorted(e.job_id for e in fails) == ["a", "b"]
    # the killed rank's exit code is named whether its peer was still alive when it was seen or had exited too
    assert "progress stale" in caplog.text and "-9]" in caplog.text
    for spec in jobs:
        path = tmp_path / "run" / "jobs" / spec.job_id / "progress.jsonl"
        report = check_progress_file(path, spec.iterations)
        assert report.ok, report.problems  # includes: every step run again reported the same loss
        records = read_progress(path)
        second = [i for i, r in enumerate(records) if r.event == "start"][1]
        reached = max(r.step for r in records[:second] if r.event == "step")
        resumed = records[second].info["resumed_from"]
        # the steps since the checkpoint ran again (none when the rank died right after saving)
        assert report.resumes == 1 and report.repeated_steps == reached - resumed >= 0
    for pid in injected.values():
        assert not _running(pid)
