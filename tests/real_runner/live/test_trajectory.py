"""The loss-trajectory check: resumes from real checkpoints, no gaps, repeated steps equal, no restart from scratch."""

from __future__ import annotations

from real_runner.live.trajectory import check_progress_file, check_trajectory
from real_runner.progress import ProgressWriter
from tests.real_runner.live.progress_cases import good, loss, rec


def test_a_continued_trajectory_passes_and_is_counted(tmp_path) -> None:
    report = check_trajectory(good(), target=6)
    assert report.ok, report.problems
    assert (report.generations, report.resumes, report.repeated_steps, report.final_step) == (3, 2, 1, 6)
    assert report.max_repeat_diff == 0.0 and report.max_resume_jump == 0.5
    writer = ProgressWriter(tmp_path / "p.jsonl")
    for r in good():
        writer.write(r)
    writer.close()
    assert check_progress_file(tmp_path / "p.jsonl", 6).ok


def test_each_kind_of_broken_trajectory_is_named() -> None:
    records = good()
    records[7] = rec("step", 4, loss(4) + 0.01)  # the re-run step differs
    assert any("run again with loss" in p for p in check_trajectory(records, 6).problems)
    records = good()
    records[11] = rec("step", 6, loss(1))  # back at the start of training after the resume
    assert any("closer to a fresh start" in p for p in check_trajectory(records, 6).problems)
    records = good()
    records[10] = rec("start", 0)  # relaunched from scratch although checkpoints existed
    assert any("from scratch" in p for p in check_trajectory(records, 6).problems)
    records = good()
    records[6] = rec("start", 2, resumed=2)  # no checkpoint at 2 was ever reported
    assert any("not a reported checkpoint" in p for p in check_trajectory(records, 6).problems)
    records = good()
    del records[7]  # step 4 missing after the resume
    assert any("step 5 follows step 3" in p for p in check_trajectory(records, 6).problems)
    assert "no done record" in check_trajectory(good()[:-1], 6).problems
    over = [*good()[:-1], rec("step", 7, loss(7)), rec("done", 7, ckpt=7)]
    assert any("beyond the target" in p for p in check_trajectory(over, 6).problems)


def test_a_resume_from_the_first_step_continues_the_trajectory() -> None:
    """A job stopped after its first step (checkpoint 1) and resumed from it: its first loss after the resume
    is one update from a fresh start either way, so it cannot be a jump back (losses of a real deploy's job)."""
    real = {1: 7.699, 2: 7.166, 3: 6.685, 4: 6.455}
    records = [
        rec("start", 0),
        rec("step", 1, real[1]),
        rec("checkpoint", 1, ckpt=1),
        rec("stopped", 1, ckpt=1),
        rec("start", 1, ckpt=1, resumed=1),
        *(rec("step", s, real[s]) for s in (2, 3, 4)),
        rec("done", 4, ckpt=4),
    ]
    report = check_trajectory(records, target=4)
    assert report.ok, report.problems
    assert (report.generations, report.resumes, report.final_step) == (2, 1, 4)
    # from step 2 on the check applies: a first loss back at the fresh start's is a jump
    jumped = [
        rec("start", 0),
        *(rec("step", s, real[s]) for s in (1, 2)),
        rec("stopped", 2, ckpt=2),
        rec("start", 2, ckpt=2, resumed=2),
        rec("step", 3, real[1]),
        rec("step", 4, real[4]),
        rec("done", 4, ckpt=4),
    ]
    assert any("closer to a fresh start" in p for p in check_trajectory(jumped, 4).problems)
