"""One rank of a training job, as a library: the checks that need no torch, then the training.

:mod:`real_runner.worker.__main__` is the process entry point (``python -m real_runner.worker``):
it reads the command line and the rank variables, calls :func:`prepare` and :func:`train`, and
maps their exceptions to one line on stderr and the exit codes below.

Exit codes: 0 when the target step is reached (after a final checkpoint and a ``done`` record) or
after a stop request (the job saves at the next step boundary and writes ``stopped``); 2 for bad input
(a spec, plan or checkpoint that cannot be used: ``ValueError``, ``CheckpointError``, ``OSError``
before torch); 1 for any other failure (:func:`record_error` writes its ``error`` record).

Everything that can be checked without torch (spec, plan, checkpoint manifests) is checked before
torch is imported, so bad input fails within a second.

Pre-launch (``hold``): a new generation can be started while the previous one still runs; it imports
torch, then waits for the hold file (the launcher creates it once the previous generation has exited)
before it selects the checkpoint and joins the group, which takes the interpreter start and the torch
import out of the reconfiguration time.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from real_runner.allocator import keep_freed_memory
from real_runner.checkpoint_files import CheckpointInfo, select_checkpoint
from real_runner.plans import ExecutedPlan, model_spec, resolve_plan
from real_runner.progress import ProgressRecord, ProgressWriter
from real_runner.spec import WorkerSpec

log = logging.getLogger("real_runner.worker")

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


@dataclass(frozen=True)
class Timing:
    """Start-up times of a rank, reported in its ``start`` record."""

    main_at: float  # wall time the entry point began
    launched_at: float | None  # wall time the launcher started the process
    prepare_s: float  # checks before torch


def rank_env(env: Mapping[str, str]) -> tuple[int, int, int]:
    """(rank, world size, local rank) from ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` in ``env`` (defaults: one rank).

    ValueError (one line) when they are not integers or the rank lies outside the world.
    """
    try:
        rank, world, local = int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1")), int(env.get("LOCAL_RANK", "0"))
    except ValueError as exc:
        raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers ({exc})") from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK {rank} is outside WORLD_SIZE {world}")
    return rank, world, local


def resolve(spec: WorkerSpec, world_size: int) -> ExecutedPlan:
    """The plan checked against model, batch and world size; ValueError (one line) on bad input."""
    return resolve_plan(model_spec(spec.model), spec.plan, spec.global_batch, world_size)


def find_checkpoint(spec: WorkerSpec) -> CheckpointInfo | None:
    """The verified checkpoint to resume from (None: a fresh start); CheckpointError (one line) on bad input."""
    return select_checkpoint(spec.checkpoint_dir, spec.identity(), require=spec.require_checkpoint)


def prepare(spec: WorkerSpec, world_size: int) -> tuple[ExecutedPlan, CheckpointInfo | None]:
    """Everything checkable before torch: :func:`resolve` and :func:`find_checkpoint`."""
    return resolve(spec, world_size), find_checkpoint(spec)


def ready_file(hold: Path, rank: int) -> Path:
    """The file a held rank creates once it waits for ``hold`` (torch imported)."""
    return hold.with_name(f"{hold.name}.ready{rank}")


def _wait_for_file(path: Path, stop: threading.Event, poll_s: float = 0.005) -> bool:
    """Block until ``path`` exists (True) or a stop is requested (False)."""
    while not path.exists():
        if stop.wait(poll_s):
            return False
    return True


def record_error(spec: WorkerSpec, message: str) -> None:
    """Append an ``error`` record with ``message`` to the job's progress file (logged when that fails)."""
    try:
        writer = ProgressWriter(spec.progress_path)
        writer.write(ProgressRecord(time.time(), "error", spec.job_id, -1, info={"message": message}))
        writer.close()
    except OSError as exc:
        log.error("could not write the error record to %s: %s", spec.progress_path, exc)


def train(
    spec: WorkerSpec,
    executed: ExecutedPlan,
    resume: CheckpointInfo | None,
    hold: Path | None,
    rank: int,
    world: int,
    local_rank: int,
    timing: Timing,
    stop: threading.Event,
) -> int:
    """Train this rank from ``resume`` (None: from scratch) until the spec's target step or until ``stop``
    is set; return :data:`EXIT_OK`.

    With ``hold``, import torch, mark this rank ready (:func:`ready_file`) and wait for ``hold`` before the
    checkpoint is selected (``resume`` is then ignored). CheckpointError: a checkpoint that passed its
    manifest but that DCP refused, or none where the spec requires one (bad input); any other exception
    is a failure.
    """
    for note in executed.notes:
        log.warning("plan %s: %s", spec.plan.describe(), note)
    t_import = time.time()
    import torch  # noqa: PLC0415 - imported after the checks and the SIGTERM handler
    import torch.distributed as dist  # noqa: PLC0415

    from real_runner.executor import backend_for  # noqa: PLC0415
    from real_runner.job import RunContext, run_job  # noqa: PLC0415

    if spec.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("the spec asks for device cuda but CUDA is not available")
    cuda = spec.device == "cuda" or (spec.device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
        keep_freed_memory()
    import_s = time.time() - t_import
    hold_s = 0.0
    if hold is not None:
        t_hold = time.time()
        ready_file(hold, rank).touch()
        if not _wait_for_file(hold, stop):
            log.info("rank %d: stopped while held; exiting without training", rank)
            return EXIT_OK
        t_released = time.time()
        hold_s = t_released - t_hold
        resume = find_checkpoint(spec)
        timing = replace(timing, prepare_s=timing.prepare_s + time.time() - t_released)
    t0 = time.time()
    if world > 1:
        dist.init_process_group(
            backend_for(device),
            init_method="env://",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=spec.group_timeout_s),
        )
    ctx = RunContext(
        rank, world, device, timing.main_at, timing.launched_at, timing.prepare_s, import_s, time.time() - t0, hold_s
    )
    try:
        result = run_job(spec, executed, resume, ctx, stop.is_set)
    finally:
        if world > 1 and dist.is_initialized():
            dist.destroy_process_group()
    log.info("rank %d: %s at step %d (checkpoint %s)", rank, result.event, result.step, result.ckpt_step)
    return EXIT_OK
