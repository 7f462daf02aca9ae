"""The training loop of one job generation on one rank: build, resume, train, checkpoint, stop.

``run_job`` expects the process group (if the plan has more than one rank) to exist already, so the
same loop serves a fresh worker process and a persistent worker that re-forms groups. Rank 0 writes
the progress records. Decisions that must be the same on every rank (stop at this step boundary,
take a time-triggered checkpoint) are agreed with one small all-reduce before every step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from real_runner import checkpoint
from real_runner.checkpoint_files import CheckpointInfo
from real_runner.executor import Trainer
from real_runner.plans import ExecutedPlan, model_spec
from real_runner.precision import resolve_precision
from real_runner.progress import ProgressRecord, ProgressWriter
from real_runner.spec import WorkerSpec
from real_runner.training_modes import remat_enabled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    """Where this rank runs and when its process started.

    ``launched_at`` is the wall time the launcher started the process (None when unknown),
    ``main_at`` the wall time the worker's code began (before torch is imported), ``prepare_s`` the
    time the checks before torch took (spec, plan, checkpoint verification), ``import_s`` the time
    torch and the training modules took to import, ``rendezvous_s`` the time the process group took
    to form, ``hold_s`` the time a pre-launched worker waited for its release.
    """

    rank: int
    world_size: int
    device: torch.device
    main_at: float
    launched_at: float | None = None
    prepare_s: float = 0.0
    import_s: float = 0.0
    rendezvous_s: float = 0.0
    hold_s: float = 0.0


@dataclass(frozen=True)
class JobResult:
    """How a generation ended: ``done`` (target reached) or ``stopped``; final step and its checkpoint."""

    event: str
    step: int
    ckpt_step: int | None


class _Run:
    """State of one generation's loop (rank, trainer, progress writer, last checkpoint)."""

    def __init__(self, spec: WorkerSpec, executed: ExecutedPlan, ctx: RunContext) -> None:
        self.spec, self.executed, self.ctx = spec, executed, ctx
        self.identity = spec.identity()
        self.writer: ProgressWriter | None = None  # opened by rank 0's first record
        self.trainer: Trainer
        self.ckpt_step: int | None = None
        self.last_save = time.monotonic()

    def record(self, event: str, step: int, **kw) -> None:
        if self.ctx.rank != 0:
            return
        if self.writer is None:
            self.writer = ProgressWriter(self.spec.progress_path)
        self.writer.write(ProgressRecord(time.time(), event, self.spec.job_id, step, **kw))

    def save(self, step: int) -> None:
        """Checkpoint after ``step`` steps unless the newest checkpoint already holds them."""
        if step <= (self.ckpt_step or 0):
            return
        t0 = time.perf_counter()

        def published(_: CheckpointInfo) -> None:
            save_s = time.perf_counter() - t0
            log.info("rank %d: checkpoint of step %d in %.2f s", self.ctx.rank, step, save_s)
            self.record("checkpoint", step, ckpt_step=step, info={"save_s": save_s})

        checkpoint.save(
            self.trainer,
            Path(self.spec.checkpoint_dir),
            step,
            self.identity,
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            extra={"job_id": self.spec.job_id, "world_size": self.ctx.world_size, "plan": self.executed.to_dict()},
            published=published,
        )
        self.ckpt_step, self.last_save = step, time.monotonic()

    def agree(self, stop: bool) -> tuple[bool, bool]:
        """(stop now, checkpoint now by time), the same on every rank (rank 0's clock decides the time)."""
        every_s = self.spec.checkpoint_every_s
        due = self.ctx.rank == 0 and every_s > 0 and time.monotonic() - self.last_save >= every_s
        if self.ctx.world_size == 1:
            return stop, due
        flags = torch.tensor([float(stop), float(due)], device=self.ctx.device)
        dist.all_reduce(flags)
        return bool(flags[0] > 0), bool(flags[1] > 0)


def run_job(
    spec: WorkerSpec,
    executed: ExecutedPlan,
    resume: CheckpointInfo | None,
    ctx: RunContext,
    should_stop: Callable[[], bool],
) -> JobResult:
    """Train ``spec`` under ``executed`` from ``resume`` (or from scratch) until the target or a stop request.

    ``should_stop`` is polled at every step boundary (e.g. set by SIGTERM); a stop saves a checkpoint
    first. Writes ``start``, ``step``, ``checkpoint`` and ``done``/``stopped`` records (rank 0).
    """
    run = _Run(spec, executed, ctx)
    try:
        return _loop(run, resume, should_stop)
    finally:
        if run.writer is not None:
            run.writer.close()


def _loop(run: _Run, resume: CheckpointInfo | None, should_stop: Callable[[], bool]) -> JobResult:
    spec, ctx = run.spec, run.ctx
    t0 = time.time()
    model = model_spec(spec.model)
    run.trainer = Trainer(
        model,
        run.executed,
        rank=ctx.rank,
        global_batch=spec.global_batch,
        lr=spec.lr,
        seed=spec.seed,
        device=ctx.device,
        precision=resolve_precision(spec.precision, model.dtype, ctx.device),
        remat=remat_enabled(spec.remat, model.remat),
    )
    t_built = time.time()
    step = 0
    if resume is not None:
        step = checkpoint.load(run.trainer, resume)
        run.ckpt_step = step
    t_ready = time.time()
    timings = {
        "prepare_s": ctx.prepare_s,
        "import_s": ctx.import_s,
        "hold_s": ctx.hold_s,
        "rendezvous_s": ctx.rendezvous_s,
        "build_s": t_built - t0,
        "load_s": t_ready - t_built,
    }
    if ctx.launched_at is not None:
        timings["launch_to_main_s"] = ctx.main_at - ctx.launched_at
        timings["launch_to_ready_s"] = t_ready - ctx.launched_at
    run.record(
        "start",
        step,
        ckpt_step=run.ckpt_step,
        info={
            "plan": run.executed.to_dict(),
            "world_size": ctx.world_size,
            "model": spec.model,
            "global_batch": spec.global_batch,
            "target_step": spec.target_step,
            "device": str(ctx.device),
            "precision": run.trainer.precision.name,
            "remat": run.trainer.remat,
            "resumed_from": resume.step if resume else None,
            "timings": timings,
            "local_parameters": run.trainer.local_parameters(),
        },
    )
    log.info(
        "rank %d: %s ready at step %d (build %.2f s, load %.2f s)",
        ctx.rank,
        run.executed.describe(),
        step,
        timings["build_s"],
        timings["load_s"],
    )
    run.last_save = time.monotonic()
    while True:
        stop, due = run.agree(should_stop())
        if step >= spec.target_step:
            run.save(step)
            run.record("done", step, ckpt_step=run.ckpt_step)
            return JobResult("done", step, run.ckpt_step)
        if stop:
            run.save(step)
            run.record("stopped", step, ckpt_step=run.ckpt_step)
            return JobResult("stopped", step, run.ckpt_step)
        if due:
            run.save(step)
        t = time.perf_counter()
        loss = run.trainer.train_step(step)
        dt = time.perf_counter() - t
        step += 1
        if step % spec.progress_every_steps == 0 or step == spec.target_step:
            run.record("step", step, loss=loss, iter_s=dt, samples_per_s=spec.global_batch / dt)
        if spec.checkpoint_every_steps and step % spec.checkpoint_every_steps == 0 and step < spec.target_step:
            run.save(step)
