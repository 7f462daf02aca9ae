"""Benchmark: what search costs. SimBackend.fork at two scales, and the lookahead's decision times on real windows.

Protocol.

- Fork: a seeded synthetic workload run under FCFS to a decision point, then ``fork()`` timed
  ``--reps`` times (median, p95): a 50-job window on ``testbed-64`` (goal: median <= 1 ms) and an
  overloaded ``arena-1280`` trace with at least 1,000 unfinished jobs (goal: median <= 20 ms).
- Decisions: ``--policy`` (``lookahead`` by default) on ``--windows`` evenly spaced windows of
  ``--suite`` (``real-test``; needs ``../shared/data``), each decision timed (wall clock) through
  the loop, beside Arena's on the same windows; it prints the median and p95 milliseconds per
  decision, the share of decisions where the proposals differed (a search), how often the base
  decision was replaced, the wall time per window and each window's average-JCT ratio to Arena. The whole-suite cost is what ``arena-gym evaluate`` prints for the suite.

The machine's load (os.getloadavg) is recorded before and after; results go to
``benchmarks/results/search/`` with the config, seed and code version.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_search.py [--windows 6] [--policy lookahead] [--reps 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from arena_gym.core.information import information_set
from arena_gym.harness import load_jobs
from arena_gym.harness.out_dirs import machine
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.suites import get_suite
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.outputs import code_version, write_json
from arena_gym.registry import make_policy
from arena_gym.scenario import build_scenario
from arena_gym.types import Decision, Snapshot

OUT = Path(__file__).resolve().parent / "results" / "search"


def fork_times(cluster_name: str, trace: str, steps: int, reps: int) -> dict:
    """Median and p95 milliseconds of ``fork()`` after ``steps`` FCFS decisions, and the state's size."""
    scenario = build_scenario(cluster_name)
    jobs = load_jobs(trace, scenario.cluster, scenario.truth, seed=1)
    policy = make_policy("fcfs")
    policy.reset()
    shown = information_set(policy)
    backend = scenario.backend()  # the default overhead class (pruned), not FCFS's own
    snapshot = backend.reset(jobs)
    for _ in range(steps):
        if snapshot is None:
            break
        backend.apply(policy.decide(shown(snapshot)))
        snapshot = backend.advance()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        backend.fork()
        times.append((time.perf_counter() - t0) * 1e3)
    return {
        "cluster": cluster_name,
        "trace": trace,
        "unfinished": backend.state.unfinished,
        "queued": backend.state.queued,
        "events": backend.state.n_events,
        "median_ms": statistics.median(times),
        "p95_ms": float(np.percentile(times, 95)),
    }


class Timed:
    """Wraps a policy and records the wall time of every decision (its information set forwarded)."""

    def __init__(self, policy) -> None:
        self.policy, self.name, self.ap_search = policy, policy.name, policy.ap_search
        self.clairvoyant = bool(getattr(policy, "clairvoyant", False))
        self.times: list[float] = []

    def reset(self) -> None:
        self.policy.reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        t0 = time.perf_counter()
        decision = self.policy.decide(snapshot)
        self.times.append((time.perf_counter() - t0) * 1e3)
        return decision


def decision_times(suite_name: str, windows: int, name: str) -> dict:
    """Per-decision milliseconds of ``name`` and of Arena on ``windows`` evenly spaced windows of the suite."""
    suite = get_suite(suite_name)
    workloads = suite.workloads()
    picked = [workloads[int(i)] for i in np.linspace(0, len(workloads) - 1, windows).round()]
    evaluator = Evaluator(suite.parts[0].config, picked)
    out = {}
    for label in ("arena", name):
        timed = Timed(make_policy(label))
        walls, jcts, searched, changed, decisions = [], [], 0, 0, 0
        for workload in picked:
            t0 = time.perf_counter()
            record = run_episode(evaluator.backend(workload, timed.ap_search), timed, workload.jobs)
            walls.append(time.perf_counter() - t0)
            jcts.append(compute_metrics(record)["avg_jct_s"])
            searched += getattr(timed.policy, "searched", 0)
            changed += getattr(timed.policy, "changed", 0)
            decisions += record.decisions
        out[label] = {
            "decisions": decisions,
            "median_ms": statistics.median(timed.times),
            "p95_ms": float(np.percentile(timed.times, 95)),
            "searched_share": searched / decisions if decisions else 0.0,
            "changed": changed,
            "wall_s_per_window": statistics.mean(walls),
            "wall_s": walls,
            "avg_jct_s": jcts,
            "windows": [w.label for w in picked],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--policy", default="lookahead")
    parser.add_argument("--suite", default="real-test")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--name", default=None, help="the results file's name (default: the policy spec)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    forks = [
        fork_times("testbed-64", "synthetic:mix=testbed,n_jobs=50,rate_per_h=60", 40, args.reps),
        fork_times("arena-1280", "synthetic:n_jobs=3000,rate_per_h=400", 1500, args.reps),
    ]
    for f in forks:
        print(
            f"fork {f['cluster']}: {f['unfinished']} unfinished, {f['queued']} queued, {f['events']} events: "
            f"median {f['median_ms']:.3f} ms, p95 {f['p95_ms']:.3f} ms"
        )
    decisions = decision_times(args.suite, args.windows, args.policy)
    for label, d in decisions.items():
        print(
            f"{label}: {d['decisions']} decisions on {args.windows} windows: median {d['median_ms']:.2f} ms, "
            f"p95 {d['p95_ms']:.1f} ms, searched {d['searched_share']:.0%} (base replaced {d['changed']} times), "
            f"{d['wall_s_per_window']:.1f} s a window"
        )
    ratios = [a / b for a, b in zip(decisions[args.policy]["avg_jct_s"], decisions["arena"]["avg_jct_s"])]
    print(f"{args.policy} / arena average JCT per window: {', '.join(f'{r:.4f}' for r in ratios)}")
    result = {
        "config": vars(args),
        "seed": 1,
        "code_version": code_version(),
        "machine": machine(load_before),
        "forks": forks,
        "decisions": decisions,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    path = write_json(OUT / f"bench_search_{args.name or args.policy}.json", result)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
