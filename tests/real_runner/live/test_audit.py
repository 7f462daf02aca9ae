"""The step audit of a deployment: every step counted exactly once, by the workers and by the journal."""

from __future__ import annotations

from dataclasses import replace

import pytest

from real_runner.live.audit import audit_steps, summary
from real_runner.progress import ProgressRecord
from tests.real_runner.live.progress_cases import good, loss, rec


def timed(records: list[ProgressRecord]) -> list[ProgressRecord]:
    """The records one second apart (the audit maps FAILs to the relaunch that follows them by time)."""
    return [replace(r, t=float(i)) for i, r in enumerate(records)]


#: The FAIL of ``good()``: killed at step 4 (record 4), relaunched from step 3 (record 5).
FAILS = [(4.5, 3.0)]


def test_a_job_recovered_from_a_kill_and_a_stop_is_accounted_exactly_once() -> None:
    audit = audit_steps(timed(good()), 6, fails=FAILS, journal_checkpoints=[3, 5, 6])
    assert audit.ok, audit.problems
    assert (audit.generations, audit.resumes, audit.kept, audit.steps_run, audit.rerun) == (3, 2, 6, 7, 1)
    assert (audit.lost, audit.doubled, audit.trajectory_ok, audit.finished) == (0, 0, True, True)
    assert summary([audit])["steps_kept"] == 6


@pytest.mark.parametrize("step", [2, 4, 5, 6])
def test_a_dropped_step_fails_as_lost(step: int) -> None:
    records = good()
    at = max(i for i, r in enumerate(records) if r.event == "step" and r.step == step)
    audit = audit_steps(timed(records[:at] + records[at + 1 :]), 6, fails=FAILS, journal_checkpoints=[3, 5, 6])
    assert not audit.ok and audit.lost >= 1 and audit.doubled == 0, audit


@pytest.mark.parametrize("step", [1, 3, 5, 6])
def test_a_duplicated_step_fails_as_counted_twice(step: int) -> None:
    records = good()
    at = max(i for i, r in enumerate(records) if r.event == "step" and r.step == step)
    audit = audit_steps(timed(records[: at + 1] + records[at:]), 6, fails=FAILS, journal_checkpoints=[3, 5, 6])
    assert not audit.ok and audit.doubled == 1 and audit.lost == 0, audit


def test_the_journal_s_account_must_match_the_workers() -> None:
    records = timed(good())
    # a FAIL that credits a step the relaunch did not resume from counts the steps in between twice
    ahead = audit_steps(records, 6, fails=[(4.5, 4.0)], journal_checkpoints=[3, 5, 6])
    assert not ahead.ok and ahead.doubled == 1
    behind = audit_steps(records, 6, fails=[(4.5, 0.0)], journal_checkpoints=[3, 5, 6])
    assert not behind.ok and behind.lost == 3
    twice = audit_steps(records, 6, fails=FAILS, finishes=2, journal_checkpoints=[3, 5, 6])
    assert not twice.ok and twice.doubled == 6
    never = audit_steps(records, 6, fails=FAILS, finishes=0, journal_checkpoints=[3, 5, 6])
    assert not never.ok
    missing = audit_steps(records, 6, fails=FAILS, journal_checkpoints=[5, 6])
    assert not missing.ok and any("not in the journal" in p for p in missing.problems)
    unread = audit_steps(records, 6, fails=FAILS, journal_checkpoints=[3, 5, 6], unread_bytes=80)
    assert not unread.ok
    # the journal's progress may fall back only at a FAIL: 4 -> 3 at the FAIL, then on
    progress = [(1.0, 1.0), (4.0, 4.0), (6.0, 4.0), (7.0, 5.0), (10.0, 6.0)]
    assert audit_steps(records, 6, fails=FAILS, progress=progress, journal_checkpoints=[3, 5, 6]).ok
    back = audit_steps(records, 6, fails=[], progress=[(4.0, 5.0), (6.0, 4.0)], journal_checkpoints=[3, 5, 6])
    assert not back.ok and back.doubled >= 1 and any("without a FAIL" in p for p in back.problems)


def test_a_resume_ahead_of_the_kept_steps_or_from_scratch_fails() -> None:
    ahead = [
        rec("start", 0),
        *(rec("step", s, loss(s)) for s in (1, 2)),
        rec("checkpoint", 4, ckpt=4),  # a checkpoint of steps never run
        rec("start", 4, ckpt=4, resumed=4),
        *(rec("step", s, loss(s)) for s in (5, 6)),
        rec("done", 6, ckpt=6),
    ]
    audit = audit_steps(timed(ahead), 6)
    assert not audit.ok and audit.lost == 2
    scratch = [
        rec("start", 0),
        *(rec("step", s, loss(s)) for s in (1, 2, 3)),
        rec("checkpoint", 3, ckpt=3),
        rec("start", 0),
        *(rec("step", s, loss(s)) for s in range(1, 7)),
        rec("done", 6, ckpt=6),
    ]
    assert not audit_steps(timed(scratch), 6).ok
    unfinished = good()[:-1]
    assert not audit_steps(timed(unfinished), 6, fails=FAILS).finished
