"""How the registered lookahead was chosen: what sampled worlds say against the true world, and the sweep over M.

Protocol (tuning data only: the ``real-validation`` windows and evenly spaced windows of the train
split of the five real traces; the test windows are never read).

- ``worlds``: on ``--worlds-windows`` evenly spaced validation windows, the registered lookahead's base
  decides every step (so every policy sees the base's trajectory); at each decision point where the
  proposals of a wide candidate set differ, each distinct proposal is scored by the base's rollouts
  in the search's M sampled worlds (non-clairvoyant) and in the true world (the backend's fork: true
  lengths, true arrivals), both to the same horizon. Per candidate: how often the sampled worlds
  rank it best, the mean relative score difference to the base's in the sampled worlds and in the
  true world when they do, and how often the true world ranks it best.
- ``sweep``: the registered lookahead at each ``--worlds`` value on every validation window and on
  ``--train-windows`` evenly spaced train windows (offered load 0.6 / 0.9 / 1.2 cycled, as the
  env trains), beside Arena and the lookahead's base: the mean ratio of average JCT to Arena's,
  the wins, and the CPU seconds per window.

Tasks (one window under one policy) run in ``--workers`` local processes; a policy's result
depends only on its seed, not on the worker. The load average is recorded before and after;
results go to ``benchmarks/results/search/tune_lookahead.json`` with the config, seed and code
version. Needs ``../shared/data`` beside the repository; without it, it says so and exits 0.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/tune_lookahead.py [--worlds 4,8,16] [--train-windows 24] [--workers 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from agents.catalogue import LOOKAHEAD
from agents.search.lookahead import Lookahead
from arena_gym.core.information import information_set
from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.suites import custom_suite, get_suite
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.outputs import code_version, write_json
from arena_gym.registry import make_policy, policy_registry
from envs import Workload

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "search" / "tune_lookahead.json"
TRACES = (
    "arena/traces/testbed.csv?iteration_divisor=1",
    "arena/traces/philly.csv",
    "arena/traces/pai.csv",
    "itp/cluster10.csv?seed=0",
    "itp/cluster08.csv?seed=0",
)
#: Variants of the base that are not registered, for the wide candidate set (name -> arena_gittins overrides).
VARIANTS: dict[str, dict[str, Any]] = {
    "arena-gittins-32-f-pl": {"adapt": True, "max_job_gpus": 32, "weighted_fits": True, "preempt_lower": True},
    "arena-gittins-32-f-hold": {"adapt": True, "max_job_gpus": 32, "weighted_fits": True, "max_upgrade_steps": 0},
    "arena-gittins-16-f": {"adapt": True, "max_job_gpus": 16, "weighted_fits": True},
}
WIDE = ("arena-gittins-32", "arena-gittins-32-wf", *VARIANTS)
SEED = 0


def _register_variants() -> None:
    registry = policy_registry()
    for name, kwargs in VARIANTS.items():
        if not registry.knows(name):
            registry.register(name, "agents.arena.gittins:arena_gittins", kwargs, f"tuning variant {name}")


@functools.lru_cache(maxsize=2)
def _suites(train_windows: int) -> dict[str, tuple[Evaluator, list[Workload]]]:
    validation = get_suite("real-validation", str(DATA))
    train = custom_suite([f"{DATA}/{t}" for t in TRACES], split="train", load_levels=(0.6, 0.9, 1.2))
    out = {}
    for name, suite, limit in (("validation", validation, 0), ("train", train, train_windows)):
        workloads = suite.workloads()
        if 0 < limit < len(workloads):
            workloads = [workloads[int(i)] for i in np.linspace(0, len(workloads) - 1, limit).round()]
        out[name] = (Evaluator(suite.parts[0].config, workloads), workloads)
    return out


def _policy(spec: str) -> Any:
    """A registered name, or ``lookahead@M``: the registered lookahead with M worlds."""
    name, _, worlds = spec.partition("@")
    if not worlds:
        return make_policy(name, SEED)
    rng = np.random.default_rng(np.random.SeedSequence([SEED, 1]))
    return Lookahead(name, rng=rng, **{**LOOKAHEAD, "worlds": int(worlds)})


def _sweep_task(task: tuple[str, int, str, int]) -> dict[str, Any]:
    split, index, spec, train_windows = task
    _register_variants()
    evaluator, workloads = _suites(train_windows)[split]
    workload = workloads[index]
    policy = _policy(spec)
    start = time.process_time()
    record = run_episode(evaluator.backend(workload, policy.ap_search), policy, workload.jobs)
    return {
        "split": split,
        "workload": workload.label,
        "policy": spec,
        "avg_jct_s": compute_metrics(record)["avg_jct_s"],
        "cpu_s": time.process_time() - start,
    }


def _worlds_task(task: tuple[int, int]) -> list[dict[str, Any]]:
    """Per search on one validation window: every proposal's sampled-world and true-world scores."""
    index, worlds = task
    _register_variants()
    evaluator, workloads = _suites(0)["validation"]
    workload = workloads[index]
    rng = np.random.default_rng(np.random.SeedSequence([SEED, 1]))
    never = {**LOOKAHEAD, "candidates": WIDE, "worlds": worlds, "margin": 0.999999}  # scores, never switches
    sampled = Lookahead("sampled", rng=rng, **never)
    true = Lookahead("true", oracle=True, **never)
    backend = evaluator.backend(workload, sampled.ap_search)
    shown, oracle_shown = information_set(sampled), information_set(true, backend)
    sampled.reset()
    true.reset()
    snapshot = backend.reset(workload.jobs)
    while snapshot is not None:
        decision = sampled.decide(shown(snapshot))
        assert true.decide(oracle_shown(snapshot)) == decision  # both take the base decision
        backend.apply(decision)
        snapshot = backend.advance()
    rows = []
    for a, b in zip(sampled.searches, true.searches, strict=True):
        assert a.time == b.time and a.proposers == b.proposers
        rows.append(
            {
                "workload": workload.label,
                "time": a.time,
                "proposers": a.proposers,
                "sampled": [float(np.mean(s)) for s in a.scores],
                "true": [s[0] for s in b.scores],
            }
        )
    return rows


def _agreement(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per candidate: how often it is best in the sampled worlds and in the true world, and the score change then."""
    picked: dict[str, list[tuple[float, float]]] = defaultdict(list)
    truly: dict[str, int] = defaultdict(int)
    proposed: dict[str, int] = defaultdict(int)
    for row in rows:
        sampled, true = np.asarray(row["sampled"]), np.asarray(row["true"])
        for name in row["proposers"][1:]:
            proposed[name] += 1
        best = int(np.argmin(sampled))
        if best and sampled[best] < sampled[0]:
            picked[row["proposers"][best]].append(
                ((sampled[best] - sampled[0]) / sampled[0], (true[best] - true[0]) / true[0])
            )
        best_true = int(np.argmin(true))
        if best_true and true[best_true] < true[0]:
            truly[row["proposers"][best_true]] += 1
    out = {}
    for name in proposed:
        diffs = np.asarray(picked.get(name, []), dtype=float).reshape(-1, 2)
        out[name] = {
            "proposed": proposed[name],
            "best_sampled": len(diffs),
            "sampled_change_when_best": float(diffs[:, 0].mean()) if len(diffs) else 0.0,
            "true_change_when_best_sampled": float(diffs[:, 1].mean()) if len(diffs) else 0.0,
            "best_true": truly.get(name, 0),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", default="4,8,16", help="the M values of the sweep")
    parser.add_argument("--train-windows", type=int, default=24)
    parser.add_argument("--worlds-windows", type=int, default=6, help="validation windows of the worlds part")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"skipped: needs the shared data folder {DATA}")
        return
    load_before = os.getloadavg()
    _register_variants()
    suites = _suites(args.train_windows)
    base = LOOKAHEAD["base"]
    sweep = [f"lookahead@{m}" for m in dict.fromkeys(args.worlds.split(","))]
    tasks = [
        (split, i, spec, args.train_windows)
        for split, (_, workloads) in suites.items()
        for i in range(len(workloads))
        for spec in ("arena", base, *(sweep if split == "validation" else sweep[1:2]))
    ]
    n_val = len(suites["validation"][1])
    picks = [int(i) for i in np.linspace(0, n_val - 1, args.worlds_windows).round()]
    with ProcessPoolExecutor(args.workers) as pool:
        search_rows = [r for rows in pool.map(_worlds_task, [(i, LOOKAHEAD["worlds"]) for i in picks]) for r in rows]
        results = list(pool.map(_sweep_task, tasks))
    agreement = _agreement(search_rows)
    print(f"worlds: {len(search_rows)} searches on {len(picks)} validation windows (M={LOOKAHEAD['worlds']})")
    for name, a in agreement.items():
        print(
            f"  {name}: best in the sampled worlds {a['best_sampled']} of {a['proposed']} times "
            f"(sampled {a['sampled_change_when_best']:+.4f}, true {a['true_change_when_best_sampled']:+.4f}); "
            f"best in the true world {a['best_true']} times"
        )
    summary = []
    for split in suites:
        rows = [r for r in results if r["split"] == split]
        arena = {r["workload"]: r["avg_jct_s"] for r in rows if r["policy"] == "arena"}
        for spec in dict.fromkeys(r["policy"] for r in rows):
            mine = [r for r in rows if r["policy"] == spec]
            ratios = np.array([r["avg_jct_s"] / arena[r["workload"]] for r in mine])
            cpu = float(np.mean([r["cpu_s"] for r in mine]))
            summary.append(
                {
                    "split": split,
                    "policy": spec,
                    "windows": len(mine),
                    "mean_ratio": float(ratios.mean()),
                    "wins": int((ratios < 1).sum()),
                    "cpu_s_per_window": cpu,
                }
            )
            print(
                f"{split} {spec}: mean ratio {ratios.mean():.4f}, wins {int((ratios < 1).sum())}/{len(mine)}, "
                f"{cpu:.1f} CPU s a window"
            )
    out = Path(args.out)
    config = {
        **vars(args),
        "out": shown_path(out, REPO),
        "lookahead": dataclasses.asdict(Lookahead(**LOOKAHEAD).config),
        "wide": WIDE,
    }
    path = write_json(
        out,
        {
            "config": config,
            "seed": SEED,
            "code_version": code_version(),
            "machine": machine(load_before),
            "agreement": agreement,
            "summary": summary,
            "sweep": results,
            "searches": search_rows,
        },
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
