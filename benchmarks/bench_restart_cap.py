"""Benchmark: what capping Arena's pending restart trial buys, CPU against JCT (a behaviour change).

The exact speed-ups leave Arena's decisions as they were (docs/benchmarks.md#decision-cost).
The one lever left is the restart trial's size: after every departure Arena tries up to
``ArenaConfig.max_restart_trials`` fits (100), one per waiting (model, batch), and nearly all
fail in an overloaded cluster. A smaller cap changes decisions; this measures by how much each
cap cuts the CPU time and what it costs in JCT, so the trade can be judged before anyone takes it.

Two parts, every cap beside the default (100, Arena itself):

1. **Overloaded**: ``--jobs`` synthetic jobs (default 6,000) at 200/h on ``arena-1280``, seed 0
   (the case whose profile the decision-cost docs give): CPU seconds of the episode
   (``time.process_time`` in this process, warm), average and p95 JCT, jobs finished.
2. **The evaluation protocol**: the ``real-test`` suite (every 50-job test window of the five
   real traces on ``testbed-64``; needs ``../shared/data``, else the ``synthetic`` suite), each
   cap against the default: mean average JCT, its paired ratio and wins
   (:func:`arena_gym.harness.stats.summary_table`), and the CPU seconds of all windows.

Protocol: ``--reps`` interleaved repetitions (default 3; the caps' order alternates), CPU
figures the median over repetitions; JCTs are deterministic (checked equal across
repetitions). One untimed warm-up episode per part fills the estimator's lazy tables. The load
average is recorded before and after each part. ``OMP_NUM_THREADS=1``.

Writes ``benchmarks/results/decision_cost/restart_cap.json`` (``--out``): config, seed, code
version, machine and every figure.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_restart_cap.py [--reps 3] [--caps 100,30,10,3,1] [--jobs 6000]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from bench_decision_cost import alternate  # this folder, on the path when run as a script

from agents.arena import ArenaConfig, ArenaPolicy
from arena_gym.harness.experiment import RunConfig, load_jobs, play
from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.stats import summary_table
from arena_gym.harness.suites import get_suite
from arena_gym.outputs import code_version, write_json
from arena_gym.scenario import build_scenario

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "decision_cost" / "restart_cap.json"
SEED = 0
DEFAULT_CAP = ArenaConfig().max_restart_trials


def capped(cap: int) -> ArenaPolicy:
    """Arena with at most ``cap`` fits per pending restart trial (the default cap is Arena itself)."""
    return ArenaPolicy(name=f"arena-cap{cap}", max_restart_trials=cap)


def part_overloaded(caps: Sequence[int], reps: int, n_jobs: int) -> list[dict[str, Any]]:
    """Part 1: per cap, median CPU seconds of the episode and its (deterministic) JCTs."""
    scenario = build_scenario("arena-1280", "estimator", seed=SEED, sim=RunConfig(policy="arena").sim_config())
    jobs = load_jobs(f"synthetic:n_jobs={n_jobs},rate_per_h=200", scenario.cluster, scenario.truth, SEED)
    warm = jobs[: max(1, n_jobs // 10)]
    play(capped(DEFAULT_CAP), warm, scenario.backend(capped(DEFAULT_CAP).ap_search))
    cpu: dict[int, list[float]] = {cap: [] for cap in caps}
    outcome: dict[int, dict[str, float]] = {}
    for rep in range(reps):
        for cap in alternate(caps, rep):
            t0 = time.process_time()
            episode = play(capped(cap), jobs, scenario.backend(capped(cap).ap_search))
            cpu[cap].append(time.process_time() - t0)
            m = episode.metrics
            found = {k: float(m[k]) for k in ("avg_jct_s", "p95_jct_s", "jobs_finished", "reconfigurations")}
            if outcome.setdefault(cap, found) != found:
                raise SystemExit(f"cap {cap}: the episode's outcome differs between repetitions: {found}")
    base = outcome[DEFAULT_CAP]
    return [
        {
            "cap": cap,
            "cpu_s": statistics.median(cpu[cap]),
            "cpu_s_runs": cpu[cap],
            "cpu_vs_default": statistics.median(cpu[cap]) / statistics.median(cpu[DEFAULT_CAP]),
            **outcome[cap],
            "avg_jct_vs_default": outcome[cap]["avg_jct_s"] / base["avg_jct_s"],
        }
        for cap in caps
    ]


def part_windows(caps: Sequence[int], reps: int, data: Path) -> dict[str, Any]:
    """Part 2: per cap, the suite's mean average JCT, paired against the default cap, and its CPU seconds."""
    suite = get_suite("real-test", str(data)) if data.is_dir() else get_suite("synthetic")
    workloads = suite.workloads()
    evaluator = Evaluator(suite.parts[0].config, workloads)
    evaluator.run(capped(DEFAULT_CAP))  # warm-up
    cpu: dict[int, list[float]] = {cap: [] for cap in caps}
    tables: dict[int, pd.DataFrame] = {}
    for rep in range(reps):
        for cap in alternate(caps, rep):
            t0 = time.process_time()
            table = evaluator.run(capped(cap))
            cpu[cap].append(time.process_time() - t0)
            if cap in tables and not tables[cap]["avg_jct_s"].equals(table["avg_jct_s"]):
                raise SystemExit(f"cap {cap}: the suite's JCTs differ between repetitions")
            tables[cap] = table
    table = pd.concat([tables[cap] for cap in caps], ignore_index=True)
    paired = summary_table(table, "avg_jct_s", capped(DEFAULT_CAP).name).set_index("policy")
    rows = []
    for cap in caps:
        name = capped(cap).name
        one = table[table["policy"] == name]
        rows.append(
            {
                "cap": cap,
                "cpu_s": statistics.median(cpu[cap]),
                "cpu_s_runs": cpu[cap],
                "mean_avg_jct_s": float(one["avg_jct_s"].mean()),
                "jobs_finished": int(one["jobs_finished"].sum()),
                "jobs_total": int(one["jobs_total"].sum()),
                **{
                    k: paired.loc[name, k].item()
                    for k in ("mean_ratio", "wins", "ties", "losses", "mean_diff", "diff_ci_low", "diff_ci_high")
                },
            }
        )
    return {"suite": suite.name, "workloads": len(workloads), "caps": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (CPU medians over them)")
    parser.add_argument("--caps", default="100,30,10,3,1", help="comma-separated restart-trial caps (with 100)")
    parser.add_argument("--jobs", type=int, default=6000, help="jobs of part 1's overloaded trace")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder (part 2's real-test suite)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    try:
        caps = [int(c) for c in args.caps.split(",")]
    except ValueError:
        parser.error(f"--caps {args.caps!r}: expected comma-separated integers")
    if any(c < 1 for c in caps) or len(set(caps)) != len(caps) or DEFAULT_CAP not in caps:
        parser.error(f"--caps {args.caps!r}: distinct integers >= 1, including the default {DEFAULT_CAP}")
    if args.reps < 1 or args.jobs < 10:
        parser.error("--reps must be >= 1 and --jobs >= 10")
    logging.getLogger("arena_gym.sim").setLevel(logging.ERROR)
    load_before = os.getloadavg()
    loads: dict[str, Any] = {"overloaded_before": load_before}
    t0 = time.perf_counter()
    overloaded = part_overloaded(caps, args.reps, args.jobs)
    loads["overloaded_after"] = os.getloadavg()
    print(f"\n== {args.jobs} jobs at 200/h on arena-1280 (CPU s: median of {args.reps})")
    for row in overloaded:
        print(
            f"cap {row['cap']:>4d}: CPU {row['cpu_s']:7.2f} s ({row['cpu_vs_default']:.2f}x), "
            f"avg JCT {row['avg_jct_s'] / 3600:8.2f} h ({row['avg_jct_vs_default']:.4f}x), "
            f"p95 {row['p95_jct_s'] / 3600:8.2f} h, finished {row['jobs_finished']:.0f}"
        )
    windows = part_windows(caps, args.reps, args.data)
    loads["windows_after"] = os.getloadavg()
    print(f"\n== {windows['suite']} suite, {windows['workloads']} windows (paired against cap {DEFAULT_CAP})")
    for row in windows["caps"]:
        print(
            f"cap {row['cap']:>4d}: CPU {row['cpu_s']:6.2f} s, mean avg JCT {row['mean_avg_jct_s'] / 3600:6.3f} h, "
            f"ratio {row['mean_ratio']:.4f}, diff {row['mean_diff']:+.0f} s [{row['diff_ci_low']:+.0f}, "
            f"{row['diff_ci_high']:+.0f}], "
            f"wins/ties/losses {row['wins']}/{row['ties']}/{row['losses']}"
        )
    out = write_json(
        args.out,
        {
            "benchmark": "bench_restart_cap",
            "config": {
                "reps": args.reps,
                "caps": caps,
                "jobs": args.jobs,
                "rate_per_h": 200,
                "default_cap": DEFAULT_CAP,
            },
            "seed": SEED,
            "code_version": code_version(),
            "machine": machine(load_before),
            "loadavg": loads,
            "wall_s": time.perf_counter() - t0,
            "results": {"overloaded": overloaded, "windows": windows},
        },
    )
    print(f"results: {shown_path(out, REPO)}")


if __name__ == "__main__":
    main()
