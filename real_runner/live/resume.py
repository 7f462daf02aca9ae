"""Resume: a new controller rebuilds an interrupted deployment from its journal and takes over its processes.

The journal's operation log is replayed into the fresh cluster core (the event log comes back
exactly); every generation the journal lists is reattached to (its ranks still run) or found gone;
a leftover generation is stopped, what a gone one wrote while no controller watched is read, and
every unfinished job that held devices but has no process left is relaunched from its latest
checkpoint on the same devices (a FAIL when it had been running).
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arena_gym.core.oplog import Fail, Op, Run, Submit, replay
from arena_gym.fields import fits
from arena_gym.types import JobId, JobStatus
from real_runner.live.devices import DeviceMap
from real_runner.live.generations import Generation, LiveJob
from real_runner.live.journal import GenerationRow, Journal, JournalError
from real_runner.live.processes import Processes, latest_checkpoint
from real_runner.live.state import JournaledState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resumed:
    """What the journal says besides the cluster state: the jobs submitted, the decisions made and their wall time."""

    submitted: frozenset[JobId]
    decisions: int
    decide_wall_s: float


def resume(books: JournaledState, processes: Processes, devices: DeviceMap) -> Resumed:
    """Rebuild ``books`` from its journal and take over the generations of ``processes``' jobs.

    A job found finished while no controller watched departs through ``processes.reader`` (as any completion).
    JournalError (one line, nothing launched or stopped) when the journal is damaged: its database, a row, operations
    that do not replay, a progress offset that is not where its job's channel was read to.
    """
    journal = books.journal
    journal.check()
    ops = journal.ops()
    try:
        replay(ops, books.state)
    except (ValueError, KeyError) as exc:
        reason = " ".join(str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc).split())
        raise JournalError(f"journal {journal.path}: its operations do not replay ({reason})") from None
    t0 = journal.meta("t0")
    if not (fits(t0, float) and math.isfinite(t0)):
        raise JournalError(f"journal {journal.path}: its start time t0 is damaged ({t0!r})")
    books.start(float(t0), ops[-1].t if ops else 0.0)
    offsets = journal.offsets()
    for job_id, job in processes.jobs.items():
        job.tail.offset = _checked_offset(journal, job, offsets.get(job_id, 0), ops)
    rows: dict[str, list[GenerationRow]] = {}
    for row in journal.generations():
        rows.setdefault(row.job_id, []).append(row)
    checkpoints = {job_id: journal.checkpoints(job_id) for job_id in processes.jobs}
    try:
        generations = {
            job_id: [(row, Generation.from_row(row)) for row in rows.get(job_id, [])] for job_id in processes.jobs
        }
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise JournalError(
            f"journal {journal.path}: a generation row is damaged ({' '.join(str(exc).split())})"
        ) from None
    try:
        with journal.transaction():
            for job_id, job in processes.jobs.items():
                job.ckpt_step = next((s for s, _ in reversed(checkpoints[job_id])), None)
                _take_over(books, processes, devices, job, generations[job_id])
            journal.set_meta("status", "running")
    except sqlite3.Error as exc:
        raise JournalError(f"journal {journal.path}: damaged ({' '.join(str(exc).split())})") from None
    log.info("resumed the deployment at t=%.1f s: %d job(s) unfinished", books.t, books.state.unfinished)
    return Resumed(
        frozenset(op.job_id for op in ops if isinstance(op, Submit)),
        int(journal.meta("decisions", 0)),
        float(journal.meta("decide_wall_s", 0.0)),
    )


def _checked_offset(journal: Journal, job: LiveJob, offset: int, ops: Sequence[Op]) -> int:
    """``offset`` if it can be where the job's progress channel was read to: within the file, at the start of a line,
    and not at its start when the journal holds records of the job (a RUN). JournalError otherwise: records read
    again would be applied twice, records skipped never."""
    path: Path = job.tail.path
    size = path.stat().st_size if path.is_file() else 0
    ran = any(isinstance(op, Run) and op.job_id == job.spec.job_id for op in ops)
    where = f"journal {journal.path}: job {job.spec.job_id}'s progress offset {offset}"
    if offset > size:
        raise JournalError(f"{where} lies beyond its progress channel ({size} bytes)")
    if offset > 0:
        with open(path, "rb") as fh:
            fh.seek(offset - 1)
            if fh.read(1) != b"\n":
                raise JournalError(f"{where} is not at the start of a record")
    elif ran:
        raise JournalError(f"{where} would read again the records it has applied")
    return offset


def _take_over(
    books: JournaledState,
    processes: Processes,
    devices: DeviceMap,
    job: LiveJob,
    rows: Sequence[tuple[GenerationRow, Generation]],
) -> None:
    """Reattach to or stop every generation of ``job`` the journal lists; relaunch its current one if it is gone."""
    job_id, state = job.spec.job_id, books.state
    view = state.view(job_id)
    job.number = max((r.gen for r, _ in rows), default=0)
    holds = view.status in (JobStatus.RUNNING, JobStatus.RECONFIGURING)  # a finished job's view keeps its allocation
    current = rows[-1][0] if rows and holds else None
    if holds and (current is None or rows[-1][1].alloc != view.allocation):
        raise JournalError(
            f"journal {books.journal.path}: job {job_id} holds devices but its generation is not journaled"
        )
    for row, gen in rows:
        if row.phase == "exited" and row is not current:
            continue
        handle = (
            processes.launcher.reattach(processes.request(job, gen), row.data.get("handle") or {})
            if row.phase != "exited"
            else None
        )
        if row is current:
            devices.restore(job_id, gen.slots)
            job.current = gen
        if handle is None:
            gen.phase = "exited"
            processes.put(gen)
            continue
        gen.handle, gen.launched_at = handle, books.t
        job.gens.append(gen)
        if row is current and row.phase in ("planned", "held", "released"):
            gen.phase = "released" if row.phase == "released" else "held"
            if gen.phase == "released":
                gen.released_at = gen.last_record_at = books.t
                handle.release()  # idempotent: the crash may have come between the journal entry and the release
            log.info("job %s: reattached to generation %d (pids %s)", job_id, gen.number, list(handle.pids))
        else:
            gen.phase = row.phase if row.phase != "planned" else "held"
            gen.released_at = books.t if row.phase in ("released", "stopping") else math.nan
            processes.stop_gracefully(gen, books.t)
            log.info("job %s: stopping leftover generation %d (pids %s)", job_id, gen.number, list(handle.pids))
        processes.put(gen)
    gone = job.current
    if gone is None or gone.phase != "exited" or state.status(job_id) is JobStatus.FINISHED:
        return
    if current is not None and current.data.get("released_at") is not None:
        processes.reader.read(job, gone)  # what it wrote while no controller watched (its completion too)
    if state.status(job_id) is JobStatus.FINISHED:
        return
    if state.status(job_id) is JobStatus.RUNNING:
        step = latest_checkpoint(job)
        books.op(Fail(books.t, job_id, step, "its processes ended while no controller ran"))
        log.info("job %s: its generation %d is gone; relaunching from step %d", job_id, gone.number, step)
    processes.plan(job, gone.alloc, gone.slots, gone.executed)
