"""A stop whose checkpoint is lost (a full disk, a stop killed): the core falls back to the step the job resumes from.

Found by the chaos soak (``benchmarks/chaos_soak.py``): a generation stopped for a resize while the checkpoint folder
was full could not save its stop checkpoint and exited; the next generation resumed, correctly, from the checkpoint
before, but the core kept the steps it had counted beyond it, and the journal's progress went back from 95 to 83
steps without a FAIL: 12 steps counted twice.
"""

from __future__ import annotations

from agents.srtf import SRTF
from arena_gym.core.oplog import Fail, Progress
from arena_gym.records import EventKind
from arena_gym.sim import SimConfig
from arena_gym.types import ClusterSpec, GpuType, NodeGroup
from real_runner.launchers.fake import FakeGeneration
from real_runner.live.audit import audit_steps
from real_runner.live.journal import Journal
from real_runner.progress import read_progress
from tests.fake_live import fake_live_backend
from tests.helpers import GPT, job, table_model

A40 = ClusterSpec("a40-1x4", (NodeGroup(GpuType("a40"), 1, 4),))
PERF = table_model({(GPT, 128, "a40", 1, 4): 1.0})  # four devices: 1 s a step


def test_a_preempted_job_whose_stop_checkpoint_failed_is_rolled_back_once(tmp_path, monkeypatch) -> None:
    def stop_without_checkpoint(self: FakeGeneration) -> None:  # its save got ENOSPC: the rank exits 1, no record
        self.catch_up()
        if not self.exited:
            self._exit(1)

    monkeypatch.setattr(FakeGeneration, "terminate", stop_without_checkpoint)
    # SRTF preempts L (100 steps, checkpoints every 10) for S at 35.5; L's stop loses steps 31-35, so it resumes
    # from its checkpoint of step 30 once S is done
    jobs = [job("L", 0, 100, "a40", 4), job("S", 35.5, 10, "a40", 4)]
    backend = fake_live_backend(A40, PERF, tmp_path, SimConfig(overhead_class="none"), checkpoint_every_steps=10)
    backend.launcher.report_every_s = 0.0  # type: ignore[attr-defined]  # a step record every step, as a worker
    policy = SRTF()
    snap = backend.reset(jobs)
    while snap is not None:
        backend.apply(policy.decide(snap))
        snap = backend.advance()
    record = backend.record(policy.name)
    backend.close()
    fails = [(e.job_id, e.time) for e in record.events if e.kind is EventKind.FAIL]
    finishes = {e.job_id: e.time for e in record.events if e.kind is EventKind.FINISH}
    assert fails == [("L", 45.5)] and finishes == {"S": 45.5, "L": 45.5 + 70}
    journal = Journal(tmp_path / Journal.FILENAME)
    ops = journal.ops()
    journal.close()
    fail = next(op for op in ops if isinstance(op, Fail))
    assert fail.iterations_done == 30.0
    audit = audit_steps(
        read_progress(tmp_path / "jobs" / "L" / "progress.jsonl"),
        100,
        fails=[(op.t, op.iterations_done) for op in ops if isinstance(op, Fail)],
        progress=[(op.t, op.iterations_done) for op in ops if isinstance(op, Progress) and op.job_id == "L"],
    )
    assert (audit.lost, audit.doubled, audit.kept, audit.rerun) == (0, 0, 100, 5), audit.problems
