"""Progress translation: a job's progress records become operations on the cluster core.

The first step of a generation is its RUN (the step's start, so that ALLOCATE to RUN is the real
reconfiguration overhead); measured rates become PROGRESS at most every
``config.progress_every_s``; the ``done`` record is the FINISH. Records are placed on the
deployment's clock in order with the other journaled operations (:meth:`JournaledState.wall_time`). Records
of a generation that is no longer the job's current one only update what the job reached (its step
and checkpoints).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from arena_gym.core.oplog import Fail, Finish, Progress, Run
from arena_gym.types import JobId, JobStatus
from real_runner.live.config import LiveConfig
from real_runner.live.generations import Generation, LiveJob
from real_runner.live.state import JournaledState
from real_runner.progress import ProgressRecord

log = logging.getLogger(__name__)


class ProgressReader:
    """Reads jobs' progress channels into ``books``; ``finished(job_id)`` is called when a job completes."""

    def __init__(self, books: JournaledState, config: LiveConfig, finished: Callable[[JobId], None]) -> None:
        self.books, self.config, self.finished = books, config, finished

    def read(self, job: LiveJob, gen: Generation | None = None) -> bool:
        """Apply the job's new records (of ``gen``, by default the released one); True when it completed."""
        records = job.tail.poll()
        if not records:
            return False
        gen = gen if gen is not None else job.reader
        done = False
        for rec in records:
            done |= self._on_record(job, gen, rec)
        self.books.journal.set_offset(job.spec.job_id, job.tail.offset)
        return done

    def _on_record(self, job: LiveJob, gen: Generation | None, rec: ProgressRecord) -> bool:
        books, job_id = self.books, job.spec.job_id
        if gen is not None:
            gen.last_record_at = books.t
        if rec.ckpt_step is not None and rec.event in ("checkpoint", "done", "stopped"):
            job.ckpt_step = rec.ckpt_step
            books.journal.add_checkpoint(job_id, rec.ckpt_step, rec.t - books.t0)
        if rec.event in ("done", "stopped", "error") and gen is not None:
            gen.end = rec.event
            if rec.event == "error":
                log.warning("job %s generation %d reports an error: %s", job_id, gen.number, rec.info.get("message"))
        if rec.event == "start" and gen is not None and gen is job.current and 0 <= rec.step < job.step:
            self._rolled_back(job, gen, rec)
        if rec.step >= 0:
            job.step = rec.step
        status = books.state.status(job_id)
        if gen is None or gen is not job.current or status is JobStatus.FINISHED:
            return False
        if rec.event == "step" and rec.iter_s is not None:
            gen.iter_times.append(rec.iter_s)
            if status is JobStatus.RECONFIGURING:
                books.op(Run(books.wall_time(rec.t, rec.iter_s), job_id, rec.iter_s))
                self._progress(job, books.wall_time(rec.t), rec.step, rec.iter_s)
                log.info(
                    "job %s runs generation %d (%s) from step %d",
                    job_id,
                    gen.number,
                    gen.executed.describe(),
                    rec.step - 1,
                )
            else:
                when = books.wall_time(rec.t)
                last_t, last_step = job.win
                if math.isnan(last_t):  # reattached after a controller restart: measure from here
                    job.win = (when, rec.step)
                elif when - last_t >= self.config.progress_every_s and rec.step > last_step:
                    self._progress(job, when, rec.step, (when - last_t) / (rec.step - last_step))
            return False
        if rec.event == "done":
            when = books.wall_time(rec.t)
            if status is JobStatus.RECONFIGURING:
                books.op(Run(when, job_id))
            books.op(Finish(when, job_id))
            self.finished(job_id)
            log.info("job %s finished at t=%.1f s (generation %d)", job_id, when, gen.number)
            return True
        return False

    def _rolled_back(self, job: LiveJob, gen: Generation, rec: ProgressRecord) -> None:
        """The job's new generation resumed behind steps its earlier ones ran and the core counted (their newest
        checkpoint is missing: a stop whose checkpoint failed, e.g. on a full disk, or a stop killed): the core falls
        back to the step it resumed from (a FAIL), so that those steps are not counted twice."""
        books, job_id = self.books, job.spec.job_id
        if books.state.status(job_id) not in (JobStatus.RUNNING, JobStatus.RECONFIGURING):
            return
        if not books.state.view(job_id).iterations_done(books.now()) > rec.step:
            return  # the core fell back already (a FAIL when the earlier generation failed)
        reason = f"generation {gen.number} resumed from step {rec.step}, behind step {job.step} of the earlier ones"
        log.warning("job %s: %s (their newest checkpoint is missing); those steps run again", job_id, reason)
        books.op(Fail(books.wall_time(rec.t), job_id, float(rec.step), reason))

    def _progress(self, job: LiveJob, t: float, step: int, iter_time: float) -> None:
        self.books.op(Progress(t, job.spec.job_id, step, max(iter_time, 1e-6)))
        job.win = (t, step)
