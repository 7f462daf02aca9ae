"""Worker entry point: ``python -m real_runner.worker --spec FILE [--pin-core N] [--launched-at T]``.

Run one process per rank. The rank and world size come from ``RANK`` / ``WORLD_SIZE`` (default: one
process), the rendezvous from ``MASTER_ADDR`` / ``MASTER_PORT`` (``env://``), as torchrun and
:mod:`real_runner.launch` set them; ``LOCAL_RANK`` picks the CUDA device. Backend: nccl with CUDA,
gloo on CPU (one intra-op thread per rank).

Exit codes: 0 when the target step is reached (after a final checkpoint and a ``done`` record) or
after SIGTERM (the job saves at the next step boundary and writes ``stopped``); 2 for bad input (a
spec, plan or checkpoint that cannot be used), with one line on stderr and nothing written; 1 for
any other failure, with the cause on stderr.

Everything that can be checked without torch (spec, plan, checkpoint manifests) is checked before
torch is imported, so bad input fails within a second, and SIGTERM is handled from the start.

Pre-launch (``--hold-until FILE``): a new generation can be started while the previous one still
runs; it imports torch, then waits for FILE (the launcher creates it once the previous generation
has exited) before it selects the checkpoint and joins the group, which takes the interpreter start
and the torch import out of the reconfiguration time.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from real_runner.checkpoint_files import CheckpointError, CheckpointInfo, select_checkpoint
from real_runner.plans import ExecutedPlan, model_spec, resolve_plan
from real_runner.progress import ProgressRecord, ProgressWriter
from real_runner.spec import WorkerSpec

log = logging.getLogger("real_runner.worker")

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


@dataclass(frozen=True)
class _Timing:
    main_at: float  # wall time main() began
    launched_at: float | None  # wall time the launcher started the process
    prepare_s: float  # checks before torch


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    p = _Parser(prog="python -m real_runner.worker", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    p.add_argument("--spec", required=True, help="job spec JSON file (see real_runner.spec)")
    p.add_argument("--pin-core", type=int, default=None, help="pin this process to one CPU core")
    p.add_argument(
        "--launched-at",
        type=float,
        default=None,
        help="wall time (epoch seconds) the launcher started this process, for start-up timings",
    )
    p.add_argument(
        "--hold-until",
        default=None,
        metavar="FILE",
        help="pre-launch: import torch, then wait until FILE exists before reading the checkpoint and "
        "joining the process group (the previous generation may still be saving it)",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def _rank_env(env: Mapping[str, str]) -> tuple[int, int, int]:
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


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run one rank; return the exit code."""
    main_at = time.time()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    args = build_parser().parse_args(argv)
    env = os.environ if env is None else env
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format=f"%(asctime)s rank{env.get('RANK', '0')} %(levelname)s %(name)s: %(message)s",
    )
    try:
        rank, world, local_rank = _rank_env(env)
        spec = WorkerSpec.load(args.spec)
        executed = resolve(spec, world)
        resume = find_checkpoint(spec) if args.hold_until is None else None  # held: read after the release
        if args.pin_core is not None:
            os.sched_setaffinity(0, {args.pin_core})
    except (ValueError, CheckpointError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for note in executed.notes:
        log.warning("plan %s: %s", spec.plan.describe(), note)
    try:
        timing = _Timing(main_at, args.launched_at, time.time() - main_at)
        hold = None if args.hold_until is None else Path(args.hold_until)
        return _train(spec, executed, resume, hold, rank, world, local_rank, timing, stop)
    except CheckpointError as exc:  # the checkpoint passed its manifest but DCP's loader refused it
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - any failure: cause on stderr, an error record, non-zero exit
        traceback.print_exc(file=sys.stderr)
        message = f"{type(exc).__name__}: {exc}"
        print(f"error: {message}", file=sys.stderr)
        if rank == 0:
            _record_error(spec, message)
        return EXIT_FAILURE


def _record_error(spec: WorkerSpec, message: str) -> None:
    try:
        writer = ProgressWriter(spec.progress_path)
        writer.write(ProgressRecord(time.time(), "error", spec.job_id, -1, info={"message": message}))
        writer.close()
    except OSError as exc:
        log.error("could not write the error record to %s: %s", spec.progress_path, exc)


def _train(
    spec: WorkerSpec,
    executed: ExecutedPlan,
    resume: CheckpointInfo | None,
    hold: Path | None,
    rank: int,
    world: int,
    local_rank: int,
    timing: _Timing,
    stop: threading.Event,
) -> int:
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


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)  # skip the interpreter's slow teardown of torch's threads (seconds on CPU)
