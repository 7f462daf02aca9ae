"""Ablation: how much of the documented residual's gain over Arena each of its pieces brings.

The documented agent is Arena plus a ladder of pieces, each a registered policy or a weights file
that adds exactly one to the rung before it:

====================  ==========================================================================
rung                  adds
====================  ==========================================================================
``arena``             the paper's heuristic (its own GPU cap, its own order)
``order``             ``arena-gittins``: the queue and the restarts ordered by the belief's Gittins index
``scale``             ``arena-gittins-adapt``: the belief's lengths at the episode's inferred work scale
``cap``               ``arena-gittins-32``: up to 32 GPUs per job
``urgency``           ``arena-gittins-32-f``: for a newcomer, shrink the jobs whose loss costs fewest
                      expected completions (the base every residual starts from)
``learned-order``     the residual's learned order multipliers alone (its urgency row zeroed)
``learned``           the documented residual (both rows)
``sizing``            the same network with a learned sizing row (``--sizing``: each job's GPU
                      target for the upgrade trial, up to 128 GPUs)
====================  ==========================================================================

Beside the ladder, two single-piece rows: ``arena-32`` (the cap on Arena's own order) and
``learned-urgency`` (the residual's urgency multipliers alone).

Protocol: refuses a ``--sizing`` file whose order and urgency rows are not the documented ones (the
rung would then add more than its sizing row); writes the two one-row weights files next to the
results (the documented file with one row zeroed), runs ``arena-gym evaluate`` on ``--suite`` (default ``frozen-test``: a run there
is one more look at the test set and adds a row to its ledger) with Arena as reference, then
compares every rung with the rung before it on the same windows
(:func:`arena_gym.harness.stats.paired_comparison`: the mean ratio, wins, and the ratio's
interval by trace, traces weighted equally) and with Arena. Simulated JCTs are deterministic; no
timing is measured. Writes into ``--out``: ``weights/`` (the one-row files), ``evaluate/`` (the
evaluate results), ``ablation.csv``, ``ablation.json`` (config, seed, code version) and ``ablation.md``.

Options it does not know go to ``arena-gym evaluate`` as they are, e.g. the paper's benchmark, the
whole Philly trace as recorded on ``arena-1280`` (one workload: no interval)::

    python benchmarks/bench_ablation.py --suite custom --trace ../shared/data/arena/traces/philly.csv \
        --cluster arena-1280 --split all --window-jobs 0 --load-basis factor --loads 1 \
        --out benchmarks/results/ablation/philly-arena-1280

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_ablation.py [--suite frozen-test] [--workers 2] [--limit N] [EVALUATE OPTIONS]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.residual.priority import RESIDUAL_FEATURES, ResidualWeights
from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.harness.stats import paired_comparison, workload_traces
from arena_gym.outputs import code_version, write_json

REPO = Path(__file__).resolve().parents[1]
WEIGHTS = REPO / "benchmarks" / "results" / "residual" / "train-tuned" / "residual.json"
SIZING = REPO / "benchmarks" / "results" / "residual" / "train-sizing" / "residual.json"
RESULTS = REPO / "benchmarks" / "results" / "ablation"
METRIC = "padded_jct_s"
SEED = 0

#: (rung, what it adds, the policy spec: a name, or a weights file's role below), in ladder order.
LADDER: tuple[tuple[str, str, str], ...] = (
    ("arena", "Arena", "arena"),
    ("order", "Gittins order", "arena-gittins"),
    ("scale", "inferred work scale", "arena-gittins-adapt"),
    ("cap", "32 GPUs per job", "arena-gittins-32"),
    ("urgency", "urgency-weighted shrinking", "arena-gittins-32-f"),
    ("learned-order", "learned order multipliers", "weights:order"),
    ("learned", "learned urgency multipliers", "weights:both"),
    ("sizing", "learned sizing targets", "weights:sizing"),
)
#: Rows beside the ladder: (name, what it is, spec, the rung it is compared with).
SIDE: tuple[tuple[str, str, str, str], ...] = (
    ("arena-32", "32 GPUs per job on Arena's order", "arena-32", "arena"),
    ("learned-urgency", "learned urgency multipliers alone", "weights:urgency", "urgency"),
)


def one_row_weights(weights: ResidualWeights, keep: str) -> ResidualWeights:
    """The network with only its ``keep`` row (``order`` or ``urgency``); the other row zeroed."""
    zero = (0.0,) * len(RESIDUAL_FEATURES)
    trained = {**weights.trained, "ablation": f"only the {keep} row of the documented weights; the other zeroed"}
    if keep == "order":
        return dataclasses.replace(weights, urgency=zero, trained=trained)
    if keep == "urgency":
        return dataclasses.replace(weights, order=zero, trained=trained)
    raise ValueError(f"keep must be order or urgency, got {keep!r}")


def policy_specs(weights_path: Path, sizing_path: Path, out: Path) -> dict[str, str]:
    """Rung name -> policy spec, writing the one-row weights files under ``out/weights``."""
    weights, sized = ResidualWeights.load(weights_path), ResidualWeights.load(sizing_path)
    same = (sized.order, sized.urgency, sized.clip, sized.belief) == (
        weights.order,
        weights.urgency,
        weights.clip,
        weights.belief,
    )
    if not same or not any(sized.size):
        raise ValueError(f"{sizing_path}: not {weights_path}'s network with a sizing row")
    folder = out / "weights"
    folder.mkdir(parents=True, exist_ok=True)
    files = {"both": weights_path, "sizing": sizing_path}
    for keep in ("order", "urgency"):
        files[keep] = one_row_weights(weights, keep).save(folder / f"residual-{keep}.json")
    specs = {}
    for name, _, spec in (*LADDER, *(side[:3] for side in SIDE)):
        role = spec.removeprefix("weights:")
        specs[name] = f"residual:{shown_path(files[role], Path.cwd())}" if role != spec else spec
    return specs


def ladder_table(per_workload: pd.DataFrame, resamples: int = 10_000, seed: int = SEED) -> pd.DataFrame:
    """One row per rung and side row: against the rung before it (``step_*``) and against Arena (``arena_*``)."""
    wide = per_workload.pivot_table(index="workload", columns="policy", values=METRIC, aggfunc="first")
    traces = workload_traces(per_workload).reindex(wide.index).tolist()
    pairs = [(name, what, LADDER[i - 1][0] if i else None) for i, (name, what, _) in enumerate(LADDER)]
    pairs += [(name, what, before) for name, what, _, before in SIDE]
    rows = []
    for name, what, before in pairs:
        row: dict[str, Any] = {"rung": name, "adds": what, "compared_with": before or ""}
        against = [("arena", "arena")] + ([("step", before)] if before else [])
        for prefix, ref in against:
            cmp = paired_comparison(wide[name], wide[ref], name, ref, resamples, seed, traces)
            row |= {
                f"{prefix}_mean_ratio": cmp.mean_ratio,
                f"{prefix}_ratio_trace": cmp.mean_ratio_trace,
                f"{prefix}_ratio_trace_low": cmp.ratio_ci_trace_low,
                f"{prefix}_ratio_trace_high": cmp.ratio_ci_trace_high,
                f"{prefix}_wins": cmp.wins,
                f"{prefix}_losses": cmp.losses,
            }
        for trace, ratios in (wide[name] / wide["arena"]).groupby(np.asarray(traces)):
            row[f"arena_ratio_{trace}"] = float(ratios.mean())
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame) -> str:
    """The table as the docs show it: per rung its step and its standing against Arena."""
    pooled = {"arena_ratio_trace", "arena_ratio_trace_low", "arena_ratio_trace_high"}
    traces = [c.removeprefix("arena_ratio_") for c in table.columns if c.startswith("arena_ratio_") and c not in pooled]
    head = ["rung", "adds", "vs the rung before (by trace, 95% CI)", "wins/losses", "vs Arena", *traces]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.itertuples(index=False):
        row = r._asdict()
        step = (
            f"{row['step_ratio_trace']:.3f} [{row['step_ratio_trace_low']:.3f}, {row['step_ratio_trace_high']:.3f}]"
            f" vs {row['compared_with']}"
            if row["compared_with"]
            else ""
        )
        wins = f"{row['step_wins']:.0f}/{row['step_losses']:.0f}" if row["compared_with"] else ""
        cells = [row["rung"], row["adds"], step, wins, f"{row['arena_ratio_trace']:.3f}"]
        cells += [f"{row[f'arena_ratio_{t}']:.3f}" for t in traces]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="frozen-test", help="evaluate's suite (frozen-test: adds a ledger row)")
    parser.add_argument("--weights", type=Path, default=WEIGHTS, help="the documented residual's weights file")
    parser.add_argument("--sizing", type=Path, default=SIZING, help="those weights with a learned sizing row")
    parser.add_argument("--workers", type=int, default=2, help="evaluate's worker processes")
    parser.add_argument("--limit", type=int, default=0, help="at most N windows, evenly spaced (0 = all)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: results/ablation/SUITE)")
    args, passed = parser.parse_known_args(argv)
    args.out = args.out or RESULTS / args.suite
    load_before = os.getloadavg()
    try:
        specs = policy_specs(args.weights, args.sizing, args.out)
    except ValueError as err:
        parser.error(str(err))
    policies = ",".join(f"{name}={spec}" for name, spec in specs.items())
    command = [sys.executable, "-m", "arena_gym", "evaluate", "--suite", args.suite, "--reference", "arena"]
    command += ["--policies", policies, "--workers", str(args.workers), "--limit", str(args.limit)]
    command += ["--seed", str(SEED), "--resamples", str(args.resamples), "--no-bounds", "--replace"]
    command += ["--out", shown_path(args.out / "evaluate", Path.cwd()), *passed]  # evaluate records it
    print("$", " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    table = ladder_table(pd.read_csv(args.out / "evaluate" / "per_workload.csv"), args.resamples)
    table.to_csv(args.out / "ablation.csv", index=False)
    (args.out / "ablation.md").write_text(markdown(table))
    config = {k: shown_path(v, REPO) if isinstance(v, Path) else v for k, v in vars(args).items()}
    write_json(
        args.out / "ablation.json",
        {
            "config": {**config, "evaluate_options": passed, "policies": specs, "seed": SEED, "metric": METRIC},
            "code_version": code_version(),
            "machine": machine(load_before),
            "rows": json.loads(table.to_json(orient="records")),
        },
    )
    print(markdown(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
