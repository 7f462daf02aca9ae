"""Did every resumed job continue its loss trajectory? Checked from the job's own progress log (no torch).

A job's progress channel holds all its generations in order: each starts with a ``start`` record
(the step it resumed from) followed by its ``step`` records. :func:`check_trajectory` checks:

* every generation after the first resumed from a checkpoint the job had reported (not from
  scratch), and its steps continue from there without gaps;
* a step run twice (after a failure, the steps since the last checkpoint are run again) has the
  same loss both times, within ``repeat_tol`` (training is a function of seed, step and weights);
* at every resume the loss continues the trajectory: the first loss after resuming at step ``k``
  is closer to the loss at ``k`` than to the first loss of the job (what a restart from scratch
  would give back). Not at ``k = 1``: the loss at step 1 *is* the first loss (the step's loss is
  taken before its update), so the two cannot be told apart there;
* the job ended with a ``done`` record at its target and no step beyond it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from real_runner.progress import ProgressRecord, read_progress


@dataclass(frozen=True)
class TrajectoryReport:
    """The check of one job's progress log; ``problems`` is empty when it passed."""

    job_id: str
    generations: int
    resumes: int
    repeated_steps: int
    max_repeat_diff: float
    max_resume_jump: float
    final_step: int
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def check_trajectory(records: Sequence[ProgressRecord], target: int, repeat_tol: float = 1e-4) -> TrajectoryReport:
    """Check a job's progress records (all generations, in file order) against its target step."""
    problems: list[str] = []
    losses: dict[int, float] = {}
    checkpoints: set[int] = set()
    job_id = records[0].job_id if records else "?"
    generations = resumes = repeated = 0
    max_diff = max_jump = 0.0
    expected: int | None = None  # the next step the current generation must report
    resume_at: int | None = None  # the step the current generation resumed from, until its first step
    final = -1
    done = False
    for rec in records:
        if rec.event == "start":
            generations += 1
            resumed = rec.info.get("resumed_from")
            if resumed is not None:
                resumes += 1
                if resumed not in checkpoints:
                    problems.append(f"generation {generations} resumed from step {resumed}, not a reported checkpoint")
            elif checkpoints:
                problems.append(
                    f"generation {generations} started from scratch although checkpoints {sorted(checkpoints)} existed"
                )
            expected = rec.step + 1
            resume_at = resumed
        elif rec.event == "step":
            if expected is None:
                problems.append(f"step {rec.step} reported before any start record")
                expected = rec.step
            if rec.step != expected:
                problems.append(f"generation {generations}: step {rec.step} follows step {expected - 1}")
            expected = rec.step + 1
            final = max(final, rec.step)
            if rec.step > target:
                problems.append(f"step {rec.step} beyond the target {target}")
            loss = rec.loss if rec.loss is not None else math.nan
            if rec.step in losses:
                repeated += 1
                diff = abs(loss - losses[rec.step])
                max_diff = max(max_diff, diff)
                if not diff <= repeat_tol:
                    problems.append(f"step {rec.step} run again with loss {loss:.6f} instead of {losses[rec.step]:.6f}")
            elif resume_at is not None and resume_at > 1 and resume_at in losses and 1 in losses:
                jump = loss - losses[resume_at]
                max_jump = max(max_jump, abs(jump))
                if not abs(jump) < abs(loss - losses[1]):
                    problems.append(
                        f"after resuming at step {resume_at} the loss {loss:.4f} is closer to a fresh "
                        f"start ({losses[1]:.4f}) than to the trajectory ({losses[resume_at]:.4f})"
                    )
            losses.setdefault(rec.step, loss)
            resume_at = None
        elif rec.event in ("checkpoint", "done", "stopped") and rec.ckpt_step is not None:
            checkpoints.add(rec.ckpt_step)
            done |= rec.event == "done"
            final = max(final, rec.step)
    if not done:
        problems.append("no done record")
    elif final != target:
        problems.append(f"ended at step {final}, target {target}")
    return TrajectoryReport(job_id, generations, resumes, repeated, max_diff, max_jump, final, tuple(problems))


def check_progress_file(path: str | Path, target: int, repeat_tol: float = 1e-4) -> TrajectoryReport:
    """:func:`check_trajectory` of a progress file."""
    return check_trajectory(read_progress(path), target, repeat_tol)
