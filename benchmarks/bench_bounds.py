"""Lower bounds beside Arena on the ``real-test`` suite: LB1, the LP relaxation, their ratios and the LP's cost.

Protocol. The 58 windows of ``arena_gym.harness.suites.get_suite("real-test")`` (every 50-job test
window of the five real traces on testbed-64, offered load 0.6 / 0.9 / 1.2 cycled). Arena runs
each window on a fresh simulator through ``arena_gym.harness.scoring.Evaluator`` (event-driven
decisions, ground truth = the suite's performance model, Arena's ``pruned`` overhead class:
``min(10 s x GPUs, 40 s)`` per (re)start). On the same jobs, cluster and truth,
``arena_gym.harness.bounds.workload_bounds`` computes LB1 (each job alone on its best configuration)
and the LP bound, charged the same overhead class, with ``LPConfig`` from the options (its
defaults unless given). Per window it prints LB1, LP and Arena's average JCT (hours), the
ratios LB1 / Arena and LP / Arena and the LP's size and solve time; then the ratios' mean and
range, the solve time's median and maximum (wall seconds of HiGHS, one thread, every round
of the column generation together) and the median and largest size of the full LP and of the
columns the column generation needed.
Everything is deterministic: the seed is the suite config's and recorded with the results.

Writes ``benchmarks/results/bounds/bench_bounds.json`` (or ``--out``): the config, the seed,
the code version, the machine, the per-window rows and the summary. Needs ``../shared/data``
beside the repository; without it, it says so and exits 0.

Usage: ``python benchmarks/bench_bounds.py [--growth G] [--first-slot F] [--max-slot M] [--limit N] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from arena_gym.harness.bounds import LPConfig, workload_bounds
from arena_gym.harness.out_dirs import machine
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.suites import get_suite
from arena_gym.outputs import code_version, write_json
from arena_gym.registry import make_policy

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
HOUR = 3600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = LPConfig()
    parser.add_argument("--growth", type=float, default=defaults.growth, help="LPConfig.growth")
    parser.add_argument("--first-slot", type=float, default=defaults.first_slot_frac, help="LPConfig.first_slot_frac")
    parser.add_argument("--max-slot", type=float, default=defaults.max_slot_frac, help="LPConfig.max_slot_frac")
    parser.add_argument("--job-window", type=float, default=defaults.job_window, help="LPConfig.job_window")
    parser.add_argument("--limit", type=int, default=0, help="first N windows only (0: all)")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/bounds/bench_bounds.json"))
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"skipped: needs the shared data folder {DATA}")
        return
    load_before = os.getloadavg()
    lp = LPConfig(args.growth, args.first_slot, args.max_slot, args.job_window)
    suite = get_suite("real-test", str(DATA))
    workloads = suite.workloads()[: args.limit or None]
    evaluator = Evaluator(suite.parts[0].config, workloads)
    policy = make_policy("arena", evaluator.config.seed)
    t0 = time.perf_counter()
    arena = evaluator.run(policy).set_index("workload")
    arena_s = time.perf_counter() - t0
    sim_config = evaluator.config.sim_config(str(policy.ap_search))
    print(
        f"suite={suite.name} windows={len(workloads)} overhead_class={sim_config.overhead_class} {lp} "
        f"(Arena: {arena_s:.0f} s)"
    )
    print(
        f"{'window':34s} {'LB1 h':>7s} {'LP h':>7s} {'Arena h':>8s} {'LB1/A':>6s} {'LP/A':>6s} {'cols':>7s} {'active':>6s} {'solve s':>7s}"
    )
    rows = []
    for w in workloads:
        scenario = evaluator.scenario(w.cluster)
        bounds = workload_bounds(w.jobs, scenario.cluster, scenario.truth, sim_config, lp)
        result = arena.loc[w.label]
        assert int(result["jobs_finished"]) == len(w.jobs), f"{w.label}: Arena left jobs unfinished"
        avg = float(result["avg_jct_s"])
        row = {
            "workload": w.label,
            "jobs": len(w.jobs),
            "lb1_avg_jct_s": bounds.lb1_avg_jct_s,
            "lp_avg_jct_s": bounds.lp_avg_jct_s,
            "arena_avg_jct_s": avg,
            "lb1_over_arena": bounds.lb1_avg_jct_s / avg,
            "lp_over_arena": bounds.lp_avg_jct_s / avg,
            "lp_slots": bounds.lp.n_slots,
            "lp_vars": bounds.lp.n_vars,
            "lp_rows": bounds.lp.n_rows,
            "lp_nonzeros": bounds.lp.n_nonzeros,
            "lp_active_vars": bounds.lp.n_active,
            "lp_solves": bounds.lp.solves,
            "lp_build_s": bounds.lp.build_s,
            "lp_solve_s": bounds.lp.solve_s,
        }
        rows.append(row)
        print(
            f"{w.label:34s} {bounds.lb1_avg_jct_s / HOUR:7.2f} {bounds.lp_avg_jct_s / HOUR:7.2f} {avg / HOUR:8.2f} "
            f"{row['lb1_over_arena']:6.3f} {row['lp_over_arena']:6.3f} {bounds.lp.n_vars:7d} {bounds.lp.n_active:6d} {bounds.lp_solve_s:7.2f}",
            flush=True,
        )
    summary = _summary(rows)
    print(
        f"LB1 / Arena: mean {summary['lb1_over_arena']['mean']:.3f} "
        f"[{summary['lb1_over_arena']['min']:.3f}, {summary['lb1_over_arena']['max']:.3f}]; "
        f"LP / Arena: mean {summary['lp_over_arena']['mean']:.3f} "
        f"[{summary['lp_over_arena']['min']:.3f}, {summary['lp_over_arena']['max']:.3f}]; "
        f"LP / LB1: mean {summary['lp_over_lb1']['mean']:.3f}"
    )
    print(
        f"LP solve: median {summary['lp_solve_s']['median']:.2f} s, max {summary['lp_solve_s']['max']:.2f} s "
        f"({summary['solves']} solves for {len(rows)} windows); full LP: median {summary['lp_vars']['median']:.0f} "
        f"columns x {summary['lp_rows']['median']:.0f} rows ({summary['lp_nonzeros']['median']:.0f} nonzeros), "
        f"largest {summary['lp_vars']['max']:.0f} x {summary['lp_rows']['max']:.0f}; columns generated: median "
        f"{summary['lp_active_vars']['median']:.0f}, largest {summary['lp_active_vars']['max']:.0f}"
    )
    path = write_json(
        Path(args.out),
        {
            "config": {"suite": suite.name, "windows": len(workloads), "lp": lp, "sim": sim_config, "policy": "arena"},
            "seed": evaluator.config.seed,
            "code_version": code_version(),
            "machine": machine(load_before),
            "arena_wall_s": arena_s,
            "windows": rows,
            "summary": summary,
        },
    )
    print(f"wrote {path}")


def _summary(rows: list[dict]) -> dict:
    """Mean, median, min and max of every figure over the windows, and the number of LP solves."""
    out: dict = {"solves": sum(r["lp_solves"] for r in rows)}
    figures = {k: [r[k] for r in rows] for k in rows[0] if k not in ("workload", "jobs", "lp_solves")}
    figures["lp_over_lb1"] = [r["lp_avg_jct_s"] / r["lb1_avg_jct_s"] for r in rows]
    for key, values in figures.items():
        out[key] = {
            "mean": float(np.mean(values)),
            "median": float(statistics.median(values)),
            "min": float(min(values)),
            "max": float(max(values)),
        }
    return out


if __name__ == "__main__":
    main()
