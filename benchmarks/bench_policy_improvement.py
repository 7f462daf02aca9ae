"""Benchmark: what a round of policy iteration has to distil, on the validation windows.

Policy iteration (``arena-gym train --method policy-iteration``) improves a residual by the
lookahead over it and its perturbations (the teacher) and distils the teacher's choices back
into a residual. This scores, on the 12 ``real-validation`` windows (the selection windows), Arena,
the residual a run started from (``--weights``), the teacher built from it as a round builds it
(``--pairs`` directions of scale ``--sigma`` drawn from ``--seed``, ``--worlds`` worlds, 4 h
horizon), and the residual the run kept (``--distilled``): the teacher's gain over its base
bounds what distillation can bring.

Protocol: one run per (window, policy), every policy deterministic given the seed (so one
repetition); ``--workers`` processes, a window each; per window the padded average JCT across the
four policies; every figure the ratio to Arena's (mean and geometric mean over windows, wins).
The load average is recorded before and after. ``OMP_NUM_THREADS=1``. Needs ``../shared/data``.

Writes ``benchmarks/results/residual/policy_improvement.json`` (``--out``): the config, the seed,
the code version, the machine, every window's figures and the summary.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_policy_improvement.py [--workers 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from agents.residual.priority import ResidualWeights, residual_policy
from arena_gym.harness.out_dirs import machine
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.suites import get_suite
from arena_gym.harness.sweep import run_tasks
from arena_gym.harness.trainers.policy_iteration import proposals, teacher
from arena_gym.outputs import code_version, write_json
from arena_gym.registry import make_policy
from envs import EnvConfig, Workload

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results" / "residual"
OUT = RESULTS / "policy_improvement.json"
LABELS = ("arena", "residual", "teacher", "distilled")


class Window(NamedTuple):
    """One validation window and everything its four policies are built from."""

    config: EnvConfig
    workload: Workload
    weights: ResidualWeights
    distilled: ResidualWeights
    pairs: int
    sigma: float
    worlds: int
    seed: int


def score_window(task: Window) -> dict[str, Any]:
    """The four policies' padded average JCTs on one window (a worker's task)."""
    eps = np.random.default_rng(task.seed).standard_normal((task.pairs, len(task.weights.vector)))
    candidates = [task.weights.with_vector(v) for v in proposals(task.weights.vector, eps, task.sigma)[1:]]
    policies = {
        "arena": make_policy("arena", task.seed),
        "residual": residual_policy(task.weights, "residual"),
        "teacher": teacher(task.weights, candidates, task.worlds, 4 * 3600.0, task.seed),
        "distilled": residual_policy(task.distilled, "distilled"),
    }
    began = time.process_time()
    rows = Evaluator(task.config, [task.workload]).score(policies)
    padded = dict(zip(rows["policy"], rows["padded_jct_s"]))
    return {
        "workload": task.workload.label,
        **{k: float(padded[k]) for k in LABELS},
        "cpu_s": time.process_time() - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default=str(RESULTS / "train-tuned" / "residual.json"), help="the base residual")
    parser.add_argument(
        "--distilled", default=str(RESULTS / "policy-iteration" / "residual.json"), help="the residual a run kept"
    )
    parser.add_argument(
        "--pairs", type=int, default=2, help="perturbation directions (the teacher's 2 x pairs candidates)"
    )
    parser.add_argument("--sigma", type=float, default=0.3, help="the perturbations' scale")
    parser.add_argument("--worlds", type=int, default=8, help="the teacher's sampled worlds per search")
    parser.add_argument("--seed", type=int, default=0, help="the directions' and the worlds' seed")
    parser.add_argument("--workers", type=int, default=2, help="local processes")
    parser.add_argument("--out", type=Path, default=OUT, help="the results JSON")
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"bench_policy_improvement: no data folder at {DATA}")
    if args.pairs < 1 or args.worlds < 1 or args.workers < 1 or not args.sigma > 0:
        sys.exit("bench_policy_improvement: --pairs, --worlds and --workers must be >= 1, --sigma > 0")
    try:
        weights, distilled = ResidualWeights.load(args.weights), ResidualWeights.load(args.distilled)
    except ValueError as err:
        sys.exit(f"bench_policy_improvement: {err}")
    logging.getLogger("arena_gym.sim").setLevel(logging.ERROR)
    part = get_suite("real-validation", str(DATA)).parts[0]
    windows = [
        Window(part.config, w, weights, distilled, args.pairs, args.sigma, args.worlds, args.seed)
        for w in part.workloads()
    ]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    rows = run_tasks(score_window, windows, args.workers, progress=True, unit="window")
    ratios = {k: np.array([r[k] / r["arena"] for r in rows]) for k in LABELS[1:]}
    summary = {
        k: {
            "mean_ratio": float(v.mean()),
            "geomean_ratio": float(np.exp(np.log(v).mean())),
            "wins_vs_arena": int((v < 1.0 - 1e-9).sum()),
            "wins_vs_residual": int((v < ratios["residual"] - 1e-9).sum()),
            "losses_vs_residual": int((v > ratios["residual"] + 1e-9).sum()),
        }
        for k, v in ratios.items()
    }
    print(f"{len(rows)} validation windows; ratios to Arena's padded average JCT")
    print(f"{'policy':>10s} {'mean':>7s} {'geomean':>8s} {'wins':>5s} {'vs residual (won/lost)':>23s}")
    for k, s in summary.items():
        print(
            f"{k:>10s} {s['mean_ratio']:7.4f} {s['geomean_ratio']:8.4f} {s['wins_vs_arena']:5d} "
            f"{s['wins_vs_residual']:>11d}/{s['losses_vs_residual']}"
        )
    shown = {k: os.path.relpath(getattr(args, k), REPO) for k in ("weights", "distilled")}
    out = write_json(
        args.out,
        {
            "benchmark": "bench_policy_improvement",
            "config": {
                **shown,
                "pairs": args.pairs,
                "sigma": args.sigma,
                "worlds": args.worlds,
                "workers": args.workers,
            },
            "seed": args.seed,
            "code_version": code_version(),
            "machine": machine(load_before),
            "loadavg_after": os.getloadavg(),
            "wall_s": time.perf_counter() - t0,
            "summary": summary,
            "windows": rows,
        },
    )
    print(f"wrote {os.path.relpath(out, REPO)}")


if __name__ == "__main__":
    main()
