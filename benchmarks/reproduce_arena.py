"""Reproduce the artifact's large-scale comparison (docs/arena.md §8.7) and its siblings.

For each scenario, runs Arena and the baselines on one simulator with the artifact's padding
rule (each baseline's finished JCTs padded with the worst JCT seen, up to Arena's finished
count) and prints, per baseline: the padded average-JCT reduction of Arena, the jobs-finished
ratio and the average / peak throughput ratios, beside the artifact's figures where it has
them. Decisions are taken every 300 s only (the artifact's rounds) unless ``--event-driven``.
Writes ``benchmarks/results/reproduction/<scenario>[-event].csv`` (the leaderboards). Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from arena_gym.compare import CompareConfig, compare
from arena_gym.experiment import RunConfig

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "reproduction"
BASELINES = ("fcfs", "elasticflow-ls", "gavel", "sia")
#: The artifact README's figures for Philly on 1,280 GPUs, 2,000 rounds (reduction of avg JCT).
ARTIFACT_PHILLY = {"fcfs": 0.813, "elasticflow-ls": 0.805, "gavel": 0.766, "sia": 0.752}

SCENARIOS = {
    "philly": ("arena/traces/philly.csv?deadline_scale=5", "arena-1280", 600_000.0),
    "pai": ("arena/traces/pai.csv?deadline_scale=5", "arena-1280", 150_000.0),
    "testbed": ("arena/traces/testbed.csv?iteration_divisor=1", "testbed-64", math.inf),
    "itp-cluster10": ("itp/cluster10.csv?seed=0", "arena-1280", math.inf),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS))
    parser.add_argument("--perf", default="estimator")
    parser.add_argument("--event-driven", action="store_true", help="decide on every event instead of 300 s rounds")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"needs the shared data folder {DATA}")
    OUT.mkdir(parents=True, exist_ok=True)
    policies = ("arena", *BASELINES)
    for name in args.scenarios.split(","):
        trace, cluster, horizon = SCENARIOS[name]
        base = RunConfig(policy="arena", trace=str(DATA / trace), cluster=cluster, perf=args.perf, horizon_s=horizon,
                         round_s=None if args.event_driven else 300.0, event_decisions=args.event_driven)
        t0 = time.perf_counter()
        results, board = compare(CompareConfig(policies, (base.trace,), (0,), base, args.workers, "arena"),
                                 REPO / "results" / "reproduction" / f"{name}{'-event' if args.event_driven else ''}",
                                 progress=False)
        portable = board.assign(trace=board["trace"].str.replace(str(DATA), "../shared/data", regex=False))
        portable.to_csv(OUT / f"{name}{'-event' if args.event_driven else ''}.csv", index=False)
        row = {r.policy: r for r in board.itertuples()}
        a = row["arena"]
        print(f"\n== {name}: {cluster}, horizon {horizon:g} s, {'event-driven' if args.event_driven else '300 s rounds'}, "
              f"{time.perf_counter() - t0:.0f} s; arena: {a.jobs_finished:.0f}/{a.jobs_submitted:.0f} finished, "
              f"avg JCT {a.avg_jct_s / 3600:.2f} h, throughput avg {a.avg_throughput:,.0f} / peak {a.peak_throughput:,.0f}")
        print(f"{'baseline':15s} {'JCT reduction':>14s} {'artifact':>9s} {'jobs x':>7s} {'avg thr x':>9s} {'peak thr x':>10s} {'finished':>8s}")
        for b in BASELINES:
            r = row[b]
            reduction = (r.padded_avg_jct_s - a.padded_avg_jct_s) / r.padded_avg_jct_s
            paper = ARTIFACT_PHILLY.get(b) if name == "philly" else None
            print(f"{b:15s} {100 * reduction:13.1f}% {'' if paper is None else f'{100 * paper:.1f}%':>9s} "
                  f"{a.jobs_finished / max(r.jobs_finished, 1):7.2f} {a.avg_throughput / max(r.avg_throughput, 1e-9):9.2f} "
                  f"{a.peak_throughput / max(r.peak_throughput, 1e-9):10.2f} {r.jobs_finished:8.0f}")
    print("\nartifact (philly): up to 1.45x jobs, 1.55x avg / 1.58x peak throughput")


if __name__ == "__main__":
    main()
