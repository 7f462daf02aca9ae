"""Validation workloads and the evaluation tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from agents.rl.env_factory import env_config, make_env
from agents.rl.evaluate import Evaluator, baseline_policies, mean_avg_jct, summarise
from tests.agents.rl.conftest import ENV_ID


def test_workloads_are_the_envs_and_scores_are_deterministic(env_overrides: dict) -> None:
    config = env_config(ENV_ID, env_overrides)
    evaluator = Evaluator(config, (1000, 1001))
    env = make_env(ENV_ID, env_overrides)
    env.reset(seed=1001)
    assert evaluator.workloads[1001] == env.unwrapped.jobs
    assert evaluator.workloads[1000] != evaluator.workloads[1001]
    first = evaluator.score(baseline_policies(("fcfs", "srtf")))
    second = Evaluator(config, (1000, 1001)).score(baseline_policies(("fcfs", "srtf")))
    pd.testing.assert_frame_equal(first, second)
    assert list(first["policy"]) == ["fcfs", "fcfs", "srtf", "srtf"]
    assert (first["jobs_finished"] == first["jobs_total"]).all()


def test_summary_and_unfinished_jobs() -> None:
    table = pd.DataFrame({
        "seed": [1, 2, 1, 2], "policy": ["fcfs", "fcfs", "agent", "agent"],
        "avg_jct_s": [100.0, 300.0, 50.0, 150.0], "p95_jct_s": [1.0] * 4, "makespan_s": [1.0] * 4,
        "jobs_finished": [4, 4, 4, 3], "jobs_total": [4, 4, 4, 4],
    })
    summary = summarise(table).set_index("policy")
    assert summary.loc["agent", "jct_vs_fcfs"] == pytest.approx(0.5)
    assert not summary.loc["agent", "all_finished"] and summary.loc["fcfs", "all_finished"]
    assert mean_avg_jct(table, "fcfs") == 200.0
    assert math.isinf(mean_avg_jct(table, "agent"))
    with pytest.raises(ValueError, match="not in the evaluation table"):
        mean_avg_jct(table, "arena")

