"""Benchmark: what a deadline tells a non-clairvoyant policy, before and after deadlines carry their source.

The real traces' deadlines are derived from the true length (ITP: ``submit + 1.5 x iterations x
iter_time``; the artifact's CSVs the same way from the duration), so ordering a queue by
deadline is ordering it by length. The probes ``tests.probes:DeadlineArena`` (Arena walking its
queue by earliest deadline) and ``tests.probes:WeightedDeadlineArena`` (the same built like
``arena-srpt-w``) read no hidden field and declare themselves non-clairvoyant; they are
registered nowhere and built by ``module:Class`` as a plug-in would be.

Protocol: the ``real-test`` development suite (58 windows; needs ``../shared/data``), three
versions of every window: ``as loaded`` (derived deadlines, hidden from non-clairvoyant
policies), ``removed`` (no deadlines at all) and ``declared`` (the same deadlines marked as
declared by users: what every policy saw before deadlines carried a source). Per version, each
policy's mean ratio of padded average JCT to Arena's over the windows, paired
(:func:`arena_gym.harness.stats.summary_table`), beside the clairvoyant ``arena-srpt`` and
``arena-srpt-w``. JCTs are deterministic; no timing is measured. Goal: each probe as loaded
within 0.5% of the probe with deadlines removed.

Writes ``benchmarks/results/integrity/deadline_probe.json`` (``--out``): config, seed, code
version, machine and every figure.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_integrity.py [--workers 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the probes live in the test package (registered nowhere)

from arena_gym.harness.out_dirs import machine, shown_path  # noqa: E402
from arena_gym.harness.scoring import Evaluator  # noqa: E402
from arena_gym.harness.stats import summary_table  # noqa: E402
from arena_gym.harness.suites import get_suite  # noqa: E402
from arena_gym.outputs import code_version, write_json  # noqa: E402
from arena_gym.types import DeadlineSource  # noqa: E402
from envs import Workload  # noqa: E402

DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "integrity" / "deadline_probe.json"
SEED = 0
METRIC = "padded_jct_s"
TOLERANCE = 0.005
POLICIES = {
    "arena": "arena",
    "deadline-arena": "tests.probes:DeadlineArena",
    "deadline-arena-w": "tests.probes:WeightedDeadlineArena",
    "arena-srpt": "arena-srpt",
    "arena-srpt-w": "arena-srpt-w",
}
PROBES = ("deadline-arena", "deadline-arena-w")


def versions(workloads: list[Workload]) -> dict[str, list[Workload]]:
    """Each window as loaded, with its deadlines removed, and with them declared."""

    def each(change: dict[str, Any]) -> list[Workload]:
        return [dataclasses.replace(w, jobs=tuple(dataclasses.replace(j, **change) for j in w.jobs)) for w in workloads]

    return {
        "as loaded": workloads,
        "removed": each({"deadline": None}),
        "declared": each({"deadline_source": DeadlineSource.DECLARED}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="local worker processes")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not DATA.is_dir():
        raise SystemExit(f"error: the real-test suite needs the data folder {DATA}")
    load = os.getloadavg()
    suite = get_suite("real-test", str(DATA))
    workloads = suite.workloads()
    derived = sum(j.deadline_source is DeadlineSource.DERIVED for w in workloads for j in w.jobs if j.deadline)
    figures: dict[str, Any] = {}
    for version, windows in versions(workloads).items():
        table = Evaluator(suite.parts[0].config, windows).score_specs(POLICIES, SEED, args.workers, progress=True)
        summary = summary_table(table, METRIC, "arena").set_index("policy")
        figures[version] = {
            label: {k: summary.loc[label, k].item() for k in ("mean", "mean_ratio", "wins", "ties", "losses")}
            for label in POLICIES
        }
        logging.info("%s: %s", version, {k: round(v["mean_ratio"], 4) for k, v in figures[version].items()})
    goals = {
        probe: {
            "as_loaded_vs_removed": figures["as loaded"][probe]["mean"] / figures["removed"][probe]["mean"],
            "met": abs(figures["as loaded"][probe]["mean"] / figures["removed"][probe]["mean"] - 1) <= TOLERANCE,
        }
        for probe in PROBES
    }
    result = {
        "config": {"suite": suite.name, "workloads": len(workloads), "metric": METRIC, "policies": POLICIES},
        "seed": SEED,
        "code_version": code_version(),
        "machine": machine(load),
        "derived_deadlines": derived,
        "figures": figures,
        "goals": {"tolerance": TOLERANCE, **goals},
    }
    write_json(args.out, result)
    for version, rows in figures.items():
        print(f"{version:>10}: " + ", ".join(f"{k} {v['mean_ratio']:.4f}" for k, v in rows.items()))
    for probe, goal in goals.items():
        print(
            f"{probe}: as loaded / deadlines removed = {goal['as_loaded_vs_removed']:.4f} (goal within 0.5%: "
            f"{'met' if goal['met'] else 'MISSED'})"
        )
    print(f"wrote {shown_path(args.out, REPO)}")


if __name__ == "__main__":
    main()
