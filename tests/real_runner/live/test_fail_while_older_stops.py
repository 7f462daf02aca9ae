"""A held generation that fails while its job's older generation still stops: the FAIL names the step the
relaunch resumes from.

Found by the chaos soak (``benchmarks/chaos_soak.py``): a rank of a resized job's new generation was killed while
the old generation was still saving its stop checkpoint; the controller rolled the job back to the checkpoint on disk
at that moment (step 6), and the relaunch, released once the old generation had exited, resumed from the stop
checkpoint it had saved since (step 9). The journal's FAIL named the wrong step: 3 steps were lost from its account.
"""

from __future__ import annotations

import signal
from pathlib import Path

from arena_gym.core.oplog import Fail, Progress
from arena_gym.loop import run_episode
from arena_gym.placement import allocation
from arena_gym.sim import SimConfig
from arena_gym.types import ClusterSpec, Decision, GpuType, JobId, JobStatus, NodeGroup, Placement, Snapshot
from real_runner.launchers.fake import FakeGeneration, FakeLauncher
from real_runner.live.audit import audit_steps
from real_runner.live.journal import Journal
from real_runner.progress import read_progress
from tests.fake_live import fake_live_backend
from tests.helpers import GPT, job, table_model

A40 = ClusterSpec("a40-1x4", (NodeGroup(GpuType("a40"), 1, 4),))
PERF = table_model({(GPT, 128, "a40", 1, 4): 1.0, (GPT, 128, "a40", 1, 2): 2.0})
SLOW_STOP_STEPS = 3  # the old generation's stop takes this many more steps (a slow checkpoint)


class ShrinkOnArrival:
    """L on four devices; when S arrives, L shrinks to two and S takes the other two."""

    name, ap_search = "shrink-on-arrival", "none"

    def reset(self) -> None:
        """No memo."""

    def decide(self, snap: Snapshot) -> Decision:
        """Place whichever of L and S waits: L on 0-3 alone, else L on 0-1 and S on 2-3."""
        big, small = snap.job(JobId("L")), snap.job(JobId("S"))
        if big is not None and big.status is JobStatus.PENDING and small is None:
            return Decision(
                allocations=((big.job_id, allocation(snap.perf, big.spec, Placement(A40.groups[0].gpu_type, (0,), 4))),)
            )
        if small is not None and small.status is JobStatus.PENDING and big is not None:
            shrunk = allocation(snap.perf, big.spec, Placement(A40.groups[0].gpu_type, (0,), 2))
            placed = allocation(snap.perf, small.spec, Placement(A40.groups[0].gpu_type, (0,), 2))
            return Decision(allocations=((big.job_id, shrunk), (small.job_id, placed)))
        return Decision()


def run_shrink_on_arrival(run_dir: Path, arrival: float) -> None:
    """Deploy L (100 steps) and S (10 steps, arriving at ``arrival``) under :class:`ShrinkOnArrival` on fake
    generations, a step record and a checkpoint every 10 steps, into ``run_dir``."""
    jobs = [job("L", 0, 100, "a40", 4), job("S", arrival, 10, "a40", 2)]
    backend = fake_live_backend(A40, PERF, run_dir, SimConfig(overhead_class="none"), checkpoint_every_steps=10)
    backend.launcher.report_every_s = 0.0  # type: ignore[attr-defined]  # a step record every step, as a worker
    run_episode(backend, ShrinkOnArrival(), jobs)
    backend.close()


def test_a_relaunch_after_a_held_generation_fails_is_rolled_back_to_where_it_resumes(tmp_path, monkeypatch) -> None:
    slow_stop = FakeGeneration.terminate

    def stop_late(self: FakeGeneration) -> None:
        slow_stop(self)
        if self.stop_step is not None:
            self.stop_step = min(self.stop_step + SLOW_STOP_STEPS, self.spec.target_step)

    launch = FakeLauncher.launch

    def killed_while_held(self: FakeLauncher, request):  # L's second generation loses a rank before its release
        gen = launch(self, request)
        if request.job_id == "L" and request.generation == 2:
            gen.signal_rank(0, signal.SIGKILL)
            gen.kill()
        return gen

    monkeypatch.setattr(FakeGeneration, "terminate", stop_late)
    monkeypatch.setattr(FakeLauncher, "launch", killed_while_held)
    run_shrink_on_arrival(tmp_path, 35.5)
    journal = Journal(tmp_path / Journal.FILENAME)
    ops = journal.ops()
    journal.close()
    records = read_progress(tmp_path / "jobs" / "L" / "progress.jsonl")
    resumes = [r.info.get("resumed_from") for r in records if r.event == "start"]
    fails = [(op.t, op.iterations_done) for op in ops if isinstance(op, Fail) and op.job_id == "L"]
    # L stops at step 36 + 3 with a checkpoint there; the FAIL waits for it and names it, and the relaunch resumes there
    assert resumes == [None, 36 + SLOW_STOP_STEPS]
    assert [step for _, step in fails] == [36.0 + SLOW_STOP_STEPS]
    audit = audit_steps(
        records,
        100,
        fails=fails,
        progress=[(op.t, op.iterations_done) for op in ops if isinstance(op, Progress) and op.job_id == "L"],
    )
    assert (audit.lost, audit.doubled, audit.kept, audit.rerun) == (0, 0, 100, 0), audit.problems
