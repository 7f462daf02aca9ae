"""Benchmark: how far a live A/B run's simulated ratios move when the world's times are a few percent off.

The live A/B benchmark (``bench_live_ab.py``) sets a goal per seed: the live ratio of two policies'
average JCTs within 5 points of the simulator's prediction. A live testbed's step and start times
differ from the profile the policies plan with (pass to pass, a few percent), and on a 16-job trace
of few-second jobs one flipped decision moves a ratio by more than that. This measures the
prediction's own sensitivity, with no live run: for every deploy of a committed A/B run (its trace,
policy and performance model), ``--draws`` simulations of the prediction whose truth carries a fixed
log-normal error of ``sigma`` (``simulate_predicted``'s noise; the policies still plan with the
profile) on one source of ``--sources``: ``steps`` (the iteration times, per model, batch and shape)
or ``starts`` (the process starts, per model and device type), for every sigma of ``--sigmas``.

Two kinds of world per draw: ``independent`` (each deploy its own error, as A and B are run apart
live) and ``shared`` (B in A's world: only the decisions' sensitivity). Per source, sigma, world,
seed and B: the noise-free ratio (it must reproduce the run's simulated ratio, else the code changed
since the run and the benchmark refuses), the 5th, 50th and 95th percentiles of the draws' ratios,
the share of draws within the goal's points of the noise-free ratio, and the fraction of draws
below the run's live ratio; the same for the mean ratio over the seeds (``seed`` ``mean``). Per
source, sigma and world, the sum of the seeds' shares: the pairs the goal would meet in expectation
were the testbed the simulator with that error. The run's own spread is
printed beside: the standard deviation of ``log live_to_model_step_ratio`` over its deploys, and its
measured starts (the twins' ``start_s``) against the profile's.

Protocol: the run's policies with seed 0 (as its deploys); draw ``k`` of deploy ``d`` (the run's
order) seeded ``1_000_003 * d + k`` (in a shared world, A's seed), common to every source and sigma.
About 25 ms a simulation: the defaults (3 seeds, A and two Bs, 200 draws, 3 sigmas, 2 sources) take
about 6 minutes. Writes ``--out`` (JSON: config, seed, code version, machine, rows and every draw's
average JCT) and the rows as CSV beside it.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_live_ab_noise.py [--run RUN.json] [--draws 200] [--sigmas 0.01,0.03,0.1]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from arena_gym.harness.deploy import DeployConfig
from arena_gym.harness.experiment import load_jobs
from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.harness.scoring import parse_policy_spec
from arena_gym.metrics import compute_metrics
from arena_gym.outputs import code_version, write_csv, write_json
from arena_gym.registry import make_perf, make_policy
from real_runner.live.sim_vs_live import simulate_predicted
from real_runner.testbed import load_testbed

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "benchmarks" / "results" / "live_ab" / "live_ab.json"
OUT = REPO / "benchmarks" / "results" / "live_ab" / "noise.json"
SIGMAS = (0.01, 0.03, 0.1)
#: What the noise perturbs: step times (per model, batch and shape), or process starts (per model and GPU type).
SOURCES = ("steps", "starts")
WORLDS = ("independent", "shared")
#: Draw seeds of deploys this far apart (more draws than this would overlap).
STRIDE = 1_000_003
#: What the benchmark reads of a run's deploys and ratio rows.
DEPLOY_KEYS = (
    "label",
    "seed",
    "trace",
    "testbed",
    "sim_avg_jct_s",
    "live_to_model_step_ratio",
    "twin_start_s",
    "sim_start_s",
)
RATIO_KEYS = ("seed", "b", "live_ratio")
#: The noise-free prediction must reproduce the run's to this relative tolerance.
REPRODUCES = 1e-9


def read_run(path: Path) -> dict[str, Any]:
    """A ``bench_live_ab.py`` results JSON; SystemExit (one line) when it is not one."""
    try:
        run = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SystemExit(f"error: live A/B run {path}: cannot read it ({err})") from None
    keys = {"config", "deploys", "ratios", "code_version"}
    if not isinstance(run, dict) or not keys <= run.keys() or not {"a", "b", "perf"} <= run["config"].keys():
        raise SystemExit(f"error: live A/B run {path}: not a bench_live_ab.py results file")
    if not run["deploys"] or any("error" in d for d in run["deploys"]):
        raise SystemExit(f"error: live A/B run {path}: a deploy failed or none is recorded")
    for what, rows, needed in (("deploy", run["deploys"], DEPLOY_KEYS), ("ratio row", run["ratios"], RATIO_KEYS)):
        lacking = sorted({k for row in rows for k in needed if k not in row})
        if lacking:
            raise SystemExit(f"error: live A/B run {path}: a {what} lacks {', '.join(lacking)}")
    return run


def specs_of(config: Mapping[str, Any]) -> dict[str, str]:
    """The run's policies, label -> spec (A first)."""
    pairs = [parse_policy_spec(config["a"]), *(parse_policy_spec(t) for t in config["b"].split(",") if t.strip())]
    return dict(pairs)


class Predictions:
    """The predicted simulation of the run's deploys, as its deploy command made it, with or without noise."""

    def __init__(self, run: Mapping[str, Any]) -> None:
        self.specs = specs_of(run["config"])
        self.perf_spec = run["config"]["perf"]
        self._inputs: dict[tuple[str, str], tuple[Any, ...]] = {}

    def avg_jct(
        self, deploy: Mapping[str, Any], source: str = "steps", sigma: float = 0.0, noise_seed: int = 0
    ) -> float:
        """The deploy's predicted average JCT, its truth's ``source`` (:data:`SOURCES`) off by ``sigma`` (drawn by
        ``noise_seed``)."""
        config = DeployConfig(
            policy=self.specs[deploy["label"]], trace=deploy["trace"], testbed=deploy["testbed"], perf=self.perf_spec
        )
        cluster, perf, jobs = self._resolved(config)
        live = config.live_config()
        record = simulate_predicted(
            jobs,
            make_policy(config.policy, config.seed),
            cluster,
            perf,
            config.round_s,
            live.checkpoint_every_s,
            live.checkpoint_every_steps,
            step_noise=sigma if source == "steps" else 0.0,
            start_noise=sigma if source == "starts" else 0.0,
            noise_seed=noise_seed,
        )
        return compute_metrics(record)["avg_jct_s"]

    def _resolved(self, config: DeployConfig) -> tuple[Any, ...]:
        """(cluster, performance model, jobs) of a deploy, as ``arena-gym deploy`` resolves them (kept per trace)."""
        key = (config.testbed, config.trace)
        if key not in self._inputs:
            cluster = load_testbed(config.testbed).cluster()
            try:
                perf = make_perf(config.perf, cluster, config.seed)
            except (ValueError, OSError) as err:
                raise SystemExit(f"error: the run's performance model {config.perf}: {err}") from None
            jobs = tuple(load_jobs(config.trace, cluster, perf, config.seed))
            self._inputs[key] = (cluster, perf, jobs)
        return self._inputs[key]


def check_reproduces(run: Mapping[str, Any], predictions: Predictions) -> list[float]:
    """Every deploy's noise-free prediction, checked against the run's (SystemExit, one line, where one differs)."""
    out = []
    for d in run["deploys"]:
        now, then = predictions.avg_jct(d), float(d["sim_avg_jct_s"])
        if not math.isclose(now, then, rel_tol=REPRODUCES):
            raise SystemExit(
                f"error: the prediction of {d['label']} on seed {d['seed']} does not reproduce ({now:.6f} s now, "
                f"{then:.6f} s in the run of code {run['code_version']}): the policies or the simulator changed"
            )
        out.append(now)
    return out


def draw_jcts(
    run: Mapping[str, Any], predictions: Predictions, sources: Sequence[str], sigmas: Sequence[float], draws: int
) -> dict[str, dict[str, dict[str, list[list[float]]]]]:
    """Per source, sigma and world (:data:`WORLDS`), per deploy (the run's order), the average JCT of every draw."""
    deploys, a_label = run["deploys"], next(iter(predictions.specs))
    a_of = {d["seed"]: i for i, d in enumerate(deploys) if d["label"] == a_label}
    bs = sum(d["label"] != a_label for d in deploys)
    total = len(sources) * len(sigmas) * (len(deploys) + bs) * draws
    bar = tqdm(total=total, desc="simulations", unit="sim", leave=False)

    def drawn(deploy: Mapping[str, Any], source: str, sigma: float, first: int) -> list[float]:
        row = []
        for k in range(draws):
            row.append(predictions.avg_jct(deploy, source, sigma, first + k))
            bar.update()
        return row

    out: dict[str, dict[str, dict[str, list[list[float]]]]] = {}
    for source in sources:
        out[source] = {}
        for sigma in sigmas:
            independent = [drawn(d, source, sigma, STRIDE * i) for i, d in enumerate(deploys)]
            shared = [  # B in its seed's A world; A's draws are its own
                independent[i] if d["label"] == a_label else drawn(d, source, sigma, STRIDE * a_of[d["seed"]])
                for i, d in enumerate(deploys)
            ]
            out[source][f"{sigma:g}"] = {"independent": independent, "shared": shared}
    bar.close()
    return out


def ratio_table(
    run: Mapping[str, Any],
    labels: Sequence[str],
    jcts: Mapping[str, Mapping[str, Mapping[str, Sequence[Sequence[float]]]]],
    clean: Sequence[float],
    goal: float,
) -> list[dict[str, Any]]:
    """Per source, sigma, world, B and seed, then for the mean over the seeds (``seed`` ``mean``; draw ``k`` of
    every seed averaged): the noise-free ratio, the draws' percentiles, the share within the goal, and the
    live ratio's place among the draws."""
    deploys = run["deploys"]
    index = {(d["seed"], d["label"]): i for i, d in enumerate(deploys)}
    live = {(r["seed"], r["b"]): r["live_ratio"] for r in run["ratios"]}
    seeds = sorted({d["seed"] for d in deploys})
    a, bs = labels[0], labels[1:]
    rows = []
    for source, by_sigma in jcts.items():
        for sigma, worlds in by_sigma.items():
            for world, per_deploy in worlds.items():
                for b in bs:
                    ratios, exact = {}, {}
                    for seed in seeds:
                        ia, ib = index[(seed, a)], index[(seed, b)]
                        ratios[seed] = np.asarray(per_deploy[ib]) / np.asarray(per_deploy[ia])
                        exact[seed] = clean[ib] / clean[ia]
                    ratios["mean"] = np.mean([ratios[seed] for seed in seeds], axis=0)
                    exact["mean"] = float(np.mean([exact[seed] for seed in seeds]))
                    live_of = {
                        **{seed: live[(seed, b)] for seed in seeds},
                        "mean": np.mean([live[(s, b)] for s in seeds]),
                    }
                    for seed, drawn in ratios.items():
                        rows.append(
                            {
                                "source": source,
                                "sigma": float(sigma),
                                "world": world,
                                "b": b,
                                "seed": seed,
                                "sim_ratio": exact[seed],
                                "q05": float(np.quantile(drawn, 0.05)),
                                "median": float(np.median(drawn)),
                                "q95": float(np.quantile(drawn, 0.95)),
                                "within_goal_share": float(np.mean(np.abs(drawn - exact[seed]) <= goal / 100.0)),
                                "live_ratio": float(live_of[seed]),
                                "live_below_share": float(np.mean(drawn < live_of[seed])),
                            }
                        )
    return rows


def _sources(text: str) -> list[str]:
    sources = [s.strip() for s in text.split(",") if s.strip()]
    if not sources or not set(sources) <= set(SOURCES) or len(set(sources)) != len(sources):
        raise argparse.ArgumentTypeError(f"expected distinct sources of {', '.join(SOURCES)}, got {text!r}")
    return sources


def _floats(text: str) -> list[float]:
    try:
        values = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or not all(0 < v <= 1 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected distinct sigmas in (0, 1], got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    """Simulate every deploy's noisy predictions, print the table, write the JSON and CSV."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, default=RUN, help="a bench_live_ab.py results JSON")
    p.add_argument("--draws", type=int, default=200, help="noisy worlds per deploy, sigma and kind of world")
    p.add_argument("--sigmas", type=_floats, default=list(SIGMAS), help="comma-separated log-normal step-time errors")
    p.add_argument("--sources", type=_sources, default=list(SOURCES), help="comma-separated: steps, starts")
    p.add_argument("--out", type=Path, default=OUT, help="the results JSON (a CSV of the rows beside it)")
    args = p.parse_args(argv)
    if not 2 <= args.draws < STRIDE:
        p.error(f"--draws must be in 2..{STRIDE - 1}, got {args.draws}")
    logging.getLogger("arena_gym.sim").setLevel(logging.ERROR)
    run = read_run(args.run)
    goal = float(run["config"].get("goal_points", 5.0))
    started, load_before = time.perf_counter(), os.getloadavg()
    predictions = Predictions(run)
    labels = list(predictions.specs)
    clean = check_reproduces(run, predictions)
    jcts = draw_jcts(run, predictions, args.sources, args.sigmas, args.draws)
    rows = ratio_table(run, labels, jcts, clean, goal)
    spread = statistics.stdev(math.log(d["live_to_model_step_ratio"]) for d in run["deploys"])
    table = pd.DataFrame(rows)
    print(
        f"run {shown_path(args.run, REPO)} (code {run['code_version']}): {len(run['deploys'])} deploys; "
        f"its live step times vs the profile: log-sd {spread:.3f} over deploys"
    )
    starts = [d["twin_start_s"] for d in run["deploys"]]
    profiled = ", ".join(f"{m} {v:.2f} s" for m, v in sorted(run["deploys"][0]["sim_start_s"].items()))
    print(
        f"its measured starts: {min(starts):.2f}-{max(starts):.2f} s a deploy; the profile's first starts: {profiled}"
    )
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    per_seed = table[table["seed"] != "mean"]
    expected = per_seed.groupby(["source", "sigma", "world"], sort=False)["within_goal_share"].sum()
    for (source, sigma, world), pairs in expected.items():
        print(
            f"{source}, sigma {sigma:g}, {world} worlds: {pairs:.2f} of {len(run['ratios'])} pairs within {goal:g} points "
            "in expectation"
        )
    out = write_json(
        args.out,
        {
            "benchmark": "bench_live_ab_noise",
            "config": {
                "run": shown_path(args.run, REPO),
                "run_code_version": run["code_version"],
                "draws": args.draws,
                "sigmas": args.sigmas,
                "sources": args.sources,
                "worlds": list(WORLDS),
                "goal_points": goal,
                "stride": STRIDE,
            },
            "seed": 0,
            "code_version": code_version(),
            "machine": machine(load_before),
            "wall_s": time.perf_counter() - started,
            "run_step_log_sd": spread,
            "noise_free_avg_jct_s": clean,
            "rows": rows,
            "expected_within_goal": [
                {"source": src, "sigma": s, "world": w, "pairs": v} for (src, s, w), v in expected.items()
            ],
            "avg_jct_s": jcts,
        },
    )
    write_csv(out.with_suffix(".csv"), table)
    print(f"wrote {shown_path(out, REPO)} and {out.with_suffix('.csv').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
