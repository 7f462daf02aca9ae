"""Results directories, leaderboard and the artifact's JCT padding rule."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from agents.fcfs import FCFS
from agents.srtf import SRTF
from arena_gym.cluster import PRESETS
from arena_gym.harness.experiment import RunConfig, RunResult
from arena_gym.harness.results import leaderboard, padded_avg_jct, to_markdown, write_run
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics, job_outcomes
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
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["jobs_finished"] == 3 and metrics["avg_jct_s"] == pytest.approx(r.metrics["avg_jct_s"])
    jobs = pd.read_csv(out / "jobs.csv")
    assert list(jobs.job_id) == ["A", "B", "C"] and (jobs.jct_s > 0).all()
    assert (out / "jct_cdf.png").read_bytes()[:4] == b"\x89PNG"


def test_leaderboard_and_padding():
    results = [result(FCFS()), result(SRTF())]
    board = leaderboard(results, pad_reference="srtf")
    assert set(board.policy) == {"fcfs", "srtf"} and "padded_avg_jct_s" in board.columns
    # everything finishes, so padding changes nothing
    for row in board.itertuples():
        assert row.padded_avg_jct_s == pytest.approx(row.avg_jct_s)
    assert "| policy |" in to_markdown(board)


def test_padding_rule_pads_with_the_worst_jct():
    full = result(FCFS())
    events = tuple(e for e in full.record.events if not (e.job_id == "A" and e.kind.value == "finish"))
    cut = RunResult(full.config, dataclasses.replace(full.record, policy="cut", events=events), full.metrics)
    jct = {o.job_id: o.jct for o in job_outcomes(full.record)}
    worst = max(jct.values())
    padded = padded_avg_jct([full, cut], reference="fcfs")
    assert padded["fcfs"] == pytest.approx(sum(jct.values()) / 3)
    # "cut" finished B and C only: padded with the worst JCT seen (over both policies) up to 3 jobs
    assert padded["cut"] == pytest.approx((jct["B"] + jct["C"] + worst) / 3)
    assert padded_avg_jct([full, cut], reference="max") == padded
    with pytest.raises(ValueError, match="padding reference policy 'x'"):
        padded_avg_jct([full], reference="x")
