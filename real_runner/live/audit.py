"""Step accounting of a finished deployment: was every training step of every job counted exactly once?

Reads a deployment's journal and its jobs' progress channels (no torch) after faults (ranks killed,
the controller killed and resumed, hung ranks, a full checkpoint disk) and checks each job:

* **The kept trajectory.** A job's progress channel holds all its generations in order. Replaying
  them as a stack (each generation truncates what was kept to the checkpoint it resumed from, then
  appends its steps) gives the steps that survive into the final model. Each generation must resume
  from a checkpoint the job reported (or from scratch when none was reported), at or behind the
  kept steps (a resume ahead of them loses the steps in between), and its steps must continue from
  there one by one (a gap loses steps, a repeat within one generation counts a step twice). The job
  must end with a ``done`` record at its target, with the kept steps exactly 1..target.
* **The journal's account.** The journal must hold exactly one FINISH of the job; every checkpoint
  the job reported (a checkpoint the journal lacks is one a relaunch cannot count on); and every
  FAIL (the controller rolls the job back to a checkpoint) must name the step the next generation
  really resumed from: a FAIL at a later step than the resume counts the steps in between twice, one
  at an earlier step loses them from the controller's account. A job's progress offset must have
  reached the end of its channel (every record applied, none pending), and its PROGRESS may go back only at a FAIL
  (progress that falls back without one was counted twice).
* **The loss trajectory** continued across every resume (:func:`real_runner.live.trajectory.check_trajectory`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from arena_gym.core.oplog import Fail, Finish, Op, Progress
from real_runner.live.generations import dirname
from real_runner.live.journal import Journal
from real_runner.live.json_forms import job_from_dict
from real_runner.live.trajectory import check_trajectory
from real_runner.progress import ProgressRecord, read_progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepAudit:
    """One job's step accounting; ``problems`` is empty when every step was counted exactly once."""

    job_id: str
    target: int
    generations: int
    resumes: int
    kept: int  # steps in the kept trajectory
    steps_run: int  # step records, re-runs included
    rerun: int  # steps run again after a rollback (their first run was discarded), not a fault
    lost: int  # steps of 1..target that no kept generation accounts for
    doubled: int  # steps counted twice (by a generation, or by the journal)
    trajectory_ok: bool
    finished: bool
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Every step counted exactly once, the job finished and its trajectory continued."""
        return not self.problems


def audit_steps(
    records: Sequence[ProgressRecord],
    target: int,
    *,
    t0: float = 0.0,
    fails: Sequence[tuple[float, float]] = (),
    progress: Sequence[tuple[float, float]] = (),
    finishes: int = 1,
    journal_checkpoints: Sequence[int] | None = None,
    unread_bytes: int = 0,
    repeat_tol: float = 1e-4,
) -> StepAudit:
    """Audit one job: its progress records (file order), its target, and the journal's view of it.

    ``fails``: (time since ``t0``, step) of the job's FAIL operations; ``progress``: (time, iterations) of its PROGRESS
    operations (they may go back only at a FAIL: otherwise the steps in between were counted twice); ``finishes``: its FINISH count;
    ``journal_checkpoints``: the checkpoint steps the journal holds (None: not checked); ``unread_bytes``: how much
    of its progress channel lies beyond the journal's offset.
    """
    problems: list[str] = []
    job_id = records[0].job_id if records else "?"
    kept: list[int] = []
    reported: set[int] = set()
    starts: list[tuple[float, int]] = []  # (time since t0, resumed-from step) of every generation
    generations = resumes = steps_run = rerun = lost = doubled = 0
    seen: set[int] = set()
    done_at: int | None = None
    for rec in records:
        if rec.event == "start":
            generations += 1
            resumed = rec.info.get("resumed_from")
            step = 0 if resumed is None else int(resumed)
            resumes += resumed is not None
            starts.append((rec.t - t0, step))
            if resumed is not None and step not in reported:
                problems.append(f"generation {generations} resumed from step {step}, not a reported checkpoint")
            if resumed is None and reported:
                problems.append(f"generation {generations} started from scratch after checkpoints {sorted(reported)}")
            if step > len(kept):
                lost += step - len(kept)
                problems.append(f"generation {generations} resumed from step {step} but only {len(kept)} were kept")
                kept.extend(range(len(kept) + 1, step + 1))
            del kept[step:]
        elif rec.event == "step":
            steps_run += 1
            if rec.step in seen and rec.step > len(kept):
                rerun += 1
            seen.add(rec.step)
            if not starts:
                problems.append(f"step {rec.step} before any start record")
            if rec.step == len(kept) + 1:
                kept.append(rec.step)
            elif rec.step <= len(kept):
                doubled += 1
                problems.append(f"generation {generations}: step {rec.step} counted again after step {len(kept)}")
            else:
                lost += rec.step - len(kept) - 1
                problems.append(f"generation {generations}: step {rec.step} follows step {len(kept)} (a gap)")
                kept.extend(range(len(kept) + 1, rec.step + 1))
        elif rec.event in ("checkpoint", "done", "stopped") and rec.ckpt_step is not None:
            if rec.ckpt_step > len(kept):
                problems.append(f"checkpoint of step {rec.ckpt_step} reported with only {len(kept)} steps kept")
            reported.add(rec.ckpt_step)
            if rec.event == "done":
                done_at = rec.step
    if done_at is None:
        problems.append("no done record")
    elif done_at != target or len(kept) != target:
        problems.append(f"done at step {done_at} with {len(kept)} steps kept, target {target}")
    lost += max(0, target - len(kept))
    if finishes != 1:
        problems.append(f"the journal holds {finishes} FINISH operations of the job, not 1")
        doubled += max(0, finishes - 1) * target
    if journal_checkpoints is not None:
        missing = sorted(reported - set(journal_checkpoints))
        if missing:
            problems.append(f"checkpoints {missing} reported but not in the journal")
    for t, step in fails:
        # the generation the controller launched after the FAIL resumes from the checkpoint it names
        resumed = next((s for ts, s in starts if ts >= t), None)
        if resumed is None:
            problems.append(f"FAIL at t={t:.1f} s (step {step:g}) followed by no generation")
        elif not math.isclose(step, resumed):
            delta = int(round(step)) - resumed
            if delta > 0:
                doubled += delta
            else:
                lost += -delta
            problems.append(
                f"FAIL at t={t:.1f} s rolled the job back to step {step:g}, its relaunch resumed at {resumed}"
            )
    events = sorted([(t, 1, n) for t, n in progress] + [(t, 0, n) for t, n in fails])  # a FAIL first at a tie
    floor = 0.0
    for t, is_progress, n in events:
        if is_progress and n < floor:
            doubled += int(round(floor - n))
            problems.append(f"the journal's progress went back from {floor:g} to {n:g} at t={t:.1f} s without a FAIL")
        floor = n if not is_progress else max(floor, n)
    if unread_bytes:
        problems.append(f"{unread_bytes} bytes of its progress channel were never applied to the journal")
    trajectory = check_trajectory(records, target, repeat_tol)
    problems.extend(f"trajectory: {p}" for p in trajectory.problems)
    return StepAudit(
        job_id,
        target,
        generations,
        resumes,
        len(kept),
        steps_run,
        rerun,
        lost,
        doubled,
        trajectory.ok,
        done_at is not None and finishes >= 1,
        tuple(problems),
    )


def audit_deployment(out_dir: str | Path, run_dir: str | Path | None = None) -> list[StepAudit]:
    """Audit every job of the deployment in ``out_dir`` (its journal; progress channels under ``run_dir``, by
    default ``out_dir/run``)."""
    out_dir = Path(out_dir)
    runs = Path(run_dir) if run_dir is not None else out_dir / "run"
    journal = Journal(out_dir / Journal.FILENAME)
    try:
        jobs = [job_from_dict(d) for d in journal.meta("workload", [])]
        ops: list[Op] = journal.ops()
        t0 = float(journal.meta("t0", 0.0))
        offsets = journal.offsets()
        checkpoints = {job.job_id: [s for s, _ in journal.checkpoints(job.job_id)] for job in jobs}
    finally:
        journal.close()
    audits = []
    for job in jobs:
        path = runs / "jobs" / dirname(job.job_id) / "progress.jsonl"
        records = read_progress(path) if path.is_file() else []
        size = path.stat().st_size if path.is_file() else 0
        audit = audit_steps(
            records,
            job.iterations,
            t0=t0,
            fails=[(op.t, op.iterations_done) for op in ops if isinstance(op, Fail) and op.job_id == job.job_id],
            progress=[(op.t, op.iterations_done) for op in ops if isinstance(op, Progress) and op.job_id == job.job_id],
            finishes=sum(isinstance(op, Finish) and op.job_id == job.job_id for op in ops),
            journal_checkpoints=checkpoints[job.job_id],
            unread_bytes=max(0, size - offsets.get(job.job_id, 0)),
        )
        if not audit.ok:
            log.warning("job %s: %s", job.job_id, "; ".join(audit.problems))
        audits.append(audit)
    return audits


def summary(audits: Sequence[StepAudit]) -> Mapping[str, int]:
    """The deployment's totals: jobs, finished, trajectories continued, steps kept, lost, doubled, re-run."""
    return {
        "jobs": len(audits),
        "finished": sum(a.finished for a in audits),
        "trajectories_ok": sum(a.trajectory_ok for a in audits),
        "accounted_ok": sum(a.ok for a in audits),
        "steps_target": sum(a.target for a in audits),
        "steps_kept": sum(a.kept for a in audits),
        "steps_lost": sum(a.lost for a in audits),
        "steps_doubled": sum(a.doubled for a in audits),
        "steps_rerun": sum(a.rerun for a in audits),
        "resumes": sum(a.resumes for a in audits),
    }
