"""``arena-gym compare``: policies x traces x seeds on one cluster, into a leaderboard."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from arena_gym.harness.cli.common import (
    DEFAULT_TRACE,
    MAX_SEED,
    add_replace_argument,
    add_run_arguments,
    bounded_int,
    cache_dir,
    out_dir,
    plot_modules,
    run_config,
    text_type,
)
from arena_gym.harness.compare import KIND, CompareConfig, compare
from arena_gym.harness.names import policy_help
from arena_gym.harness.results import to_markdown
from arena_gym.harness.runlock import RunLock

#: The policies compared when ``--policies`` is not given (``make run``'s list: the Makefile has none of its own).
DEFAULT_POLICIES: tuple[str, ...] = ("fcfs", "srtf", "tiresias", "gandiva", "elasticflow-ls", "gavel", "sia", "arena")
#: An item that continues the previous trace spec's options (``rate_per_h=5`` in ``synthetic:n_jobs=9,rate_per_h=5``).
_OPTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[^:/?]*")


def trace_list(text: str) -> list[str]:
    """argparse type: one or more TRACE specs separated by commas.

    A comma starts a new spec unless the next item is a ``key=value`` option of the spec before
    it, so ``synthetic:n_jobs=50,rate_per_h=5,philly.csv`` is two traces. ``--traces`` may also
    be given several times, one spec each.
    """
    specs: list[str] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if specs and _OPTION.fullmatch(item) and not os.path.exists(item):
            specs[-1] += "," + item
        else:
            specs.append(item)
    if not specs:
        raise argparse.ArgumentTypeError("expected one or more trace specs")
    return specs


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the compare arguments."""
    parser.add_argument(
        "--policies",
        type=text_type(tuple[str, ...]),
        default=DEFAULT_POLICIES,
        help=f"comma-separated policies (default: {','.join(DEFAULT_POLICIES)}); each {policy_help()}",
    )
    add_run_arguments(parser)
    parser.set_defaults(trace=None)
    parser.add_argument(
        "--traces",
        type=trace_list,
        action="extend",
        default=None,
        help="traces to compare on (instead of --trace): comma-separated, or the option given "
        "several times (e.g. --traces synthetic:n_jobs=50,rate_per_h=5 --traces philly.csv)",
    )
    parser.add_argument(
        "--seeds", type=text_type(tuple[int, ...], 0, MAX_SEED), default=(0,), help="comma-separated seeds"
    )
    parser.add_argument("--workers", type=bounded_int(1, 256), default=1, help="parallel local processes")
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run the runs as Ray tasks on the cluster at ADDRESS (HOST:PORT, or 'auto'; the ray extra)",
    )
    parser.add_argument(
        "--pad-jct",
        metavar="POLICY",
        default="max",
        help="padded average JCT (the artifact's rule): pad to POLICY's finished count, or 'max' (default)",
    )
    parser.add_argument(
        "--reference",
        metavar="POLICY",
        default=None,
        help="also compare every policy with POLICY, paired over the traces x seeds "
        "(wins, mean ratio, bootstrap intervals, Wilcoxon and t-test: paired.csv, as evaluate does)",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--wandb", action="store_true", help="log the leaderboard and plots to wandb")
    parser.add_argument(
        "--out",
        type=out_dir,
        default=Path("results/compare"),
        help="results directory (written complete or not at all)",
    )
    add_replace_argument(parser, KIND)
    parser.set_defaults(handler=handle, preload=plot_modules)


def handle(args: argparse.Namespace) -> int:
    """Run the grid, print the leaderboard, optionally log it to wandb."""
    if args.trace is not None and args.traces:
        raise ValueError("give either --trace or --traces, not both (--traces accepts several traces)")
    traces = tuple(args.traces or (args.trace or DEFAULT_TRACE,))
    base = run_config(args, args.policies[0], args.seeds[0])
    config = CompareConfig(
        args.policies, traces, args.seeds, base, args.workers, args.pad_jct, args.strict, args.ray, args.reference
    )
    with RunLock(args.out, "compare"):
        results, board = compare(
            config, args.out, plots=not args.no_plots, cache_dir=cache_dir(args), replace=args.replace
        )
        print(to_markdown(board.drop(columns=["trace"]) if len(traces) == 1 else board))
        if args.reference is not None:
            print(f"paired against {args.reference}:")
            print((args.out / "paired.md").read_text(), end="")
        print(f"results: {args.out}")
        if args.wandb:
            # set wandb's mode in the environment before it is imported (stack.md: an init argument
            # alone still lets it probe a telemetry host at exit)
            os.environ.setdefault("WANDB_MODE", "offline")
            os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
            from arena_gym.harness.tracking import log_comparison

            log_comparison(args.out, board, config, mode=os.environ["WANDB_MODE"])
    return 0
