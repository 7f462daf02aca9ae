"""Live A/B benchmark: does the simulated gain of one policy over another hold on a live testbed?

Protocol (the defaults): three seeds; per seed one live trace on ``cpu-2`` (one node, a core per
device), ``live:n_jobs=16,span_s=60,seed=S,work=0.5,max_gpus=2``: 16 ``gpt__tiny`` / ``gpt__mini``
jobs of 8 to 160 iterations and 1 or 2 requested devices, arriving in two waves a span apart
(:func:`trace_spec`). Policy A and every policy B are deployed on that trace one after the other
(``arena-gym deploy`` as a subprocess, :func:`bench_deploy.deploy`), A first on even seeds and
last on odd ones (:func:`deploy_order`). Every deploy gives its live average JCT and two simulated
ones of the same jobs and policy on the simulator with the deploy's performance model: the
*predicted* one (what the simulator claimed before any live run: every (re)start charged the
profile's measured start, checkpoint save and load, nothing measured live; ``sim_`` in the rows)
and the calibrated *twin* (charged the start-up and checkpoint costs that deploy measured;
``twin_``). Per seed and B the table has the simulated ratio B/A (the predicted one), the live
ratio B/A and their difference in points (goal: within 5), the twin's ratio B/A beside them, and
the 1-minute load average before each deploy.

One performance model serves every deploy (the policies plan with it and both simulations run on it):
by default a profile of the testbed taken at the start (``arena-gym estimate profile``, a few
minutes; written beside ``--out``), or ``--perf SPEC``. Writes ``--out`` (JSON: config, code
version, machine, every deploy, the ratio rows) and the ratio rows as CSV beside it; each
deploy's results directory goes under ``--runs`` (default ``results/bench_live_ab/``). A full
run (3 seeds, A and two Bs: nine deploys) takes about 25-35 minutes on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from bench_deploy import autogroup_nice, deploy  # this folder, on the path when run as a script

from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.harness.scoring import parse_policy_spec
from arena_gym.outputs import code_version, write_csv, write_json

REPO = Path(__file__).resolve().parents[1]
TESTBED = "cpu-2"
MODELS = "gpt__tiny,gpt__mini"
#: Goal: the live ratio within this many points of the simulated ratio, per seed.
GOAL_POINTS = 5.0
#: The protocol's smallest trace and seed count (fewer is a quick look, reported as such).
PROTOCOL_JOBS = 16
PROTOCOL_SEEDS = 3


def trace_spec(seed: int, jobs: int = PROTOCOL_JOBS, work: float = 0.5, span_s: float = 60.0) -> str:
    """The live trace of one seed: ``jobs`` menu jobs (mixed lengths, 1 or 2 devices) scaled by ``work``."""
    return f"live:n_jobs={jobs},span_s={span_s:g},seed={seed},work={work:g},max_gpus=2"


def deploy_order(index: int, labels: Sequence[str]) -> list[str]:
    """The order of the deploys of the ``index``-th seed: as given on even indices, reversed on odd ones."""
    return list(labels) if index % 2 == 0 else list(reversed(labels))


def with_prediction(row: Mapping[str, Any], out: Path) -> dict[str, Any]:
    """A deploy's row (:func:`bench_deploy.deploy`, whose ``sim_`` figures are the twin's) with those renamed
    ``twin_`` and the predicted simulation's figures as ``sim_``, from the deploy's ``sim_vs_live.json`` in
    ``out`` (None where a failed deploy has none)."""
    figures = {("twin_" + k.removeprefix("sim_") if k.startswith("sim_") else k): v for k, v in row.items()}
    path = out / "sim_vs_live.json"
    pred = json.loads(path.read_text()) if "error" not in row and path.is_file() else {}
    figures["sim_avg_jct_s"] = pred.get("avg_jct_pred_s")
    figures["sim_avg_jct_error"] = pred.get("avg_jct_pred_error")
    figures["sim_median_abs_job_error"] = pred.get("median_abs_job_pred_jct_error")
    figures["sim_start_s"] = {
        k.removeprefix("pred_start_s_"): v for k, v in pred.items() if k.startswith("pred_start_s_")
    }
    return figures


def ratio_rows(deploys: Sequence[Mapping[str, Any]], a: str, bs: Sequence[str]) -> list[dict[str, Any]]:
    """Per seed and B: simulated (predicted) and live average-JCT ratios B/A, their difference in points, the
    twin's ratio, the loads.

    ``deploys`` are rows with ``label``, ``seed``, ``avg_jct_s``, ``sim_avg_jct_s`` (the predicted
    simulation's), ``twin_avg_jct_s`` (optional) and ``load_1m`` (a failed deploy has ``error`` instead of
    the JCTs: its ratios are NaN and it misses the goal). ValueError when a (seed, label) pair is missing or
    given twice.
    """
    by_key: dict[tuple[int, str], Mapping[str, Any]] = {}
    for row in deploys:
        key = (int(row["seed"]), str(row["label"]))
        if key in by_key:
            raise ValueError(f"ratio_rows: deploy of {key[1]} on seed {key[0]} given twice")
        by_key[key] = row
    rows = []
    for seed in sorted({seed for seed, _ in by_key}):
        for b in bs:
            missing = [label for label in (a, b) if (seed, label) not in by_key]
            if missing:
                raise ValueError(f"ratio_rows: no deploy of {', '.join(missing)} on seed {seed}")
            da, db = by_key[(seed, a)], by_key[(seed, b)]
            sim = _ratio(db.get("sim_avg_jct_s"), da.get("sim_avg_jct_s"))
            twin = _ratio(db.get("twin_avg_jct_s"), da.get("twin_avg_jct_s"))
            live = _ratio(db.get("avg_jct_s"), da.get("avg_jct_s"))
            diff = 100.0 * (live - sim)
            rows.append(
                {
                    "seed": seed,
                    "a": a,
                    "b": b,
                    "sim_avg_jct_a_s": da.get("sim_avg_jct_s", math.nan),
                    "sim_avg_jct_b_s": db.get("sim_avg_jct_s", math.nan),
                    "live_avg_jct_a_s": da.get("avg_jct_s", math.nan),
                    "live_avg_jct_b_s": db.get("avg_jct_s", math.nan),
                    "sim_ratio": sim,
                    "live_ratio": live,
                    "diff_points": diff,
                    "within_goal": bool(abs(diff) <= GOAL_POINTS),
                    "twin_avg_jct_a_s": da.get("twin_avg_jct_s", math.nan),
                    "twin_avg_jct_b_s": db.get("twin_avg_jct_s", math.nan),
                    "twin_ratio": twin,
                    "load_a": da["load_1m"],
                    "load_b": db["load_1m"],
                }
            )
    return rows


def _ratio(num: Any, den: Any) -> float:
    """num / den, NaN where either is missing or not positive."""
    if num is None or den is None or not (float(den) > 0 and float(num) >= 0):
        return math.nan
    return float(num) / float(den)


def profile_testbed(path: Path) -> str:
    """Profile the testbed's devices for the trace's models into ``path``; the ``profiled:`` spec of it."""
    cmd = [sys.executable, "-m", "arena_gym", "estimate", "profile", "--testbed", TESTBED, "--models", MODELS]
    cmd += ["--out", str(path)]
    path.parent.mkdir(parents=True, exist_ok=True)
    print("$", " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        raise SystemExit(f"error: profiling {TESTBED} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return f"profiled:{shown_path(path, REPO)}"


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"expected distinct integers >= 0, got {text!r}")
    return seeds


def main(argv: list[str] | None = None) -> int:
    """Deploy A and every B on each seed's trace, print the ratio table, write the JSON and CSV."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", default="arena", help="policy A (a registered name or LABEL=SPEC)")
    p.add_argument(
        "--b",
        default="arena-gittins-32-f",
        help="comma-separated policies B, each compared with A (LABEL=SPEC, e.g. arena-residual=residual:PATH)",
    )
    p.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="comma-separated trace seeds")
    p.add_argument("--jobs", type=int, default=PROTOCOL_JOBS, help="jobs per trace")
    p.add_argument("--work", type=float, default=0.5, help="scale every job's iterations")
    p.add_argument("--span", type=float, default=60.0, help="seconds over which one wave of 12 jobs arrives")
    p.add_argument("--perf", default=None, help="performance model (default: profile the testbed once, at the start)")
    p.add_argument("--out", type=Path, default=REPO / "results" / "bench_live_ab.json")
    p.add_argument("--runs", type=Path, default=REPO / "results" / "bench_live_ab", help="the deploys' directories")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per deployment")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")
    if not (0 < args.work <= 100):
        p.error(f"--work must be in (0, 100], got {args.work}")
    if not (0 <= args.span <= 86_400):
        p.error(f"--span must be in 0..86400 s, got {args.span}")
    a_label, a_spec = parse_policy_spec(args.a)
    b_pairs = [parse_policy_spec(text) for text in args.b.split(",") if text.strip()]
    specs = dict([(a_label, a_spec), *b_pairs])
    if not b_pairs or len(specs) != len(b_pairs) + 1:
        p.error(f"--b must name one or more policies, none of them twice or A ({a_label}), got {args.b!r}")
    b_labels = [label for label, _ in b_pairs]
    protocol = args.jobs >= PROTOCOL_JOBS and len(args.seeds) >= PROTOCOL_SEEDS
    if not protocol:
        print(f"quick look: the protocol is >= {PROTOCOL_JOBS} jobs and {PROTOCOL_SEEDS} seeds", flush=True)
    started, load_before = time.time(), os.getloadavg()
    perf = args.perf or profile_testbed(args.out.with_name(f"{args.out.stem}-profile-{TESTBED}.json"))
    deploys = []
    for index, seed in enumerate(args.seeds):
        trace = trace_spec(seed, args.jobs, args.work, args.span)
        for label in deploy_order(index, [a_label, *b_labels]):
            load = os.getloadavg()
            print(f"seed {seed}, {label}: load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
            out = args.runs / f"seed{seed}-{label}"
            row = with_prediction(deploy(specs[label], TESTBED, trace, perf, out, args.timeout), out)
            deploys.append({**row, "label": label, "seed": seed, "trace": trace, "load_1m": load[0], "load": load})
    rows = ratio_rows(deploys, a_label, b_labels)
    table = pd.DataFrame(rows)
    cols = ["seed", "b", "sim_ratio", "live_ratio", "diff_points", "within_goal", "twin_ratio", "load_a", "load_b"]
    print()
    print(table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    met = sum(r["within_goal"] for r in rows)
    print(f"\n{met}/{len(rows)} (seed, B) pairs with the live ratio within {GOAL_POINTS:g} points of the simulated one")
    write_json(
        args.out,
        {
            "config": {
                "a": args.a,
                "b": args.b,
                "seeds": args.seeds,
                "jobs": args.jobs,
                "work": args.work,
                "span_s": args.span,
                "testbed": TESTBED,
                "perf": perf,
                "goal_points": GOAL_POINTS,
                "protocol": protocol,
                "autogroup_nice": autogroup_nice(),
            },
            "code_version": code_version(),
            "machine": machine(load_before),
            "started": started,
            "wall_s": time.time() - started,
            "deploys": deploys,
            "ratios": rows,
            "within_goal": met,
        },
    )
    write_csv(args.out.with_suffix(".csv"), table)
    print(f"wrote {args.out} and {args.out.with_suffix('.csv').name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
