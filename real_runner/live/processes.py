"""Process generations: how the jobs' decisions become processes, and what happens when processes fail.

Every generation is journaled (planned) before it is launched; it is launched *held* (its ranks
import torch while the previous generation saves), released once its job's older generations
have exited and no other process is left on its slots, stopped when its job is moved or preempted
(gracefully once released, SIGTERM: checkpoint, exit 0; killed while still held), and reaped when
every rank has exited. Faults: a rank that exits non-zero (the others are killed), a generation
whose progress goes stale or that never starts (killed), or one that exits without completing, is
relaunched from the job's latest checkpoint on the same devices (a FAIL on the cluster state), at
most ``config.max_retries`` times per job; while an older generation of the job still stops, the
FAIL waits for it (it may still save the checkpoint the relaunch resumes from, the step the FAIL
names).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping

from arena_gym.core.oplog import Fail
from arena_gym.types import Allocation, JobId, JobStatus
from real_runner.checkpoint_files import CheckpointError, select_checkpoint
from real_runner.launchers.base import Launcher, LaunchRequest, RankSlot
from real_runner.live.config import LiveConfig
from real_runner.live.generations import Generation, LiveJob
from real_runner.live.reports import ProgressReader
from real_runner.live.state import JournaledState, LiveError
from real_runner.plans import ExecutedPlan
from real_runner.spec import WorkerSpec
from real_runner.worker import EXIT_BAD_INPUT

log = logging.getLogger(__name__)


class Processes:
    """The generations of a deployment's ``jobs``, started by ``launcher`` (``cuda``: GPU devices; ``env``: the
    workers' base environment), their progress read by ``reader``; ``sleep`` waits between polls."""

    def __init__(
        self,
        books: JournaledState,
        reader: ProgressReader,
        launcher: Launcher,
        config: LiveConfig,
        env: Mapping[str, str],
        cuda: bool,
        sleep: Callable[[float], None],
    ) -> None:
        self.books, self.reader, self.launcher, self.config = books, reader, launcher, config
        self.env, self.cuda, self.sleep = env, cuda, sleep
        self.jobs: dict[JobId, LiveJob] = {}
        self._to_launch: list[Generation] = []

    def load(self, jobs: Iterable[LiveJob]) -> None:
        """Forget every generation; manage these jobs."""
        self.jobs = {job.spec.job_id: job for job in jobs}
        self._to_launch = []

    # ------------------------------------------------------------------ lifecycle
    def plan(self, job: LiveJob, alloc: Allocation, slots: tuple[RankSlot, ...], executed: ExecutedPlan) -> Generation:
        """Plan (and journal) the job's next generation as its current one; it is launched after the journal commits."""
        job.number += 1
        gen = Generation(job.spec.job_id, job.number, alloc, slots, executed, job.dir / f"gen{job.number:03d}")
        job.current = gen
        job.gens.append(gen)
        self.put(gen)
        self._to_launch.append(gen)
        return gen

    def launch_planned(self, t: float) -> None:
        """Launch the planned generations (their journal entries are on disk by now)."""
        planned, self._to_launch = self._to_launch, []
        for gen in planned:
            job = self.jobs[gen.job_id]
            if gen is not job.current or gen.phase != "planned":
                continue
            gen.dir.mkdir(parents=True, exist_ok=True)
            gen.spec_path.write_text(self._worker_spec(job, gen).to_json(), encoding="utf-8")
            gen.handle = self.launcher.launch(self.request(job, gen))
            gen.phase = "held"
            gen.launched_at = t
            with self.books.journal.transaction():
                self.put(gen)
            log.info(
                "job %s generation %d launched on %s: %s",
                gen.job_id,
                gen.number,
                [f"{s.host}:{s.device}" for s in gen.slots],
                gen.executed.describe(),
            )

    def stop(self, gen: Generation, t: float) -> None:
        """Stop a generation: a held one is killed at once, as it has neither trained nor read a checkpoint, and its
        torch import would go on taking the cores or host CPU its successor starts on; else :meth:`stop_gracefully`."""
        if gen.phase == "held" and gen.handle is not None:
            gen.handle.kill()
            gen.phase = "stopping"
            gen.stop_at = t
            self.put(gen)
        else:
            self.stop_gracefully(gen, t)

    def stop_gracefully(self, gen: Generation, t: float) -> None:
        """Stop a generation by SIGTERM: a released one checkpoints first, a held one exits once its import is done
        (how a resumed deployment stops its leftovers: one journaled held may have been released before the crash)."""
        if gen.phase == "planned":
            gen.phase = "exited"
        elif gen.alive and gen.handle is not None:
            gen.handle.terminate()
            gen.phase = "stopping"
            gen.stop_at = t
        self.put(gen)

    def stop_all(self, wait_s: float) -> None:
        """Stop every generation gracefully, wait up to ``wait_s`` for them, then kill what is left."""
        t = self.books.now()
        with self.books.journal.transaction():
            for job in self.jobs.values():
                for gen in job.gens:
                    if gen.phase in ("held", "released"):
                        self.stop(gen, t)
                    elif gen.phase == "planned":
                        self._to_launch = [g for g in self._to_launch if g is not gen]
        deadline = time.monotonic() + wait_s
        while self.alive() and time.monotonic() < deadline:
            self.sleep(self.config.poll_s)
            self.books.now()  # the deployment's clock follows the wait
            self.reap()
        for job in self.jobs.values():
            for gen in job.gens:
                if gen.alive and gen.handle is not None:
                    log.warning("job %s generation %d did not stop in time; killing it", gen.job_id, gen.number)
                    gen.handle.kill()
        self.books.now()
        self.reap(wait=True)

    def kill_all(self) -> None:
        """Kill every generation still running (the controller is closing)."""
        for job in self.jobs.values():
            for gen in job.gens:
                if gen.handle is not None and gen.alive:
                    log.warning("closing: killing job %s generation %d", gen.job_id, gen.number)
                    gen.handle.kill()
                    gen.handle.close()

    def put(self, gen: Generation) -> None:
        """Journal a generation as it stands."""
        self.books.journal.put_generation(gen.job_id, gen.number, gen.phase, gen.facts())

    def alive(self) -> bool:
        """Whether any generation has a rank running."""
        return any(g.alive for job in self.jobs.values() for g in job.gens)

    def reap(self, wait: bool = False) -> None:
        """Mark generations whose ranks all exited (``wait``: until they have)."""
        with self.books.journal.transaction():
            for job in self.jobs.values():
                for gen in job.gens:
                    while gen.alive and gen.handle is not None:
                        if all(c is not None for c in gen.handle.poll()):
                            self.reader.read(job)
                            self.exited(gen)
                        elif wait:
                            self.sleep(self.config.poll_s)
                        else:
                            break

    def exited(self, gen: Generation) -> None:
        """Every rank of ``gen`` has exited."""
        gen.phase = "exited"
        if gen.handle is not None:
            gen.handle.close()
        self.put(gen)

    def request(self, job: LiveJob, gen: Generation) -> LaunchRequest:
        """What the launcher starts (or reattaches to) for ``gen``."""
        return LaunchRequest(job.spec.job_id, gen.number, gen.spec_path, gen.slots, gen.dir, self.env, cuda=self.cuda)

    def _worker_spec(self, job: LiveJob, gen: Generation) -> WorkerSpec:
        cfg = self.config
        device = cfg.device if cfg.device != "auto" else ("cuda" if self.cuda else "cpu")
        return WorkerSpec(
            job_id=job.spec.job_id,
            model=job.spec.model.name,
            global_batch=job.spec.global_batch,
            plan=gen.executed.plan,
            target_step=job.spec.iterations,
            checkpoint_dir=str(job.ckpt_dir),
            progress_path=str(job.progress_path),
            seed=cfg.seed,
            checkpoint_every_steps=cfg.checkpoint_every_steps,
            checkpoint_every_s=cfg.checkpoint_every_s,
            lr=cfg.lr,
            device=device,
            require_checkpoint=job.ckpt_step is not None,
            group_timeout_s=cfg.group_timeout_s,
            precision=cfg.precision,
            remat=cfg.remat,
        )

    # ------------------------------------------------------------------ watching
    def watch(self, job: LiveJob) -> bool:
        """Progress, exits, releases and timeouts of one job's generations; True when it completed or failed."""
        triggered = self.reader.read(job)
        for gen in list(job.gens):
            if gen.handle is not None and gen.alive:
                self._check_exit(job, gen)
        triggered |= self._fail_when_alone(job)
        current = job.current
        if (
            current is not None
            and current.phase == "held"
            and current.handle is not None
            and current.handle.held_ready()
        ):
            self._maybe_release(job, current)
        for gen in job.gens:
            if gen.alive:
                self._check_time(job, gen, self.books.now())
        job.gens = [g for g in job.gens if g.alive or g is job.current]
        return triggered

    def release_ready(self) -> None:
        """Release every job's held generation that is ready and no longer waits for other processes (after all
        jobs' exits were seen, so that releases do not depend on the order the jobs are watched in)."""
        for job in self.jobs.values():
            current = job.current
            if current is not None and current.phase == "held" and current.handle is not None:
                if current.handle.held_ready():
                    self._maybe_release(job, current)

    def _maybe_release(self, job: LiveJob, gen: Generation) -> None:
        """Release a held generation once its job's older ones exited and its slots are free of other processes."""
        if any(g.alive for g in job.gens if g is not gen):
            return
        if any(g is not gen and g.alive and g.keys & gen.keys for other in self.jobs.values() for g in other.gens):
            return
        self.reader.read(job)
        assert gen.handle is not None
        gen.phase = "released"
        gen.released_at = self.books.now()
        self.books.journal.set_offset(job.spec.job_id, job.tail.offset)
        self.put(gen)
        gen.handle.release()

    # ------------------------------------------------------------------ faults
    def _check_exit(self, job: LiveJob, gen: Generation) -> None:
        """Handle ranks that exited: a current generation that ended unfinished is marked failing (see
        :meth:`_fail_when_alone`)."""
        assert gen.handle is not None
        codes = gen.handle.poll()
        bad = [c for c in codes if c not in (None, 0)]
        if any(c is None for c in codes):
            if bad:  # the others would wait in a collective until the group timeout
                if gen.failing is None:
                    gen.failing = f"rank exit code(s) {bad}"
                    (log.warning if gen is job.current else log.debug)(
                        "job %s generation %d: a rank exited with %s; killing the others", gen.job_id, gen.number, bad
                    )
                gen.handle.kill()
            return
        self.reader.read(job)  # everything it wrote before it exited
        self.exited(gen)
        if gen is not job.current or self.books.state.status(job.spec.job_id) is JobStatus.FINISHED:
            return
        if EXIT_BAD_INPUT in codes and gen.failing is None:
            last = gen.handle.log_tail(codes.index(EXIT_BAD_INPUT)).strip().splitlines()[-1:]
            raise LiveError(f"job {gen.job_id} generation {gen.number} refused its input (exit 2): {' '.join(last)}")
        gen.failing = gen.failing or (
            f"exit codes {codes}" if bad else f"exited without completing ({gen.end or 'no record'})"
        )

    def _fail_when_alone(self, job: LiveJob) -> bool:
        """Fail the job's exited current generation once no older one runs (a stopping one may still save the
        checkpoint the relaunch resumes from, the step the FAIL must name); True when it failed now."""
        gen = job.current
        if gen is None or gen.phase != "exited" or gen.failing is None or any(g.alive for g in job.gens):
            return False
        self._fail(job, gen, gen.failing)
        return True

    def _fail(self, job: LiveJob, gen: Generation, reason: str) -> None:
        """The current generation failed: fall back to the latest checkpoint and relaunch on the same devices."""
        job.retries += 1
        if job.retries > self.config.max_retries:
            raise LiveError(
                f"job {job.spec.job_id} failed {job.retries} times (last: {reason}); giving up "
                "(fix the cause, then resume the deployment)"
            )
        step = latest_checkpoint(job)
        log.warning(
            "job %s generation %d failed (%s); relaunching from step %d (retry %d of %d)",
            job.spec.job_id,
            gen.number,
            reason,
            step,
            job.retries,
            self.config.max_retries,
        )
        self.books.op(Fail(self.books.now(), job.spec.job_id, step, reason))
        self.plan(job, gen.alloc, gen.slots, gen.executed)

    def _check_time(self, job: LiveJob, gen: Generation, t: float) -> None:
        """Timeouts: a start that never comes, stale progress, a stop that takes too long."""
        assert gen.handle is not None
        cfg = self.config
        if gen.phase == "stopping":
            if t - gen.stop_at > cfg.stop_grace_s and gen.failing is None:
                self._kill_failing(gen, f"still running {cfg.stop_grace_s:.0f} s after SIGTERM")
            return
        if gen.failing is not None or gen is not job.current:
            return
        if gen.phase == "held":
            if t - gen.launched_at > cfg.start_timeout_s:
                self._kill_failing(gen, f"not ready {cfg.start_timeout_s:.0f} s after its launch")
            return
        if math.isnan(gen.last_record_at) or gen.last_record_at < gen.released_at:
            if t - gen.released_at > cfg.start_timeout_s:
                self._kill_failing(gen, f"no progress record {cfg.start_timeout_s:.0f} s after its release")
            return
        limit = cfg.stale_timeout_s
        if gen.iter_times:
            limit = max(limit, cfg.stale_steps * statistics.median(gen.iter_times))
        if t - gen.last_record_at > limit:
            self._kill_failing(gen, f"progress stale for {t - gen.last_record_at:.0f} s (limit {limit:.0f} s)")

    def _kill_failing(self, gen: Generation, reason: str) -> None:
        log.warning(
            "job %s generation %d: %s; killing its ranks %s",
            gen.job_id,
            gen.number,
            reason,
            list(gen.handle.pids) if gen.handle else [],
        )
        gen.failing = reason
        if gen.handle is not None:
            gen.handle.kill()


def latest_checkpoint(job: LiveJob) -> int:
    """Step of the job's newest verified checkpoint (0: none); LiveError when its checkpoints are unreadable."""
    try:
        info = select_checkpoint(job.ckpt_dir, job.identity)
    except CheckpointError as exc:
        raise LiveError(f"job {job.spec.job_id}: {exc}") from None
    return 0 if info is None else info.step
