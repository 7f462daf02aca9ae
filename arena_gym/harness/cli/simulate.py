"""``arena-gym simulate``: one policy, one trace, one cluster."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from arena_gym.harness.cli.common import (
    add_replace_argument,
    add_run_arguments,
    cache_dir,
    out_dir,
    plot_modules,
    run_config,
    seed_int,
)
from arena_gym.harness.experiment import load_jobs, run
from arena_gym.harness.gpu_types import check_requested_types
from arena_gym.harness.names import policy_help
from arena_gym.harness.out_dirs import staged_dir
from arena_gym.harness.results import write_run
from arena_gym.harness.runlock import RunLock

#: The kind of results directory ``simulate`` writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "simulate"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the simulate arguments."""
    parser.add_argument("--policy", default="fcfs", help=f"{policy_help()} (default: fcfs)")
    add_run_arguments(parser)
    parser.add_argument("--seed", type=seed_int, default=0, help="random seed (0..2**32-1)")
    parser.add_argument(
        "--out",
        type=out_dir,
        default=Path("results/simulate"),
        help="results directory (written complete or not at all)",
    )
    add_replace_argument(parser, KIND)
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.set_defaults(handler=handle, preload=plot_modules)


def handle(args: argparse.Namespace) -> int:
    """Run and write the results directory; print the headline metrics."""
    config = run_config(args, args.policy, args.seed)
    with RunLock(args.out, "simulate"), staged_dir(args.out, kind=KIND, replace=args.replace) as staging:
        scenario = config.scenario(cache_dir(args))
        jobs = load_jobs(config.trace, scenario.cluster, scenario.truth, config.seed, config.allow_shadowing)
        unplaceable = check_requested_types(jobs, scenario.cluster, strict=args.strict, source=config.trace)
        result = run(config, progress=True, jobs=jobs, scenario=scenario)
        result = dataclasses.replace(result, metrics={**result.metrics, "jobs_unplaceable_type": float(unplaceable)})
        write_run(staging, result, plots=not args.no_plots, kind=KIND)
    m = result.metrics
    total, submitted = int(m.get("jobs_total", m["jobs_submitted"])), int(m["jobs_submitted"])
    unsubmitted = f" ({total - submitted} of {total} never arrived within the horizon)" if total > submitted else ""
    oracle = " (clairvoyant: saw the true job lengths)" if result.record.clairvoyant else ""
    print(
        f"{result.record.policy}{oracle}: {int(m['jobs_finished'])}/{submitted} jobs finished{unsubmitted}, "
        f"avg JCT {m['avg_jct_s'] / 3600:.2f} h, p95 {m['p95_jct_s'] / 3600:.2f} h, "
        f"avg queue {m['avg_queue_s'] / 3600:.2f} h, avg throughput {m['avg_throughput']:.1f} samples/s"
    )
    if unplaceable:
        print(f"{unplaceable} job(s) request a GPU type the cluster lacks (jobs_unplaceable_type)")
    print(f"results: {args.out}")
    return 0
