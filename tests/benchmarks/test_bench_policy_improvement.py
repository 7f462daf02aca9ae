"""The policy-improvement benchmark: a window's four policies as a round builds them, and the committed figures."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents.residual.priority import ResidualWeights, residual_policy
from arena_gym.harness.scoring import Evaluator
from tests.arena_gym.harness.trainers.test_policy_iteration import search_task
from tests.conftest import REPO
from tests.helpers import load_script

bench = load_script("bench_policy_improvement", "benchmarks")


def test_a_window_scores_the_residual_its_teacher_and_the_distilled_one() -> None:
    task = search_task()
    push = task.candidates[0]
    window = bench.Window(task.config, task.workload, ResidualWeights(), push, 1, 1.5, 2, 0)
    row = bench.score_window(window)
    assert row["workload"] == task.workload.label and set(bench.LABELS) <= set(row)
    alone = Evaluator(task.config, [task.workload]).score(
        {"residual": residual_policy(ResidualWeights(), "residual"), "distilled": residual_policy(push, "distilled")}
    )
    assert row["residual"] == pytest.approx(float(alone["avg_jct_s"][0]), rel=1e-12)
    assert row["distilled"] == pytest.approx(float(alone["avg_jct_s"][1]), rel=1e-12)
    assert row["teacher"] > 0 and row["cpu_s"] > 0


def test_the_committed_figures_are_the_windows_they_summarise() -> None:
    found = json.loads((REPO / "benchmarks" / "results" / "residual" / "policy_improvement.json").read_text())
    windows = found["windows"]
    assert len(windows) == 12 and found["config"]["weights"].endswith("train-tuned/residual.json")
    for label, summary in found["summary"].items():
        ratios = np.array([w[label] / w["arena"] for w in windows])
        assert summary["mean_ratio"] == pytest.approx(ratios.mean(), rel=1e-12)
        assert summary["wins_vs_arena"] == int((ratios < 1 - 1e-9).sum())
