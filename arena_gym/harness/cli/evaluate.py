"""``arena-gym evaluate``: the evaluation protocol from the command line (the work is in :mod:`arena_gym.harness.evaluate`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from agents.rl.config import WANDB_MODES
from arena_gym import REAL_DATA_DIR
from arena_gym.harness.cli.common import (
    add_replace_argument,
    add_scenario_arguments,
    bounded_int,
    out_dir,
    scenario_options,
    seed_int,
    text_type,
)
from arena_gym.harness.names import policy_help
from arena_gym.harness.runlock import RunLock
from arena_gym.harness.suites import SUITE_CHOICES


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``evaluate`` arguments and handler."""
    parser.add_argument(
        "--policies",
        type=text_type(tuple[str, ...]),
        required=True,
        help="comma-separated policies, LABEL=SPEC to name one (e.g. arena,srtf,agent=sb3:run/best_model.zip); "
        f"each {policy_help()}",
    )
    parser.add_argument(
        "--suite",
        default="synthetic",
        choices=SUITE_CHOICES,
        help="workload suite (model: the test split of the env the sb3 policies were trained on; frozen-test: "
        "report only, every run is recorded in the repository's benchmarks/results/frozen-test/LEDGER.csv)",
    )
    parser.add_argument(
        "--trace",
        action="append",
        default=[],
        metavar="SPEC",
        help="with --suite custom: a trace file or generator spec (repeatable)",
    )
    parser.add_argument("--cluster", default="testbed-64", help="with --suite custom: the cluster")
    parser.add_argument(
        "--split",
        default="test",
        choices=("all", "train", "validation", "test"),
        help="with --suite custom: which time range of each trace",
    )
    parser.add_argument(
        "--window-jobs",
        type=text_type(int),
        default=50,
        help="with --suite custom: jobs per window (0 = the whole split)",
    )
    parser.add_argument(
        "--loads",
        type=text_type(tuple[float, ...], above=0, finite=True),
        default=(0.9,),
        help="with --suite custom: comma-separated loads, cycled over windows",
    )
    parser.add_argument(
        "--load-basis",
        choices=("offered", "factor"),
        default="offered",
        help="with --suite custom: --loads are offered loads, or factors of the recorded arrival rate "
        "(factor 1: the trace as recorded)",
    )
    parser.add_argument("--data-dir", default=REAL_DATA_DIR, help="folder of the real traces")
    parser.add_argument("--reference", default="arena", help="policy the others are compared with")
    parser.add_argument("--metric", default="padded_jct_s", help="per-workload metric of the statistics")
    parser.add_argument("--limit", type=text_type(int), default=0, help="at most N workloads, evenly spaced (0 = all)")
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the policies and the bootstrap (0..2**32-1)")
    parser.add_argument("--resamples", type=text_type(int), default=10_000, help="bootstrap resamples")
    parser.add_argument(
        "--out", type=out_dir, default=Path("results/evaluate"), help="results directory (checked writable first)"
    )
    add_replace_argument(parser, "evaluate")
    parser.add_argument("--wandb", action="store_true", help="log the tables and plots to wandb (offline)")
    parser.add_argument("--wandb-mode", choices=WANDB_MODES, default=None, help="wandb mode")
    parser.add_argument(
        "--workers",
        type=bounded_int(1, 256),
        default=1,
        help="local worker processes, one (workload, policy) at a time",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run each (workload, policy) as a Ray task on the cluster at ADDRESS (HOST:PORT, or 'auto'; the ray extra)",
    )
    parser.add_argument(
        "--no-bounds", action="store_true", help="skip the lower bounds per workload (LB1, LP relaxation)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_scenario_arguments(parser, "the suite's")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Build the EvalConfig, run the protocol, print the summary."""
    from arena_gym.harness.cli.train import set_wandb_env

    mode = args.wandb_mode or ("offline" if args.wandb else "disabled")
    set_wandb_env(mode)
    if not getattr(args, "verbose", False):  # loading each trace file is logged once; keep that out of the output
        for quiet in ("traces", "envs.workload"):
            logging.getLogger(quiet).setLevel(logging.WARNING)
    from arena_gym.harness.evaluate import EvalConfig, evaluate

    config = EvalConfig(
        policies=args.policies,
        suite=args.suite,
        out_dir=str(args.out),
        data_dir=args.data_dir,
        reference=args.reference,
        metric=args.metric,
        seed=args.seed,
        resamples=args.resamples,
        limit=args.limit,
        traces=tuple(args.trace),
        cluster=args.cluster,
        split=args.split,
        window_jobs=args.window_jobs,
        loads=args.loads,
        load_basis=args.load_basis,
        wandb_mode=mode,
        progress=not args.no_progress,
        workers=args.workers,
        bounds=not args.no_bounds,
        ray=args.ray,
        scenario=scenario_options(args),
    )
    with RunLock(args.out, "evaluate"):
        result = evaluate(config, replace=args.replace)
    print((result.out_dir / "summary.md").read_text(), end="")
    print(f"results: {result.out_dir} ({result.wall_s:.0f} s)")
    return 0
