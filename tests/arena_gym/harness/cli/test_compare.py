"""``arena-gym compare``: the paired view of its grid, and the same workload seen by ``evaluate``."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from arena_gym.harness.cli import main
from arena_gym.harness.results import METRIC_COLUMNS, PADDED_COLUMN
from arena_gym.metrics import WALL_CLOCK_KEYS
from traces import resolve_trace, save_trace


def test_compare_with_a_reference_prints_and_writes_the_paired_comparison(tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", "--policies", "fcfs,srtf", "--trace", "synthetic:n_jobs=12", "--seeds", "0,1,2"]
    assert main([*argv, "--cluster", "tiny", "--reference", "fcfs", "--no-plots", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    paired = pd.read_csv(out / "paired.csv").set_index("policy")
    assert list(paired.index) == ["fcfs", "srtf"] and set(paired["workloads"]) == {3}
    board = pd.read_csv(out / "leaderboard.csv").pivot(index="seed", columns="policy", values="padded_jct_s")
    assert paired.loc["srtf", "mean"] == board["srtf"].mean()
    assert "paired against fcfs:" in printed and (out / "paired.md").read_text() in printed


def test_compare_and_evaluate_score_a_whole_trace_file_alike(tmp_path, capsys) -> None:
    """Where the two views hold the same workload (a trace file, whole, as recorded), they agree."""
    trace = resolve_trace("synthetic:n_jobs=14,gpu_types=a40+a10,max_gpus=4", seed=3)
    path = str(save_trace(trace, tmp_path / "t.csv"))
    common = ["--policies", "fcfs,arena", "--cluster", "tiny", "--trace", path]
    assert main(["compare", *common, "--reference", "arena", "--no-plots", "--out", str(tmp_path / "c")]) == 0
    custom = ["--suite", "custom", "--split", "all", "--window-jobs", "0", "--loads", "1", "--load-basis", "factor"]
    assert main(["evaluate", *common, *custom, "--no-bounds", "--no-progress", "--out", str(tmp_path / "e")]) == 0
    capsys.readouterr()
    board = pd.read_csv(tmp_path / "c" / "leaderboard.csv").set_index("policy")
    table = pd.read_csv(tmp_path / "e" / "per_workload.csv").set_index("policy")
    assert list(table["jobs_total"]) == [14, 14]
    figures = [c for c in (*METRIC_COLUMNS, PADDED_COLUMN) if c not in WALL_CLOCK_KEYS]
    assert set(figures) <= set(board.columns) & set(table.columns)  # one column set, one name per metric
    for policy in ("fcfs", "arena"):
        pd.testing.assert_series_equal(table.loc[policy, figures], board.loc[policy, figures], check_dtype=False)
    paired = pd.read_csv(tmp_path / "c" / "paired.csv").set_index("policy")
    summary = pd.read_csv(tmp_path / "e" / "summary.csv").set_index("policy")
    assert paired.loc["fcfs", "mean_ratio"] == summary.loc["fcfs", "mean_ratio"]


def test_compare_and_evaluate_take_a_cluster_variant_and_the_same_simulator_settings(tmp_path, capsys) -> None:
    """One cluster resolver and one set of simulator options: ``testbed-64[a40=8]``, rounds and overheads."""
    trace = resolve_trace("synthetic:n_jobs=10,gpu_types=a40+a10,max_gpus=4", seed=5)
    path = str(save_trace(trace, tmp_path / "t.csv"))
    common = ["--policies", "fcfs,arena", "--cluster", "testbed-64[a40=8]", "--trace", path]
    knobs = ["--round", "600", "--overhead-scale", "3"]
    assert main(["compare", *common, *knobs, "--no-plots", "--out", str(tmp_path / "c")]) == 0
    custom = ["--suite", "custom", "--split", "all", "--window-jobs", "0", "--loads", "1", "--load-basis", "factor"]
    evaluate = ["evaluate", *common, *custom, "--no-bounds", "--no-progress"]
    assert main([*evaluate, *knobs, "--out", str(tmp_path / "e")]) == 0
    assert main([*evaluate, "--out", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    board = pd.read_csv(tmp_path / "c" / "leaderboard.csv").set_index("policy")
    table = pd.read_csv(tmp_path / "e" / "per_workload.csv").set_index("policy")
    plain = pd.read_csv(tmp_path / "plain" / "per_workload.csv").set_index("policy")
    assert set(table["cluster"]) == {"testbed-64[a40=8]"}
    assert table.loc["arena", "avg_jct_s"] == board.loc["arena", "avg_jct_s"]
    assert table.loc["arena", "avg_jct_s"] != plain.loc["arena", "avg_jct_s"]  # the settings reached the simulator


def test_evaluate_refuses_deciding_on_rounds_only_without_a_round(tmp_path, capsys) -> None:
    args = ["evaluate", "--policies", "fcfs", "--reference", "fcfs", "--suite", "custom", "--cluster", "tiny"]
    args += ["--trace", "synthetic:n_jobs=6", "--no-event-decisions", "--out", str(tmp_path / "e")]
    assert main(args) == 2
    assert "round" in capsys.readouterr().err and not (tmp_path / "e").exists()


def test_compare_and_evaluate_take_the_same_scenario_options_alike(tmp_path, capsys) -> None:
    """A horizon and a belief given to each command: the same per-workload figures, and not the plain run's."""
    trace = resolve_trace("synthetic:n_jobs=14,gpu_types=a40+a10,max_gpus=4", seed=3)
    path = str(save_trace(trace, tmp_path / "t.csv"))
    common = ["--policies", "fcfs,arena", "--cluster", "tiny", "--trace", path]
    options = ["--horizon", "700000", "--belief", "noisy:0.5", "--perf", "estimator"]
    assert main(["compare", *common, *options, "--no-plots", "--out", str(tmp_path / "c")]) == 0
    custom = ["--suite", "custom", "--split", "all", "--window-jobs", "0", "--loads", "1", "--load-basis", "factor"]
    evaluate = ["evaluate", *common, *custom, "--no-bounds", "--no-progress"]
    assert main([*evaluate, *options, "--out", str(tmp_path / "e")]) == 0
    assert main([*evaluate, "--out", str(tmp_path / "plain")]) == 0
    capsys.readouterr()
    board = pd.read_csv(tmp_path / "c" / "leaderboard.csv").set_index("policy")
    table = pd.read_csv(tmp_path / "e" / "per_workload.csv").set_index("policy")
    plain = pd.read_csv(tmp_path / "plain" / "per_workload.csv").set_index("policy")
    figures = [c for c in (*METRIC_COLUMNS, PADDED_COLUMN) if c not in WALL_CLOCK_KEYS]
    for policy in ("fcfs", "arena"):
        pd.testing.assert_series_equal(table.loc[policy, figures], board.loc[policy, figures], check_dtype=False)
    assert table.loc["fcfs", "jobs_finished"] < plain.loc["fcfs", "jobs_finished"]  # the horizon reached the simulator
    assert table.loc["arena", "avg_jct_s"] != plain.loc["arena", "avg_jct_s"]
    recorded = json.loads((tmp_path / "e" / "config.json").read_text())["evaluate"]["scenario"]
    assert (recorded["horizon_s"], recorded["belief"], recorded["perf"]) == (700000.0, "noisy:0.5", "estimator")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--horizon", "-3"], "argument --horizon: must be > 0: '-3'"),
        (["--horizon", "soon"], "argument --horizon: not a number: 'soon'"),
        (["--perf", "magic"], "unknown performance model 'magic'"),
        (["--belief", "noisy:1e9"], "noisy:SIGMA needs 0 <= SIGMA <= 10, got '1e9'"),
        (["--model-spec", "missing.json"], "argument --model-spec: missing.json: No such file or directory"),
        (["--overhead-scale", "-1"], "argument --overhead-scale: must be finite and >= 0"),
        (["--overhead-scale", "1e307"], "--overhead-scale 1e+307 makes the overheads overflow"),
        (["--no-event-decisions"], "--no-event-decisions needs --round"),
    ],
)
def test_evaluate_refuses_bad_scenario_options_in_one_line(tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "e"
    argv = ["evaluate", "--policies", "fcfs", "--reference", "fcfs", "--suite", "custom", "--cluster", "tiny"]
    assert main([*argv, "--trace", "synthetic:n_jobs=6", "--no-progress", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and not out.exists()
