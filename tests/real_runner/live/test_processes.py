"""How generations are stopped: a held one (still importing torch) is killed at once, a released one checkpoints."""

from __future__ import annotations

import signal

from real_runner.launchers.fake import FakeGeneration, FakeLauncher
from real_runner.live.audit import audit_steps
from real_runner.progress import read_progress
from tests.real_runner.live.test_fail_while_older_stops import run_shrink_on_arrival


def test_a_generation_moved_before_its_release_is_killed_and_its_successor_starts(tmp_path, monkeypatch) -> None:
    launched: list[FakeGeneration] = []
    launch = FakeLauncher.launch

    def keep(self: FakeLauncher, request):
        gen = launch(self, request)
        launched.append(gen)
        return gen

    def importing(self: FakeGeneration) -> bool:  # L's first generation is still importing torch when S arrives
        return not (self.request.job_id == "L" and self.request.generation == 1)

    monkeypatch.setattr(FakeLauncher, "launch", keep)
    monkeypatch.setattr(FakeGeneration, "held_ready", importing)
    run_shrink_on_arrival(tmp_path, 1.0)  # L on four devices at t = 0, shrunk to two when S arrives
    by_gen = {(g.request.job_id, g.request.generation): g for g in launched}
    assert sorted(by_gen) == [("L", 1), ("L", 2), ("S", 1)]
    # the held generation was killed (SIGKILL, not asked to checkpoint) and never started; L trained only on two devices
    assert by_gen["L", 1].poll() == [-signal.SIGKILL] * 4
    records = read_progress(tmp_path / "jobs" / "L" / "progress.jsonl")
    starts = [r for r in records if r.event == "start"]
    assert [(r.info.get("resumed_from"), r.info["world_size"]) for r in starts] == [(None, 2)]
    # L's second generation started with S, at S's arrival
    s_start = [r for r in read_progress(tmp_path / "jobs" / "S" / "progress.jsonl") if r.event == "start"]
    assert [r.t for r in starts] == [r.t for r in s_start]
    audit = audit_steps(records, 100)
    assert (audit.lost, audit.doubled, audit.kept, audit.rerun) == (0, 0, 100, 0), audit.problems
