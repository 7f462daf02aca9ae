"""``arena-gym simulate``: one policy, one trace, one cluster."""

from __future__ import annotations

import argparse
from pathlib import Path

from arena_gym.cli.common import add_run_arguments, run_config
from arena_gym.experiment import run
from arena_gym.results import write_run


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the simulate arguments."""
    parser.add_argument("--policy", default="fcfs", help="registered policy name or sb3:PATH")
    add_run_arguments(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/simulate"), help="results directory")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Run and write the results directory; print the headline metrics."""
    result = run(run_config(args, args.policy, args.seed), progress=True)
    write_run(args.out, result)
    m = result.metrics
    print(f"{result.record.policy}: {int(m['jobs_finished'])}/{int(m['jobs_submitted'])} jobs finished, "
          f"avg JCT {m['avg_jct_s'] / 3600:.2f} h, p95 {m['p95_jct_s'] / 3600:.2f} h, "
          f"avg queue {m['avg_queue_s'] / 3600:.2f} h, avg throughput {m['avg_throughput']:.1f} samples/s")
    print(f"results: {args.out}")
    return 0
