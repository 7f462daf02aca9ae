"""A deployment's results on fake generations: the predicted simulation beside the twin, in every report."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from arena_gym.harness.cli.deploy import _report
from arena_gym.harness.deploy import DeployConfig, Deployment, finish, write_results
from arena_gym.loop import run_episode
from arena_gym.registry import make_perf, make_policy
from arena_gym.restarts import RestartCost
from arena_gym.sim import SimConfig
from arena_gym.types import GpuType, JobId, JobSpec, ModelRef, OverheadModel, ResourceShape
from real_runner.testbed import load_testbed
from tests.estimator.test_profile import synthetic_profile
from tests.fake_live import fake_live_backend

TINY = ModelRef.parse("gpt__tiny")
COST = RestartCost(start_s=4.0, held_s=3.0, save_s=0.5, load_s=1.5)
LIVE_START_S = 3.0  # what a fake generation takes from its release to its first step


def test_a_one_job_deploys_prediction_charges_the_profiles_start_and_every_report_carries_it(tmp_path, capsys):
    profile = tmp_path / "profile.json"
    profile.write_text(dataclasses.replace(synthetic_profile(), restart={"gpt__tiny": COST}).to_json())
    testbed = load_testbed("cpu-2")
    cluster = testbed.cluster()
    spec = f"profiled:{profile}"
    perf = make_perf(spec, cluster)
    config = DeployConfig(policy="fcfs", testbed="cpu-2", perf=spec, plots=False)
    jobs = (JobSpec(JobId("a"), TINY, 16, 100, 0.0, GpuType("cpu"), 1),)
    dep = Deployment(config, testbed, cluster, perf, spec, make_policy("fcfs"), jobs, 0)
    live_sim = SimConfig(overhead=OverheadModel(ckpt_resume_s=LIVE_START_S), overhead_class="none")
    backend = fake_live_backend(cluster, perf, tmp_path / "run", live_sim)
    try:
        record = run_episode(backend, dep.policy, dep.jobs)
    finally:
        backend.close()
    result = finish(dep, backend, record)

    step_s = perf.iter_time(TINY, 16, ResourceShape(GpuType("cpu"), 1, 1))
    # by hand: the steps with a save every 10 s of them, the profile's first start and closing save, nothing live
    predicted = 100 * step_s * (1 + COST.save_s / config.checkpoint_every_s) + COST.start_s + COST.save_s
    (row,) = result.comparison.jobs.itertuples(index=False)
    assert row.pred_jct_s == pytest.approx(predicted, abs=1e-9)
    assert row.live_jct_s == pytest.approx(100 * step_s + LIVE_START_S, abs=0.01)  # live paid 3 s, not 4
    assert row.sim_jct_s == pytest.approx(row.live_jct_s, abs=0.01)  # the twin charged what live paid
    m = result.metrics
    assert m["sim_pred_avg_jct_s"] == pytest.approx(predicted, abs=1e-9)
    assert m["sim_pred_avg_jct_error"] == pytest.approx((predicted - row.live_jct_s) / row.live_jct_s)
    assert m["sim_avg_jct_error"] == pytest.approx(result.comparison.avg_jct_error)
    assert result.pred_metrics["avg_jct_s"] == pytest.approx(predicted, abs=1e-9)

    out = tmp_path / "out"
    out.mkdir()
    write_results(out, dep, result)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["sim_pred_avg_jct_s"] == pytest.approx(predicted) and "sim_pred_avg_jct_error" in metrics
    summary = json.loads((out / "sim_vs_live.json").read_text())
    assert summary["avg_jct_pred_s"] == pytest.approx(predicted) and summary["pred_start_s_gpt__tiny"] == 4.5
    assert summary["avg_jct_pred_error"] == pytest.approx(m["sim_pred_avg_jct_error"])
    assert summary["avg_jct_sim_s"] == pytest.approx(row.sim_jct_s)  # the twin's figures stay
    table = pd.read_csv(out / "sim_vs_live.csv")
    assert table["pred_jct_s"].iloc[0] == pytest.approx(predicted)
    assert json.loads((out / "sim_pred" / "metrics.json").read_text())["avg_jct_s"] == pytest.approx(predicted)
    assert {"jobs.csv", "timeline.csv"} <= {p.name for p in (out / "sim_pred").iterdir()}

    _report(dep, result, out)
    printed = capsys.readouterr().out
    assert "fcfs (pred): 1/1 jobs finished" in printed
    assert (
        f"predicted vs live ({spec}; charged as the model predicts, first start and closing save gpt__tiny 4.5 s, "
        "a save every 10 s)" in printed
    )
    assert f"average JCT {predicted:.1f} s predicted" in printed and "pred JCT s" in printed
