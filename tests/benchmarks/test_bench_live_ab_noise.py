"""The A/B noise benchmark: its refusals, the run's predictions it reproduces, and its committed figures re-run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.helpers import load_script, run_benchmark

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "benchmarks" / "results" / "live_ab" / "noise.json"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_live_ab_noise", "benchmarks")


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(COMMITTED.read_text())


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_benchmark("bench_live_ab_noise", *args, timeout=300)


def test_a_file_that_is_not_a_live_ab_run_is_refused_in_one_line(bench: ModuleType, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    for text, message in [
        ("{", "cannot read it"),
        (json.dumps({"config": {}}), "not a bench_live_ab.py results file"),
        (
            json.dumps(
                {
                    "config": {"a": "arena", "b": "fcfs", "perf": "estimator"},
                    "ratios": [],
                    "code_version": "x",
                    "deploys": [{"label": "arena", "error": "exit 1"}],
                }
            ),
            "a deploy failed",
        ),
        (
            json.dumps(
                {
                    "config": {"a": "arena", "b": "fcfs", "perf": "estimator"},
                    "ratios": [{"seed": 0, "b": "fcfs"}],
                    "code_version": "x",
                    "deploys": [{"label": "arena", "seed": 0}],
                }
            ),
            "a deploy lacks live_to_model_step_ratio, sim_avg_jct_s, sim_start_s, testbed, trace, twin_start_s",
        ),
    ]:
        bad.write_text(text)
        with pytest.raises(SystemExit, match=message):
            bench.read_run(bad)
    done = run("--run", str(tmp_path / "absent.json"), "--out", str(tmp_path / "out.json"))
    assert done.returncode != 0 and "cannot read it" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--draws", "1"), "--draws must be in 2.."),
        (("--sigmas", "0"), "distinct sigmas"),
        (("--sources", "steps,gpus"), "expected distinct sources of steps, starts"),
    ],
)
def test_bad_arguments_are_refused_before_any_simulation(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    done = run(*args, "--out", str(tmp_path / "out.json"))
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "out.json").exists()


def test_the_committed_runs_predictions_reproduce_and_a_changed_one_is_refused(
    bench: ModuleType, committed: dict
) -> None:
    live_ab = bench.read_run(REPO / committed["config"]["run"])
    predictions = bench.Predictions(live_ab)
    assert bench.check_reproduces(live_ab, predictions) == pytest.approx(committed["noise_free_avg_jct_s"], rel=1e-12)
    changed = {**live_ab, "deploys": [{**live_ab["deploys"][0], "sim_avg_jct_s": 1.0}]}
    with pytest.raises(SystemExit, match="does not reproduce"):
        bench.check_reproduces(changed, predictions)


def test_the_committed_draws_and_table_follow_from_the_code(bench: ModuleType, committed: dict) -> None:
    live_ab = bench.read_run(REPO / committed["config"]["run"])
    predictions = bench.Predictions(live_ab)
    deploys, labels = live_ab["deploys"], list(predictions.specs)
    sigma = committed["config"]["sigmas"][-1]
    b = next(i for i, d in enumerate(deploys) if d["label"] != labels[0])
    a = next(i for i, d in enumerate(deploys) if d["seed"] == deploys[b]["seed"] and d["label"] == labels[0])
    for source in committed["config"]["sources"]:  # a sample: B's first draw in its own world and in A's
        drawn = committed["avg_jct_s"][source][f"{sigma:g}"]
        own = predictions.avg_jct(deploys[b], source, sigma, bench.STRIDE * b)
        assert own == pytest.approx(drawn["independent"][b][0], rel=1e-12)
        shared = predictions.avg_jct(deploys[b], source, sigma, bench.STRIDE * a + 1)
        assert shared == pytest.approx(drawn["shared"][b][1], rel=1e-12)
    rows = bench.ratio_table(live_ab, labels, committed["avg_jct_s"], committed["noise_free_avg_jct_s"], 5.0)

    def key(row: dict) -> tuple:
        return row["source"], row["sigma"], row["world"], row["b"], str(row["seed"])

    assert sorted(rows, key=key) == sorted(committed["rows"], key=key)  # JSON keeps every float to the last bit


def test_a_short_run_writes_every_pair_per_source_sigma_and_world(tmp_path: Path) -> None:
    out = tmp_path / "noise.json"
    done = run("--draws", "2", "--sigmas", "0.05", "--sources", "starts", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert len(rows) == 2 * 8 and {(r["source"], r["world"]) for r in rows} == {
        ("starts", "independent"),
        ("starts", "shared"),
    }
    for r in rows:
        assert r["q05"] <= r["median"] <= r["q95"] and 0 <= r["within_goal_share"] <= 1
    means = [r for r in rows if r["seed"] == "mean"]
    assert len(means) == 4  # per world and B, the mean over the three seeds
    for m in means:
        seeds = [r for r in rows if (r["world"], r["b"]) == (m["world"], m["b"]) and r["seed"] != "mean"]
        assert m["sim_ratio"] == pytest.approx(np.mean([r["sim_ratio"] for r in seeds]))
        assert m["live_ratio"] == pytest.approx(np.mean([r["live_ratio"] for r in seeds]))
    per_deploy = result["avg_jct_s"]["starts"]["0.05"]
    assert all(len(draws) == 2 for draws in per_deploy["independent"])
    deploys = json.loads((REPO / result["config"]["run"]).read_text())["deploys"]
    a = [i for i, d in enumerate(deploys) if d["label"] == "arena"]
    assert all(per_deploy["shared"][i] == per_deploy["independent"][i] for i in a)  # A's world is its own
    assert not np.allclose(per_deploy["independent"][0], result["noise_free_avg_jct_s"][0])  # the noise moved it
    assert (tmp_path / "noise.csv").is_file()
