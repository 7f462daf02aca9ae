"""Statistics by trace: the hierarchical bootstrap (traces, then windows), trace-weighted means, per-trace rows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from arena_gym.harness.stats import (
    TRACE_COLUMNS,
    bootstrap_ci,
    by_trace_table,
    hierarchical_bootstrap_ci,
    paired_comparison,
    summary_table,
    trace_mean,
    trace_names,
)


def test_a_trace_of_one_window_weighs_as_much_as_a_trace_of_nine() -> None:
    # trace a: one window at 0; trace b: nine at 10. Windows weighted equally: mean 9, and a window
    # resample of 10 has k ~ Binomial(10, 0.1) zeros, so its 95% interval is [7, 10]. Traces weighted
    # equally: mean 5, and a resample draws two traces (each trace's windows are constant), so its
    # statistic is 0, 5 or 10 with probabilities 1/4, 1/2, 1/4: the 95% interval is [0, 10], the
    # 40% interval (quantiles 0.3 and 0.7) [5, 5].
    values = [0.0] + [10.0] * 9
    traces = ["a"] + ["b"] * 9
    assert float(np.mean(values)) == 9.0 and trace_mean(values, traces) == 5.0
    assert bootstrap_ci(values, seed=3) == (7.0, 10.0)
    assert hierarchical_bootstrap_ci(values, traces, seed=3) == (0.0, 10.0)
    assert hierarchical_bootstrap_ci(values, traces, level=0.4, seed=3) == (5.0, 5.0)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_with_one_trace_it_is_the_window_bootstrap_draw_for_draw(seed: int) -> None:
    values = np.random.default_rng(seed).lognormal(0.0, 1.0, size=17)
    assert hierarchical_bootstrap_ci(values, ["only"] * 17, 2000, seed=seed) == bootstrap_ci(values, 2000, seed=seed)


def test_the_interval_is_seeded_holds_the_trace_mean_and_is_nan_when_it_cannot_be_drawn() -> None:
    rng = np.random.default_rng(11)
    values = np.concatenate([rng.normal(1.0, 0.2, 20), rng.normal(2.0, 0.2, 12), rng.normal(4.0, 0.2, 5)])
    traces = ["x"] * 20 + ["y"] * 12 + ["z"] * 5
    lo, hi = hierarchical_bootstrap_ci(values, traces, seed=2)
    assert (lo, hi) == hierarchical_bootstrap_ci(values, traces, seed=2)
    assert lo < trace_mean(values, traces) < hi
    assert trace_mean(values, traces) == pytest.approx(
        (values[:20].mean() + values[20:32].mean() + values[32:].mean()) / 3
    )
    wlo, whi = bootstrap_ci(values, seed=2)
    assert hi - lo > whi - wlo  # three traces are a smaller sample than 37 windows
    assert all(math.isnan(v) for v in hierarchical_bootstrap_ci([1.0], ["a"]))
    assert all(math.isnan(v) for v in hierarchical_bootstrap_ci([1.0, math.inf], ["a", "b"]))
    with pytest.raises(ValueError, match="one trace per value, got 1 for 2"):
        hierarchical_bootstrap_ci([1.0, 2.0], ["a"])


def test_trace_names_are_short_unless_two_collide() -> None:
    specs = ["../shared/data/itp/cluster07.csv?seed=0", "synthetic:n_jobs=50,arrival=bursty"]
    assert trace_names(specs) == {specs[0]: "cluster07", specs[1]: "synthetic"}
    clash = ["synthetic:n_jobs=5", "synthetic:n_jobs=6"]
    assert trace_names(clash) == {s: s for s in clash}


def _table() -> pd.DataFrame:
    # two traces: t1 with windows w1, w2; t2 with w3. The reference r; policy p.
    rows = [
        ("w1", "t1.csv", "r", 10.0),
        ("w2", "t1.csv", "r", 20.0),
        ("w3", "t2.csv", "r", 40.0),
        ("w1", "t1.csv", "p", 5.0),
        ("w2", "t1.csv", "p", 30.0),
        ("w3", "t2.csv", "p", 20.0),
    ]
    return pd.DataFrame(rows, columns=["workload", "trace", "policy", "m"])


def test_the_summary_adds_the_trace_weighted_columns_to_the_pooled_ones() -> None:
    summary = summary_table(_table(), "m", "r", resamples=500).set_index("policy")
    p = summary.loc["p"]
    assert set(TRACE_COLUMNS) <= set(summary.columns)
    assert p["workloads"] == 3 and p["traces"] == 2
    # pooled: differences -5, +10, -20; ratios 0.5, 1.5, 0.5
    assert p["mean_diff"] == pytest.approx(-5.0) and p["mean_ratio"] == pytest.approx(2.5 / 3)
    # by trace: t1's mean difference 2.5 and ratio 1.0, t2's -20 and 0.5
    assert p["mean_diff_trace"] == pytest.approx((2.5 - 20.0) / 2)
    assert p["mean_ratio_trace"] == pytest.approx(0.75)
    assert p["diff_ci_trace_low"] <= p["mean_diff_trace"] <= p["diff_ci_trace_high"]
    assert p["ratio_ci_trace_low"] <= p["mean_ratio_trace"] <= p["ratio_ci_trace_high"]
    assert summary.loc["r", "mean_ratio_trace"] == 1.0 and summary.loc["r", "diff_ci_trace_high"] == 0.0
    alone = summary_table(_table().drop(columns=["trace"]), "m", "r", resamples=500).set_index("policy").loc["p"]
    assert alone["traces"] == 1 and alone["mean_ratio_trace"] == pytest.approx(alone["mean_ratio"])


def test_paired_comparison_without_traces_is_one_trace() -> None:
    x, y = [1.0, 4.0, 2.0, 8.0], [2.0, 2.0, 2.0, 2.0]
    result = paired_comparison(x, y, "p", "r", resamples=1000, seed=4)
    assert result.traces == 1 and result.mean_diff_trace == result.mean_diff == 1.75
    assert (result.diff_ci_trace_low, result.diff_ci_trace_high) == (result.diff_ci_low, result.diff_ci_high)
    assert (result.ratio_ci_trace_low, result.ratio_ci_trace_high) == bootstrap_ci([0.5, 2.0, 1.0, 4.0], 1000, seed=4)


def test_by_trace_rows_hold_each_traces_windows_alone() -> None:
    rows = by_trace_table(_table(), "m", "r").set_index(["trace", "policy"])
    assert list(rows.index) == [("t1", "r"), ("t1", "p"), ("t2", "r"), ("t2", "p")]
    t1 = rows.loc[("t1", "p")]
    assert (t1["windows"], t1["wins"], t1["ties"], t1["losses"]) == (2, 1, 0, 1)
    assert (t1["mean"], t1["reference_mean"], t1["mean_diff"], t1["mean_ratio"]) == (17.5, 15.0, 2.5, 1.0)
    t2 = rows.loc[("t2", "p")]
    assert (t2["windows"], t2["wins"], t2["mean_diff"], t2["mean_ratio"]) == (1, 1, -20.0, 0.5)
    assert rows.loc[("t2", "r"), "ties"] == 1
