"""The restart-cap benchmark on a small case: the default cap is Arena itself, a cap of one changes decisions,
and its arguments are checked before any work."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agents.arena import ArenaPolicy
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.suites import get_suite
from tests.helpers import run_benchmark

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return run_benchmark("bench_restart_cap", *args, timeout=timeout)


@pytest.mark.timeout(900)
def test_the_default_cap_is_arena_and_a_cap_of_one_changes_decisions(tmp_path) -> None:
    out = tmp_path / "cap.json"
    done = run("--reps", "1", "--caps", "100,1", "--jobs", "40", "--data", str(tmp_path / "none"), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["config"]["caps"] == [100, 1] and result["code_version"]
    default, one = result["results"]["overloaded"]
    assert default["cap"] == 100 and default["cpu_vs_default"] == 1.0 and default["avg_jct_vs_default"] == 1.0
    assert default["jobs_finished"] == one["jobs_finished"] == 40
    windows = result["results"]["windows"]
    assert windows["suite"] == "synthetic" and windows["workloads"] == 20
    base, capped = windows["caps"]
    assert (base["mean_ratio"], base["ties"]) == (1.0, 20)
    assert capped["ties"] < 20  # one fit per departure is not Arena's trial
    # the default cap's mean average JCT is Arena's on the same suite
    suite = get_suite("synthetic")
    arena = Evaluator(suite.parts[0].config, suite.workloads()).run(ArenaPolicy())
    assert base["mean_avg_jct_s"] == pytest.approx(arena["avg_jct_s"].mean(), rel=1e-12)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--caps", "30,10"), "including the default 100"),
        (("--caps", "100,x"), "expected comma-separated integers"),
        (("--caps", "100,0"), "distinct integers >= 1"),
        (("--reps", "0"), "--reps must be >= 1"),
    ],
)
def test_bad_arguments_stop_before_any_work(tmp_path, args: tuple[str, ...], message: str) -> None:
    done = run(*args, "--out", str(tmp_path / "cap.json"), timeout=120)
    assert done.returncode == 2 and message in done.stderr and not (tmp_path / "cap.json").exists()


def test_the_committed_real_test_figures_follow_from_the_code() -> None:
    data = REPO.parent / "shared" / "data"
    if not data.is_dir():
        pytest.skip("needs ../shared/data (the real-test windows)")
    committed = json.loads((REPO / "benchmarks" / "results" / "decision_cost" / "restart_cap.json").read_text())
    rows = {row["cap"]: row for row in committed["results"]["windows"]["caps"]}
    suite = get_suite("real-test", str(data))
    evaluator = Evaluator(suite.parts[0].config, suite.workloads())
    for cap in (100, 3):
        table = evaluator.run(ArenaPolicy(max_restart_trials=cap))
        assert table["avg_jct_s"].mean() == pytest.approx(rows[cap]["mean_avg_jct_s"], rel=1e-9)
        assert table["jobs_finished"].sum() == rows[cap]["jobs_finished"] == rows[cap]["jobs_total"]
