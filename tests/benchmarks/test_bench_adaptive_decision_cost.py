"""The adaptive policies' decision-cost benchmark on a small synthetic trace: every figure from real runs, the
reference at ratio 1, outcomes that repeat, and a bad argument refused before any work."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import run_benchmark


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_benchmark("bench_adaptive_decision_cost", *args, timeout=600)


@pytest.mark.timeout(700)
def test_a_small_run_times_every_policy_beside_arena(tmp_path) -> None:
    out = tmp_path / "adaptive.json"
    trace = "synthetic:n_jobs=60,rate_per_h=120,seed=1"
    done = run(
        "--reps",
        "2",
        "--trace",
        trace,
        "--cluster",
        "testbed-64",
        "--out",
        str(out),
        "--policies",
        "arena,arena-gittins-32-f",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    body = json.loads(out.read_text())
    rows = {r["policy"]: r for r in body["results"]}
    assert body["config"]["trace"] == trace and len(body["runs"]["arena"]) == 2
    assert rows["arena"]["vs_reference"] == 1.0
    for row in rows.values():
        assert row["decisions"] > 60 and row["mean_ms"] > 0 and row["outcomes_agree"]
    assert rows["arena"]["outcome"] != rows["arena-gittins-32-f"]["outcome"]  # two policies, two schedules
    assert "arena-gittins-32-f" in done.stdout and "goal" in done.stdout


def test_a_missing_trace_is_refused_in_one_line(tmp_path) -> None:
    done = run("--trace", str(tmp_path / "none.csv"), "--out", str(tmp_path / "x.json"))
    assert done.returncode != 0 and "no trace at" in done.stderr and not (tmp_path / "x.json").exists()
