"""One profiling rank: ``python -m real_runner.profiler.worker --spec JOB.json [--pin-core N] [--launched-at T]``.

The command line of one profiling rank (CLI code: it prints). Started by
:func:`real_runner.profiler.run.profile_testbed` with the runner's rank variables (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``). Each rank pins itself (CPU: one
core, one thread), then profiles its device (:mod:`real_runner.profiler.worker`). Exit codes: 0 done,
2 bad input (one line on stderr), 1 any other failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import NoReturn

from real_runner.profiler.settings import ProfileJob
from real_runner.profiler.worker import EXIT_BAD_INPUT, EXIT_FAILURE, run_rank
from real_runner.rank_cli import OneLineParser, exit_now, log_to_stderr


def build_parser() -> argparse.ArgumentParser:
    """The rank's command line."""
    p = OneLineParser(
        prog="python -m real_runner.profiler.worker", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    p.add_argument("--spec", required=True, help="profiler job JSON (written by real_runner.profiler.run)")
    p.add_argument("--pin-core", type=int, default=None, help="pin this process to one CPU core")
    p.add_argument("--launched-at", type=float, default=None, help="wall time the launcher started this process")
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run one profiling rank; return the exit code."""
    main_at = time.time()
    args = build_parser().parse_args(argv)
    env = os.environ if env is None else env
    log_to_stderr(args.log_level, env)
    try:
        rank, world = int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))
        local_rank = int(env.get("LOCAL_RANK", "0"))
        job = ProfileJob.load(args.spec)
        if world != job.world_size or not 0 <= rank < world:
            raise ValueError(f"rank {rank} of {world} does not match the job's {job.world_size} devices")
        if args.pin_core is not None:
            os.sched_setaffinity(0, {args.pin_core})
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return run_rank(job, rank, world, local_rank, main_at, args.launched_at)
    except Exception as exc:  # noqa: BLE001 - any failure: cause on stderr, non-zero exit
        traceback.print_exc(file=sys.stderr)
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def run() -> NoReturn:
    """:func:`main` on the process's command line, then a fast exit with its code."""
    exit_now(main())


if __name__ == "__main__":
    run()
