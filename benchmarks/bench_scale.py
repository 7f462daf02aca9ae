"""Benchmark: how the simulator scales with the number of jobs (cost per event at 1k / 10k / 100k jobs).

A seeded synthetic trace (the Philly job mix, Poisson arrivals at ``--rate`` jobs/h; 200 by
default, which keeps ``arena-1280`` overloaded so that the queue grows with the trace: the
setting in which every snapshot used to rebuild a view of every queued job) runs under each
policy. Per run it prints the jobs, log events and decisions, the episode's wall and CPU seconds
(``run_episode``: decide + simulate), the metrics' CPU seconds, the CPU microseconds per event,
and that cost relative to the smallest size's: linear scaling keeps it flat (goal: within 2x).
An untimed first run of the smallest size per policy fills the estimator's lazy tables, so every
size is measured warm. Trace generation is timed apart. Goals for 100k jobs: FCFS under 60 s,
Arena under 5 minutes.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_scale.py [--sizes 1000,10000,100000] [--policies fcfs,arena]
        [--rate 200] [--cluster arena-1280] [--out results.csv]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from arena_gym.harness.experiment import load_jobs
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.outputs import code_version
from arena_gym.registry import make_policy
from arena_gym.scenario import Scenario, build_scenario

COLUMNS = (
    "policy",
    "jobs",
    "rate_per_h",
    "cluster",
    "seed",
    "events",
    "decisions",
    "gen_s",
    "sim_wall_s",
    "sim_cpu_s",
    "metrics_cpu_s",
    "us_per_event",
    "vs_smallest",
    "jobs_finished",
    "avg_queue_h",
    "code_version",
)


def run_one(policy_name: str, jobs: tuple, scenario: Scenario, seed: int) -> dict[str, float]:
    """One episode; its timings and counts."""
    policy = make_policy(policy_name, seed)
    backend = scenario.backend(policy.ap_search)
    w0, c0 = time.perf_counter(), time.process_time()
    record = run_episode(backend, policy, jobs)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    c1 = time.process_time()
    metrics = compute_metrics(record)
    metrics_cpu = time.process_time() - c1
    return {
        "events": len(record.events),
        "decisions": record.decisions,
        "sim_wall_s": wall,
        "sim_cpu_s": cpu,
        "metrics_cpu_s": metrics_cpu,
        "us_per_event": 1e6 * cpu / max(1, len(record.events)),
        "jobs_finished": metrics["jobs_finished"],
        "avg_queue_h": metrics["avg_queue_s"] / 3600.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated job counts")
    parser.add_argument("--policies", default="fcfs,arena")
    parser.add_argument("--rate", type=float, default=200.0, help="arrivals per hour")
    parser.add_argument("--cluster", default="arena-1280")
    parser.add_argument("--perf", default="estimator")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the rows to this CSV")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = args.policies.split(",")
    scenario = build_scenario(args.cluster, args.perf, seed=args.seed)
    cluster, perf = scenario.cluster, scenario.truth
    version = code_version()
    print(
        f"cluster {cluster.name} ({cluster.total_gpus} GPUs), perf {perf.name}, {args.rate:g} jobs/h, seed {args.seed}, "
        f"code {version}"
    )
    print(
        f"{'policy':<8} {'jobs':>7} {'events':>8} {'decisions':>9} {'gen_s':>6} {'wall_s':>8} {'cpu_s':>8} "
        f"{'metrics_s':>9} {'us/event':>8} {'vs_first':>8} {'avg_queue_h':>11}",
        flush=True,
    )
    rows = []
    warm = load_jobs(f"synthetic:n_jobs={min(sizes)},rate_per_h={args.rate:g}", cluster, perf, args.seed)
    for name in policies:
        run_one(name, warm, scenario, args.seed)
    for size in sizes:
        g0 = time.perf_counter()
        jobs = load_jobs(f"synthetic:n_jobs={size},rate_per_h={args.rate:g}", cluster, perf, args.seed)
        gen = time.perf_counter() - g0
        for name in policies:
            row = {
                "policy": name,
                "jobs": size,
                "rate_per_h": args.rate,
                "cluster": cluster.name,
                "seed": args.seed,
                "gen_s": gen,
                "code_version": version,
                **run_one(name, jobs, scenario, args.seed),
            }
            first = next((r for r in rows if r["policy"] == name), row)
            row["vs_smallest"] = row["us_per_event"] / first["us_per_event"]
            rows.append(row)
            print(
                f"{name:<8} {size:>7} {row['events']:>8} {row['decisions']:>9} {gen:>6.1f} {row['sim_wall_s']:>8.1f} "
                f"{row['sim_cpu_s']:>8.1f} {row['metrics_cpu_s']:>9.2f} {row['us_per_event']:>8.0f} "
                f"{row['vs_smallest']:>7.2f}x {row['avg_queue_h']:>11.0f}",
                flush=True,
            )
    if args.out is not None:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        print(f"rows: {args.out}")


if __name__ == "__main__":
    main()
