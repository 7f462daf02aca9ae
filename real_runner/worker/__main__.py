"""Worker entry point: ``python -m real_runner.worker --spec FILE [--pin-core N] [--launched-at T]``.

The command line of one training rank (CLI code: it prints). Run one process per rank. The rank and world size come from ``RANK`` /
``WORLD_SIZE`` (default: one process), the rendezvous from ``MASTER_ADDR`` / ``MASTER_PORT``
(``env://``), as torchrun and :mod:`real_runner.ranks` set them; ``LOCAL_RANK`` picks the CUDA
device. Backend: nccl with CUDA, gloo on CPU (one intra-op thread per rank). The work itself is
:mod:`real_runner.worker`.

Exit codes: 0 when the target step is reached (after a final checkpoint and a ``done`` record) or
after SIGTERM (the job saves at the next step boundary and writes ``stopped``); 2 for bad input (a
spec, plan or checkpoint that cannot be used), with one line on stderr and nothing written; 1 for
any other failure, with the cause on stderr. SIGTERM is handled from the start.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from real_runner.checkpoint_files import CheckpointError
from real_runner.rank_cli import OneLineParser, exit_now, log_to_stderr
from real_runner.spec import WorkerSpec
from real_runner.worker import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    Timing,
    find_checkpoint,
    rank_env,
    record_error,
    resolve,
    train,
)


def build_parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    p = OneLineParser(prog="python -m real_runner.worker", description=__doc__.split("\n\n")[0], allow_abbrev=False)
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


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run one rank; return the exit code."""
    main_at = time.time()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    args = build_parser().parse_args(argv)
    env = os.environ if env is None else env
    log_to_stderr(args.log_level, env)
    try:
        rank, world, local_rank = rank_env(env)
        spec = WorkerSpec.load(args.spec)
        executed = resolve(spec, world)
        resume = find_checkpoint(spec) if args.hold_until is None else None  # held: read after the release
        if args.pin_core is not None:
            os.sched_setaffinity(0, {args.pin_core})
    except (ValueError, CheckpointError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        timing = Timing(main_at, args.launched_at, time.time() - main_at)
        hold = None if args.hold_until is None else Path(args.hold_until)
        return train(spec, executed, resume, hold, rank, world, local_rank, timing, stop)
    except CheckpointError as exc:  # the checkpoint passed its manifest but DCP's loader refused it
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - any failure: cause on stderr, an error record, non-zero exit
        traceback.print_exc(file=sys.stderr)
        message = f"{type(exc).__name__}: {exc}"
        print(f"error: {message}", file=sys.stderr)
        if rank == 0:
            record_error(spec, message)
        return EXIT_FAILURE


def run() -> NoReturn:
    """:func:`main` on the process's command line, then a fast exit with its code."""
    exit_now(main())


if __name__ == "__main__":
    run()
