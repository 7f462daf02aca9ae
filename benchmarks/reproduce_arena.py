"""Reproduce the artifact's large-scale comparison (docs/arena.md §8.7) and its siblings.

For each scenario, runs Arena and the baselines on one simulator with the artifact's padding
rule (each baseline's finished JCTs padded with the worst JCT seen, up to Arena's finished
count) and prints, per baseline: the padded average-JCT reduction of Arena, the jobs-finished
ratio and the average / peak throughput ratios, beside the artifact's figures where it has
them. Decisions are taken every 300 s only (the artifact's rounds) unless ``--event-driven``.
``--measured`` uses the artifact's measured AP-optimal table and DP memory table as ground truth
and belief instead of the built-in estimator. The runs go to ``--workers`` local processes (2),
or, with ``--ray ADDRESS`` (or ``auto``), are Ray tasks on that cluster, with the same results.

Writes ``benchmarks/results/reproduction/<scenario><suffix>.csv`` (one leaderboard per scenario,
trace paths relative to the data folder, with the code version) and, when every scenario ran,
``summary<suffix>.txt`` (what it prints). The suffix is ``-measured`` and/or ``-event``
(``-rounds`` for the summary of the default run). Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import pandas as pd

from arena_gym.harness.compare import CompareConfig, compare
from arena_gym.harness.experiment import RunConfig
from arena_gym.harness.results import code_version
from arena_gym.harness.sweep import connect_ray

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "reproduction"
BASELINES = ("fcfs", "elasticflow-ls", "gavel", "sia")
#: The artifact README's figures for Philly on 1,280 GPUs, 2,000 rounds (reduction of avg JCT).
ARTIFACT_PHILLY = {"fcfs": 0.813, "elasticflow-ls": 0.805, "gavel": 0.766, "sia": 0.752}
#: The artifact's measured tables (paths relative to the data folder), for ``--measured``.
MEASURED = ("arena/measured_iter_time.csv", "arena/dp_memory_gb.csv")

SCENARIOS = {
    "philly": ("arena/traces/philly.csv?deadline_scale=5", "arena-1280", 600_000.0),
    "pai": ("arena/traces/pai.csv?deadline_scale=5", "arena-1280", 150_000.0),
    "testbed": ("arena/traces/testbed.csv?iteration_divisor=1", "testbed-64", math.inf),
    "itp-cluster10": ("itp/cluster10.csv?seed=0", "arena-1280", math.inf),
}


def portable(board: pd.DataFrame, data: Path, version: str) -> pd.DataFrame:
    """The leaderboard with trace specs relative to ``data`` and a ``code_version`` column."""
    prefix = str(data) + "/"
    traces = board["trace"].map(lambda t: t[len(prefix) :] if t.startswith(prefix) else t)
    return board.assign(trace=traces, code_version=version)


def summarise(name: str, cluster: str, horizon: float, mode: str, wall_s: float, board: pd.DataFrame) -> list[str]:
    """The printed comparison of Arena with each baseline for one scenario."""
    row = {r.policy: r for r in board.itertuples()}
    a = row["arena"]
    lines = [
        f"== {name}: {cluster}, horizon {horizon:g} s, {mode}, {wall_s:.0f} s; arena: "
        f"{a.jobs_finished:.0f}/{a.jobs_submitted:.0f} finished, avg JCT {a.avg_jct_s / 3600:.2f} h, "
        f"throughput avg {a.avg_throughput:,.0f} / peak {a.peak_throughput:,.0f}",
        f"{'baseline':15s} {'JCT reduction':>14s} {'artifact':>9s} {'jobs x':>7s} {'avg thr x':>9s} "
        f"{'peak thr x':>10s} {'finished':>8s}",
    ]
    for b in BASELINES:
        r = row[b]
        reduction = (r.padded_jct_s - a.padded_jct_s) / r.padded_jct_s
        paper = ARTIFACT_PHILLY.get(b) if name == "philly" else None
        lines.append(
            f"{b:15s} {100 * reduction:13.1f}% {'' if paper is None else f'{100 * paper:.1f}%':>9s} "
            f"{a.jobs_finished / max(r.jobs_finished, 1):7.2f} "
            f"{a.avg_throughput / max(r.avg_throughput, 1e-9):9.2f} "
            f"{a.peak_throughput / max(r.peak_throughput, 1e-9):10.2f} {r.jobs_finished:8.0f}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS))
    parser.add_argument(
        "--measured",
        action="store_true",
        help="ground truth and belief = the artifact's measured tables (default: the estimator)",
    )
    parser.add_argument("--event-driven", action="store_true", help="decide on every event instead of 300 s rounds")
    parser.add_argument("--workers", type=int, default=None, help="local worker processes (default 2)")
    parser.add_argument("--ray", metavar="ADDRESS", default=None, help="run on the Ray cluster at ADDRESS (or 'auto')")
    args = parser.parse_args()
    names = args.scenarios.split(",")
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    if args.ray is not None and args.workers is not None:
        parser.error("give --workers (local processes) or --ray (a cluster), not both")
    if not DATA.is_dir():
        raise SystemExit("needs the shared data folder ../shared/data beside the repository")
    if args.ray is not None:
        try:
            connect_ray(args.ray)
        except ValueError as exc:
            parser.error(str(exc))
    workers = 1 if args.ray is not None else args.workers or 2
    OUT.mkdir(parents=True, exist_ok=True)
    perf = "measured:" + ",".join(str(DATA / p) for p in MEASURED) if args.measured else "estimator"
    suffix = ("-measured" if args.measured else "") + ("-event" if args.event_driven else "")
    mode = "event-driven" if args.event_driven else "300 s rounds"
    version = code_version()
    policies = ("arena", *BASELINES)
    summary = [f"perf: {'measured tables' if args.measured else 'estimator'}; code version {version}"]
    for name in names:
        trace, cluster, horizon = SCENARIOS[name]
        base = RunConfig(
            policy="arena",
            trace=str(DATA / trace),
            cluster=cluster,
            perf=perf,
            horizon_s=horizon,
            round_s=None if args.event_driven else 300.0,
            event_decisions=args.event_driven,
        )
        t0 = time.perf_counter()
        _, board = compare(
            CompareConfig(policies, (base.trace,), (0,), base, workers, "arena", ray=args.ray),
            REPO / "results" / "reproduction" / f"{name}{suffix}",
            plots=False,
            replace=True,  # this script's own working copy of the runs, rewritten by every run of it
        )
        portable(board, DATA, version).to_csv(OUT / f"{name}{suffix}.csv", index=False)
        lines = summarise(name, cluster, horizon, mode, time.perf_counter() - t0, board)
        print("\n" + "\n".join(lines), flush=True)
        summary += ["", *lines]
    summary += ["", "artifact (philly): up to 1.45x jobs, 1.55x avg / 1.58x peak throughput"]
    print(summary[-1])
    if set(names) == set(SCENARIOS):  # a partial run leaves the committed summary of all scenarios alone
        (OUT / f"summary{suffix or '-rounds'}.txt").write_text("\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
