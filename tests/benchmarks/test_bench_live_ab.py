"""The live A/B benchmark: its traces, its deploy order, its ratio table, its arguments, and a tiny real run."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from arena_gym.harness.experiment import load_jobs
from arena_gym.registry import make_perf
from real_runner.launchers.local import find_processes
from real_runner.testbed import load_testbed
from tests.helpers import load_script, run_benchmark

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_live_ab.py"


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    """The benchmark script as a module (it imports ``bench_deploy`` from its own folder)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(SCRIPT.parent))
        yield load_script("bench_live_ab", "benchmarks")


def run(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return run_benchmark("bench_live_ab", *args, timeout=timeout)


def test_each_seed_traces_sixteen_mixed_jobs_for_two_devices_on_the_same_menu(bench: ModuleType) -> None:
    cluster = load_testbed("cpu-2").cluster()
    perf = make_perf("estimator", cluster, 0)
    traces = [load_jobs(bench.trace_spec(seed), cluster, perf, seed) for seed in range(3)]
    for jobs in traces:
        assert len(jobs) == 16
        assert {j.requested_gpus for j in jobs} == {1, 2}
        assert {j.model.name for j in jobs} == {"gpt__tiny", "gpt__mini"}
        lengths = [j.iterations for j in jobs]
        assert max(lengths) >= 10 * min(lengths) and len(set(lengths)) >= 8  # order matters
        assert all(j.submit_time >= 59.0 for j in jobs[12:])  # the second wave, a span later
    menus = [sorted((j.model.name, j.global_batch, j.iterations, j.requested_gpus) for j in jobs) for jobs in traces]
    assert menus[0] == menus[1] == menus[2]  # the seed moves arrivals only
    assert [j.submit_time for j in traces[0]] != [j.submit_time for j in traces[1]]
    assert bench.trace_spec(4, jobs=20, work=0.25, span_s=30) == "live:n_jobs=20,span_s=30,seed=4,work=0.25,max_gpus=2"


def test_policy_a_goes_first_on_even_seeds_and_last_on_odd_ones(bench: ModuleType) -> None:
    labels = ["a", "b1", "b2"]
    assert bench.deploy_order(0, labels) == ["a", "b1", "b2"]
    assert bench.deploy_order(1, labels) == ["b2", "b1", "a"]
    assert bench.deploy_order(2, ["a", "b"]) == ["a", "b"] and bench.deploy_order(3, ["a", "b"]) == ["b", "a"]


def deploy(label: str, seed: int, live: float, sim: float, load: float = 1.0, twin: float = 1.0) -> dict[str, object]:
    return {
        "label": label,
        "seed": seed,
        "avg_jct_s": live,
        "sim_avg_jct_s": sim,
        "twin_avg_jct_s": twin,
        "load_1m": load,
    }


def test_the_ratio_table_compares_b_over_a_live_and_simulated_in_points(bench: ModuleType) -> None:
    deploys = [
        deploy("a", 0, live=100.0, sim=80.0, load=0.5, twin=90.0),
        deploy("b", 0, live=90.0, sim=76.0, load=1.5, twin=99.0),
        deploy("c", 0, live=70.0, sim=72.0),
        deploy("b", 1, live=50.0, sim=40.0),
        deploy("a", 1, live=40.0, sim=40.0),
        {"label": "c", "seed": 1, "error": "exit 1", "load_1m": 2.0},
    ]
    rows = bench.ratio_rows(deploys, "a", ["b", "c"])
    assert [(r["seed"], r["b"]) for r in rows] == [(0, "b"), (0, "c"), (1, "b"), (1, "c")]
    b0, c0, b1, c1 = rows
    assert b0["sim_ratio"] == pytest.approx(0.95) and b0["live_ratio"] == pytest.approx(0.90)
    assert b0["diff_points"] == pytest.approx(-5.0) and b0["within_goal"]
    assert (b0["load_a"], b0["load_b"]) == (0.5, 1.5)
    assert b0["twin_ratio"] == pytest.approx(1.1) and (b0["twin_avg_jct_a_s"], b0["twin_avg_jct_b_s"]) == (90.0, 99.0)
    assert c0["diff_points"] == pytest.approx(100 * (0.70 - 0.90)) and not c0["within_goal"]
    assert b1["sim_ratio"] == pytest.approx(1.0) and b1["live_ratio"] == pytest.approx(1.25) and not b1["within_goal"]
    assert math.isnan(c1["live_ratio"]) and math.isnan(c1["diff_points"]) and not c1["within_goal"]
    assert math.isnan(c1["twin_ratio"])


def test_a_deploys_simulated_figures_are_the_prediction_and_the_twins_are_kept_beside_them(
    bench: ModuleType, tmp_path: Path
) -> None:
    twin = {"avg_jct_s": 50.0, "sim_avg_jct_s": 48.0, "sim_avg_jct_error": -0.04, "sim_start_s": 5.2}
    (tmp_path / "sim_vs_live.json").write_text(
        json.dumps(
            {
                "avg_jct_sim_s": 48.0,
                "avg_jct_pred_s": 45.0,
                "avg_jct_pred_error": -0.1,
                "median_abs_job_pred_jct_error": 0.08,
                "pred_start_s_gpt__tiny": 4.6,
                "pred_start_s_gpt__mini": 4.7,
            }
        )
    )
    row = bench.with_prediction(twin, tmp_path)
    assert row == {
        "avg_jct_s": 50.0,
        "twin_avg_jct_s": 48.0,
        "twin_avg_jct_error": -0.04,
        "twin_start_s": 5.2,
        "sim_avg_jct_s": 45.0,
        "sim_avg_jct_error": -0.1,
        "sim_median_abs_job_error": 0.08,
        "sim_start_s": {"gpt__tiny": 4.6, "gpt__mini": 4.7},
    }
    failed = bench.with_prediction({"error": "exit 1"}, tmp_path)  # a failed deploy's leftovers are not read
    assert failed["sim_avg_jct_s"] is None and failed["sim_start_s"] == {}


def test_the_ratio_table_refuses_a_missing_or_doubled_deploy(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match="no deploy of b on seed 0"):
        bench.ratio_rows([deploy("a", 0, 1.0, 1.0)], "a", ["b"])
    with pytest.raises(ValueError, match="deploy of a on seed 0 given twice"):
        bench.ratio_rows([deploy("a", 0, 1.0, 1.0), deploy("a", 0, 2.0, 2.0)], "a", ["b"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--seeds", "0,x"), "expected comma-separated integers"),
        (("--seeds", "1,1"), "distinct integers >= 0"),
        (("--jobs", "0"), "--jobs must be >= 1"),
        (("--work", "0"), "--work must be in (0, 100]"),
        (("--b", "arena"), "none of them twice or A (arena)"),
    ],
)
def test_bad_arguments_stop_before_any_work(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = tmp_path / "ab.json"
    done = run(*args, "--perf", "estimator", "--out", str(out), "--runs", str(tmp_path / "runs"))
    assert done.returncode == 2 and message in done.stderr and not out.exists() and not (tmp_path / "runs").exists()


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_a_tiny_live_ab_deploys_both_policies_and_tabulates_their_ratios(tmp_path: Path) -> None:
    out, runs = tmp_path / "ab.json", tmp_path / "runs"
    done = run(
        *("--jobs", "2", "--work", "0.05", "--seeds", "0", "--perf", "estimator", "--b", "fcfs"),
        *("--out", str(out), "--runs", str(runs)),
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "quick look" in done.stdout and "pairs with the live ratio within 5 points" in done.stdout
    result = json.loads(out.read_text())
    assert result["config"]["protocol"] is False and result["code_version"]
    a, b = result["deploys"]
    assert (a["label"], b["label"]) == ("arena", "fcfs")
    for d in (a, b):
        assert d["jobs_finished"] == d["jobs"] == 2 and d["trajectories_ok"] == 2
        assert d["trace"] == "live:n_jobs=2,span_s=60,seed=0,work=0.05,max_gpus=2" and d["load_1m"] >= 0
    (row,) = result["ratios"]
    assert row["live_ratio"] == pytest.approx(b["avg_jct_s"] / a["avg_jct_s"])
    assert row["sim_ratio"] == pytest.approx(b["sim_avg_jct_s"] / a["sim_avg_jct_s"])
    assert row["twin_ratio"] == pytest.approx(b["twin_avg_jct_s"] / a["twin_avg_jct_s"])
    for d in (a, b):  # the simulated figures are the prediction's, from the deploy's own sim_vs_live.json
        summary = json.loads((runs / f"seed0-{d['label']}" / "sim_vs_live.json").read_text())
        assert d["sim_avg_jct_s"] == pytest.approx(summary["avg_jct_pred_s"])
        assert d["twin_avg_jct_s"] == pytest.approx(summary["avg_jct_sim_s"])
    assert row["diff_points"] == pytest.approx(100 * (row["live_ratio"] - row["sim_ratio"]))
    table = pd.read_csv(out.with_suffix(".csv"))
    assert list(table["b"]) == ["fcfs"] and table["live_ratio"].iloc[0] == pytest.approx(row["live_ratio"])
    assert find_processes(str(runs)) == []
