"""Results directories, leaderboard and the artifact's JCT padding rule."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from agents.arena import ARENA_VERSION
from agents.fcfs import FCFS
from agents.srtf import SRTF
from arena_gym.cluster import PRESETS
from arena_gym.harness.experiment import RunConfig, RunResult
from arena_gym.harness.results import leaderboard, to_markdown, write_run
from arena_gym.harness.scoring import Evaluator
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics, job_outcomes
from envs import EnvConfig, Workload
from tests.helpers import job, sim_backend, uniform_model

JOBS = [job("A", 0, 300, "a40", 4), job("B", 10, 20, "a40", 4), job("C", 20, 50, "a10", 2)]


def result(policy) -> RunResult:
    record = run_episode(sim_backend(PRESETS["tiny"], uniform_model(), policy), policy, JOBS)
    return RunResult(RunConfig(policy=policy.name, trace="t", cluster="tiny"), record, compute_metrics(record))


def test_write_run_files(tmp_path):
    r = result(FCFS())
    out = write_run(tmp_path / "run", r)
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "config.json",
        "jct_cdf.png",
        "jobs.csv",
        "metrics.json",
        "queue.png",
        "throughput.png",
        "timeline.csv",
    ]
    config = json.loads((out / "config.json").read_text())
    assert config["seed"] == 0 and config["config"]["policy"] == "fcfs" and config["code_version"]
    assert config["arena_version"] == ARENA_VERSION
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["jobs_finished"] == 3 and metrics["avg_jct_s"] == pytest.approx(r.metrics["avg_jct_s"])
    jobs = pd.read_csv(out / "jobs.csv")
    assert list(jobs.job_id) == ["A", "B", "C"] and (jobs.jct_s > 0).all()
    assert (out / "jct_cdf.png").read_bytes()[:4] == b"\x89PNG"


def test_leaderboard_and_padding():
    results = [result(FCFS()), result(SRTF())]
    board = leaderboard(results, pad_reference="srtf")
    assert set(board.policy) == {"fcfs", "srtf"} and "padded_jct_s" in board.columns
    # everything finishes, so padding changes nothing
    for row in board.itertuples():
        assert row.padded_jct_s == pytest.approx(row.avg_jct_s)
    assert "| policy |" in to_markdown(board)


def test_padding_rule_pads_with_the_worst_jct():
    full = result(FCFS())
    events = tuple(e for e in full.record.events if not (e.job_id == "A" and e.kind.value == "finish"))
    cut = RunResult(full.config, dataclasses.replace(full.record, policy="cut", events=events), full.metrics)
    jct = {o.job_id: o.jct for o in job_outcomes(full.record)}
    worst = max(jct.values())
    padded = leaderboard([full, cut], pad_reference="fcfs").set_index("policy")["padded_jct_s"]
    assert padded["fcfs"] == pytest.approx(sum(jct.values()) / 3)
    # "cut" finished B and C only: padded with the worst JCT seen (over both policies) up to 3 jobs
    assert padded["cut"] == pytest.approx((jct["B"] + jct["C"] + worst) / 3)
    assert leaderboard([full, cut], pad_reference="max").set_index("policy")["padded_jct_s"].equals(padded)
    with pytest.raises(ValueError, match="padding reference policy 'x'"):
        leaderboard([full], pad_reference="x")


def test_compare_and_evaluate_pad_alike():
    """The same runs, cut by a horizon, get the same padded JCT from compare's leaderboard and evaluate's table."""
    jobs = (*JOBS, job("D", 30, 400, "a40", 4))
    workload = Workload("w", "t", "all", 0, 1.0, "factor", 1.0, "tiny", jobs)
    evaluator = Evaluator(EnvConfig(cluster="tiny", horizon_s=1000.0), [workload])
    policies = {"fcfs": FCFS(), "srtf": SRTF()}
    table = evaluator.score(policies).set_index("policy")
    runs = []
    for name, policy in policies.items():
        record = run_episode(evaluator.backend(workload, policy.ap_search), policy, jobs)
        runs.append(RunResult(RunConfig(policy=name, trace="t", cluster="tiny"), record, compute_metrics(record)))
    board = leaderboard(runs, pad_reference="max").set_index("policy")
    assert table.loc["fcfs", "jobs_finished"] < table.loc["srtf", "jobs_finished"] < len(jobs)  # padding bites
    for name in policies:
        assert board.loc[name, "padded_jct_s"] == table.loc[name, "padded_jct_s"]
    assert board.loc["fcfs", "padded_jct_s"] == pytest.approx(table.loc["srtf", "avg_jct_s"])
