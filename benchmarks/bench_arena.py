"""Benchmark: the Arena heuristic against FCFS on the Philly trace (arena-1280 cluster).

For each policy and decision mode (``event``: on arrivals and completions; ``300s``: the same
plus periodic 300 s rounds; ``rounds``: only at 300 s round boundaries, as the artifact) it prints the wall time of the episode (decide + simulate, one core), decisions, ms per
decision, jobs finished, average JCT and average / peak cluster throughput. The issue's target:
Arena on the full trace (1,938 jobs, 600,000 s = 2,000 x 300 s horizon) in under 30 s on one
core; the artifact needs about 15 min for 400 rounds (docs/arena.md §9.3).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_arena.py [--perf estimator|measured:CSV] [--jobs N]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from arena_gym.cluster import resolve_cluster
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.registry import make_policy
from arena_gym.scenario import build_scenario
from arena_gym.sim import SimConfig
from traces import load_trace

#: (name, round period, decide on arrivals/completions) of each decision mode.
MODES = (("event", None, True), ("300s", 300.0, True), ("rounds", 300.0, False))
DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "arena" / "traces" / "philly.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(DEFAULT_TRACE), help="trace file (Arena CSV by default: Philly)")
    parser.add_argument("--cluster", default="arena-1280")
    parser.add_argument("--perf", default="estimator", help="performance model spec (estimator, measured:CSV, ...)")
    parser.add_argument("--horizon-s", type=float, default=600_000.0, help="seconds after the first submission")
    parser.add_argument("--jobs", type=int, default=0, help="use only the first N jobs (0: all)")
    parser.add_argument("--policies", default="arena,fcfs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    cluster = resolve_cluster(args.cluster)
    t0 = time.perf_counter()
    scenario = build_scenario(cluster, args.perf, seed=args.seed)
    jobs = load_trace(args.trace).jobs
    if args.jobs:
        jobs = jobs[: args.jobs]
    print(
        f"trace {args.trace}: {len(jobs)} jobs; cluster {cluster.name} ({cluster.total_gpus} GPUs); "
        f"perf {scenario.truth.name}; horizon {args.horizon_s:.0f} s; setup {time.perf_counter() - t0:.1f} s"
    )
    header = (
        f"{'policy':<8} {'mode':<6} {'wall_s':>7} {'decisions':>9} {'ms/dec':>7} {'finished':>8} "
        f"{'avg_jct_h':>9} {'avg_thr':>8} {'peak_thr':>8} {'reconf':>6} {'preempt':>7}"
    )
    print(header)
    results = {}
    for name in args.policies.split(","):
        for mode, round_s, on_events in MODES:
            policy = make_policy(name, args.seed)
            sim = SimConfig(round_s=round_s, event_decisions=on_events, horizon_s=jobs[0].submit_time + args.horizon_s)
            backend = replace(scenario, sim=sim).backend(policy.ap_search)
            start = time.perf_counter()
            record = run_episode(backend, policy, jobs)
            wall = time.perf_counter() - start
            m = compute_metrics(record)
            results[(name, mode)] = m
            print(
                f"{name:<8} {mode:<6} {wall:7.2f} {record.decisions:9d} {m['sched_ms_per_decision']:7.2f} "
                f"{m['jobs_finished']:8.0f} {m['avg_jct_s'] / 3600:9.2f} {m['avg_throughput']:8.0f} "
                f"{m['peak_throughput']:8.0f} {m['reconfigurations']:6.0f} {m['preemptions']:7.0f}"
            )
    if "arena" in args.policies.split(",") and "fcfs" in args.policies.split(","):
        for mode, _, _ in MODES:
            a, f = results[("arena", mode)], results[("fcfs", mode)]
            print(
                f"arena/fcfs ({mode}): finished x{a['jobs_finished'] / max(f['jobs_finished'], 1):.2f}, "
                f"avg throughput x{a['avg_throughput'] / max(f['avg_throughput'], 1e-9):.2f}, "
                f"avg JCT (unpadded) {100 * (1 - a['avg_jct_s'] / f['avg_jct_s']):+.1f}% reduction"
            )


if __name__ == "__main__":
    main()
