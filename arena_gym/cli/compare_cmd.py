"""``arena-gym compare``: policies x traces x seeds on one cluster, into a leaderboard."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from arena_gym.cli.common import add_run_arguments, run_config
from arena_gym.compare import CompareConfig, compare
from arena_gym.results import to_markdown

DEFAULT_POLICIES = "fcfs,srtf,tiresias,gandiva,elasticflow-ls,gavel,sia,arena"


def _csv(text: str) -> tuple[str, ...]:
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in _csv(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers: {text!r}") from None


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the compare arguments."""
    parser.add_argument("--policies", type=_csv, default=_csv(DEFAULT_POLICIES), help="comma-separated policy names")
    add_run_arguments(parser)
    parser.add_argument("--traces", type=_csv, default=None, help="comma-separated traces (instead of --trace)")
    parser.add_argument("--seeds", type=_seeds, default=(0,), help="comma-separated seeds")
    parser.add_argument("--workers", type=int, default=1, help="parallel processes")
    parser.add_argument("--pad-jct", metavar="POLICY", default="max",
                        help="padded average JCT (the artifact's rule): pad to POLICY's finished count, or 'max' (default)")
    parser.add_argument("--wandb", action="store_true", help="log the leaderboard and plots to wandb")
    parser.add_argument("--out", type=Path, default=Path("results/compare"), help="results directory")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Run the grid, print the leaderboard, optionally log it to wandb."""
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    traces = args.traces or (args.trace,)
    base = run_config(args, args.policies[0], args.seeds[0])
    config = CompareConfig(args.policies, traces, args.seeds, base, args.workers, args.pad_jct)
    results, board = compare(config, args.out)
    print(to_markdown(board.drop(columns=["trace"]) if len(traces) == 1 else board))
    print(f"results: {args.out}")
    if args.wandb:
        # set wandb's mode in the environment before it is imported (stack.md: an init argument
        # alone still lets it probe a telemetry host at exit)
        os.environ.setdefault("WANDB_MODE", "offline")
        os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
        from arena_gym.tracking import log_comparison

        log_comparison(args.out, board, config, mode=os.environ["WANDB_MODE"])
    return 0
