"""The ablation benchmark: the one-row weights, the ladder's comparisons and its files, on two synthetic windows."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.residual.priority import ResidualWeights

REPO = Path(__file__).resolve().parents[2]


def bench():
    spec = importlib.util.spec_from_file_location("bench_ablation", REPO / "benchmarks" / "bench_ablation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_one_row_network_keeps_that_row_and_zeroes_the_other():
    b = bench()
    weights = ResidualWeights.load(b.WEIGHTS)
    order = b.one_row_weights(weights, "order")
    assert order.order == weights.order and not any(order.urgency) and any(weights.urgency)
    urgency = b.one_row_weights(weights, "urgency")
    assert urgency.urgency == weights.urgency and not any(urgency.order)
    assert urgency.clip == weights.clip and urgency.belief == weights.belief
    assert "zeroed" in urgency.trained["ablation"]
    with pytest.raises(ValueError, match="keep must be order or urgency"):
        b.one_row_weights(weights, "sizing")


@pytest.mark.xdist_group("processes")
def test_the_ladder_compares_each_rung_with_the_one_before_on_the_same_windows(tmp_path, monkeypatch):
    b = bench()
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "ablation"
    assert (
        b.main(
            [
                "--suite",
                "synthetic",
                "--limit",
                "2",
                "--workers",
                "1",
                "--resamples",
                "200",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    table = pd.read_csv(out / "ablation.csv")
    table["compared_with"] = table["compared_with"].fillna("")
    assert list(table["rung"]) == [name for name, _, _ in b.LADDER] + [name for name, _, _, _ in b.SIDE]
    assert list(table["compared_with"]) == ["", *[name for name, _, _ in b.LADDER[:-1]], "arena", "urgency"]
    wide = pd.read_csv(out / "evaluate" / "per_workload.csv").pivot_table(
        index="workload", columns="policy", values="padded_jct_s", aggfunc="first"
    )
    assert len(wide) == 2
    for row in table.itertuples(index=False):
        assert row.arena_mean_ratio == pytest.approx(float(np.mean(wide[row.rung] / wide["arena"])))
        if row.compared_with:
            step = wide[row.rung] / wide[row.compared_with]
            assert row.step_mean_ratio == pytest.approx(float(np.mean(step)))
            assert row.step_wins == int((step < 1).sum()) and row.step_losses == int((step > 1).sum())
    assert table.loc[table["rung"] == "arena", "arena_mean_ratio"].item() == 1.0
    saved = ResidualWeights.load(out / "weights" / "residual-order.json")
    assert saved.order == ResidualWeights.load(b.WEIGHTS).order and not any(saved.urgency)
    record = json.loads((out / "ablation.json").read_text())
    assert record["config"]["suite"] == "synthetic" and record["code_version"]
    assert record["config"]["evaluate_options"] == ["--no-progress"]  # passed to evaluate as they are
    evaluated = json.loads((out / "evaluate" / "config.json").read_text())["evaluate"]
    assert evaluated["progress"] is False
    # paths recorded relative to where they lie (the repository, the working directory), no machine paths
    assert record["config"]["weights"] == "benchmarks/results/residual/train-tuned/residual.json"
    assert evaluated["out_dir"] == "ablation/evaluate"
    assert record["config"]["policies"]["learned-order"].endswith("residual-order.json")
    assert (out / "ablation.md").read_text().startswith("| rung | adds |")


def test_a_sizing_file_that_changes_more_than_its_sizing_row_is_refused(tmp_path):
    b = bench()
    weights = ResidualWeights.load(b.WEIGHTS)
    sized = weights.with_heads(("size",), np.full(len(weights.size), 0.1))
    assert b.policy_specs(b.WEIGHTS, sized.save(tmp_path / "sized.json"), tmp_path / "a")["sizing"].endswith(
        "sized.json"
    )
    for other in (sized.with_vector(weights.vector + 0.5), weights):  # order and urgency moved; no sizing row
        path = other.save(tmp_path / "other.json")
        with pytest.raises(ValueError, match="other.json: not .*residual.json's network with a sizing row"):
            b.policy_specs(b.WEIGHTS, path, tmp_path / "b")
