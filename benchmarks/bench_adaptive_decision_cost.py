"""Benchmark: the CPU cost of a decision of the adaptive Gittins policies against Arena's, on a whole trace.

The policies whose order infers the episode's work scale (``arena-gittins-32-f`` and the residual
agents built on it) pay for a posterior over that scale and a Gittins index per job at every
decision. This times them beside Arena on the artifact's Philly trace (1,938 jobs) on
``arena-1280``, the case where the queue and the running set are largest: the CPU seconds
(``time.process_time``) of every ``decide`` call, their mean and median per policy, and each
policy's mean as a multiple of Arena's from the same repetition. The goal: at most 2x Arena.

Protocol: ``--reps`` interleaved repetitions (default 3; the order alternates), every figure the
median over repetitions; one untimed warm-up run per policy first (it fills the estimator's
tables and builds the belief's tables, which a process builds once). The load average is
recorded before and after. Every repetition's job outcomes (each job's finish time) are hashed:
the hashes must agree across repetitions. ``OMP_NUM_THREADS=1``. Needs ``../shared/data``
(``--trace`` names another trace, e.g. ``synthetic:n_jobs=300,rate_per_h=200``).

Writes ``benchmarks/results/decision_cost/adaptive.json`` (``--out``): the config, the seed, the
code version, the machine and every figure.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_adaptive_decision_cost.py [--reps 3] [--trace T] [--policies P,...]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_decision_cost import Timed, alternate  # this folder is on the path of a script run from it

from arena_gym.harness.experiment import RunConfig, load_jobs
from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.loop import run_episode
from arena_gym.outputs import code_version, write_json
from arena_gym.registry import make_policy
from arena_gym.scenario import Scenario, build_scenario

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "decision_cost" / "adaptive.json"
POLICIES = (
    "arena",
    "arena-gittins-32-f",
    "residual:benchmarks/results/residual/train-tuned/residual.json",
)
SEED = 0
GOAL = 2.0


def run_timed(name: str, scenario: Scenario, jobs: tuple) -> tuple[list[float], str]:
    """One episode of policy ``name``: the CPU seconds of its decisions and the hash of its jobs' finish times."""
    timed = Timed(make_policy(name, SEED))
    record = run_episode(scenario.backend(timed.ap_search), timed, jobs)
    finishes = sorted((e.job_id, repr(e.time)) for e in record.events if e.kind.value == "finish")
    return timed.seconds, hashlib.sha256(repr(finishes).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (medians over them)")
    parser.add_argument("--trace", default=str(DATA / "arena" / "traces" / "philly.csv"), help="the trace")
    parser.add_argument("--cluster", default="arena-1280", help="the cluster")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated; the first is the reference")
    parser.add_argument("--out", type=Path, default=OUT, help="the results JSON")
    args = parser.parse_args()
    if args.reps < 1:
        sys.exit(f"bench_adaptive_decision_cost: --reps must be >= 1, got {args.reps}")
    trace = args.trace
    if "synthetic" not in trace and not Path(trace).is_file():
        sys.exit(f"bench_adaptive_decision_cost: no trace at {trace} (give --trace, e.g. a synthetic one)")
    logging.getLogger("arena_gym.sim").setLevel(logging.ERROR)
    policies = [p for p in args.policies.split(",") if p]
    sim = RunConfig(policy=policies[0]).sim_config()  # compare's default semantics
    scenario = build_scenario(args.cluster, "estimator", seed=SEED, sim=sim)
    jobs = load_jobs(trace, scenario.cluster, scenario.truth, SEED)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    for name in policies:  # warm-up
        run_timed(name, scenario, jobs)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in policies}
    for rep in range(args.reps):
        for name in alternate(policies, rep):
            seconds, outcome = run_timed(name, scenario, jobs)
            ms = 1000.0 * np.asarray(seconds)
            runs[name].append(
                {"decisions": len(ms), "mean_ms": ms.mean(), "median_ms": np.median(ms), "outcome": outcome}
            )
    reference = policies[0]
    rows = []
    for name in policies:
        reps = runs[name]
        ratios = [r["mean_ms"] / a["mean_ms"] for r, a in zip(reps, runs[reference])]
        rows.append(
            {
                "policy": name,
                "decisions": reps[0]["decisions"],
                "mean_ms": statistics.median(r["mean_ms"] for r in reps),
                "median_ms": statistics.median(r["median_ms"] for r in reps),
                "vs_reference": statistics.median(ratios),
                "outcomes_agree": len({r["outcome"] for r in reps}) == 1,
                "outcome": reps[0]["outcome"],
            }
        )
    label = os.path.relpath(trace, REPO) if Path(trace).is_file() else trace  # no machine paths in the results
    print(f"trace {label}: {len(jobs)} jobs; cluster {args.cluster}")
    print(f"{'policy':>40s} {'decisions':>9s} {'mean ms':>8s} {'median ms':>9s} {'x ' + reference:>12s} outcomes")
    for row in rows:
        agree = "same" if row["outcomes_agree"] else "DIFFER"
        goal = "" if row["policy"] == reference else ("  goal met" if row["vs_reference"] <= GOAL else "  goal missed")
        print(
            f"{row['policy'][-40:]:>40s} {row['decisions']:9d} {row['mean_ms']:8.3f} {row['median_ms']:9.3f} "
            f"{row['vs_reference']:12.2f} {agree}{goal}"
        )
    out = write_json(
        args.out,
        {
            "benchmark": "bench_adaptive_decision_cost",
            "config": {
                "reps": args.reps,
                "trace": label,
                "cluster": args.cluster,
                "policies": policies,
                "goal_vs_reference": GOAL,
            },
            "seed": SEED,
            "code_version": code_version(),
            "machine": machine(load_before),
            "loadavg_after": os.getloadavg(),
            "wall_s": time.perf_counter() - t0,
            "results": rows,
            "runs": runs,
        },
    )
    print(f"results: {shown_path(out, REPO)}")


if __name__ == "__main__":
    main()
