"""Every committed evaluation still follows from the code: a sample of its windows re-run matches its per-workload table.

Each directory ``scripts/regenerate_results.py`` finds under ``benchmarks/results`` is re-run on
three of its workloads (the first, the middle and the last it records) with the config it
records; every policy's average JCT and jobs finished must be within 1% of the committed
``per_workload.csv`` (the lookahead searches' samples, minutes a window, in the slow suite). A
stale table fails here: regenerate it with ``python scripts/regenerate_results.py DIR``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from arena_gym.harness.evaluate import recorded_config
from arena_gym.harness.scoring import Evaluator, parse_policy_spec
from tests.conftest import REPO
from tests.helpers import load_script

DIRS = load_script("regenerate_results").evaluation_dirs()
TOLERANCE = 0.01
#: Policies whose sample re-run takes minutes a window (rollouts in sampled worlds): checked by ``make test-slow``.
SEARCHES = frozenset({"lookahead", "lookahead-oracle"})


def _cases() -> list:
    cases = []
    for directory in DIRS:
        for spec in recorded_config(directory).policies:
            label, name = parse_policy_spec(spec)
            marks = (pytest.mark.slow,) if name in SEARCHES else ()
            cases.append(pytest.param(directory, label, id=f"{directory.relative_to(REPO)}:{label}", marks=marks))
    return cases


def test_the_committed_evaluations_are_found() -> None:
    names = {d.relative_to(REPO).as_posix() for d in DIRS}
    assert {"benchmarks/results/search/real-test", "benchmarks/results/eval_real_test"} <= names


@pytest.mark.parametrize(("directory", "label"), _cases())
def test_a_sample_reruns_to_the_committed_figures(
    directory: Path, label: str, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # recorded model paths are relative to the repository
    config = recorded_config(directory)
    recorded = json.loads((directory / "config.json").read_text(encoding="utf-8"))["workloads"]
    sample = {recorded[0], recorded[len(recorded) // 2], recorded[-1]}
    suite = dataclasses.replace(config, data_dir=str(shared_data)).build_suite()
    workloads = [w for w in suite.workloads() if w.label in sample]
    assert len(workloads) == len(sample), f"{directory}: the suite no longer holds {sorted(sample)}"
    spec = dict(map(parse_policy_spec, config.policies))[label]
    fresh = Evaluator(suite.parts[0].config, workloads).score_specs({label: spec}, config.seed)
    committed = pd.read_csv(directory / "per_workload.csv")
    committed = committed[(committed["policy"] == label) & committed["workload"].isin(sample)]
    merged = fresh.merge(committed, on="workload", suffixes=("", "_committed"))
    assert len(merged) == len(sample)
    for row in merged.itertuples():
        assert row.jobs_finished == row.jobs_finished_committed, f"{label} on {row.workload}: jobs finished"
        assert math.isclose(row.avg_jct_s, row.avg_jct_s_committed, rel_tol=TOLERANCE), (
            f"{label} on {row.workload}: average JCT {row.avg_jct_s:.1f} s now, {row.avg_jct_s_committed:.1f} s "
            f"committed ({directory.relative_to(REPO)} is stale: python scripts/regenerate_results.py)"
        )
