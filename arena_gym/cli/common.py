"""Arguments shared by the simulation subcommands, and their conversion to a RunConfig."""

from __future__ import annotations

import argparse
import math

from arena_gym.experiment import RunConfig
from arena_gym.sim import OverheadModel

#: The built-in workload: a synthetic trace shaped like the artifact's real-testbed trace
#: (``arena/traces/testbed.csv``: 244 jobs in 5.7 h, i.e. ~42 jobs/h; the testbed model/GPU mix;
#: iterations log-normal with the file's log-mean 5.06 and log-std 0.89, 6..500 iterations).
DEFAULT_TRACE = ("synthetic:mix=testbed,n_jobs=240,rate_per_h=42,iter_log_mean=5.06,"
                 "iter_log_sigma=0.89,iter_min=6,iter_max=500")


def positive_float(text: str) -> float:
    """argparse type: a float > 0 (``inf`` allowed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """--trace, --cluster, --perf, --belief, --horizon, --round, --no-event-decisions, overhead knobs."""
    parser.add_argument("--trace", default=DEFAULT_TRACE,
                        help="trace file (canonical, Arena CSV, ITP CSV) or synthetic[:k=v,...]; default: a testbed-like synthetic trace")
    parser.add_argument("--cluster", default="testbed-64", help="preset (arena-1280, testbed-64, tiny) or JSON/TOML file")
    parser.add_argument("--perf", default="estimator", help="ground-truth performance model: estimator | measured:CSV")
    parser.add_argument("--belief", default=None, help="model policies plan with (default: the truth), e.g. noisy:0.2")
    parser.add_argument("--horizon", type=positive_float, default=math.inf, help="stop after this many seconds")
    parser.add_argument("--round", type=positive_float, default=None, help="also decide every ROUND seconds (Arena: 300)")
    parser.add_argument("--no-event-decisions", action="store_true", help="decide only on rounds (needs --round)")
    parser.add_argument("--overhead-scale", type=float, default=1.0, help="multiply every reconfiguration overhead")


def run_config(args: argparse.Namespace, policy: str, seed: int) -> RunConfig:
    """The RunConfig the parsed arguments describe."""
    if args.overhead_scale < 0:
        raise ValueError(f"--overhead-scale must be >= 0, got {args.overhead_scale}")
    base = OverheadModel()
    s = args.overhead_scale
    overhead = OverheadModel(base.pruned_per_gpu_s * s, base.pruned_cap_s * s, base.full_per_gpu_s * s, base.full_cap_s * s)
    return RunConfig(policy=policy, trace=args.trace, cluster=args.cluster, seed=seed, perf=args.perf,
                     belief=args.belief, horizon_s=args.horizon, round_s=args.round,
                     event_decisions=not args.no_event_decisions, overhead=overhead)
