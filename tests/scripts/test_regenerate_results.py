"""scripts/regenerate_results.py: --tables-only rewrites an evaluation's tables from its per_workload.csv, running no
policy; frozen directories are re-run only when named."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from arena_gym.harness.evaluate import EvalConfig, evaluate
from arena_gym.harness.suites import custom_suite
from arena_gym.outputs import write_json
from tests.conftest import REPO
from tests.helpers import load_script
from tests.rl_cases import TRACE

script = load_script("regenerate_results")
TABLES = ("summary.csv", "summary.md", "by_trace.csv", "vs_reference.png", "cdf.png", "performance_profile.png")


@pytest.fixture
def evaluation(tmp_path: Path) -> Path:
    suite = custom_suite((TRACE,), cluster="tiny", split="test", load_basis="factor", load_levels=(1.0,), seeds=(1, 2))
    config = EvalConfig(
        policies=("arena", "fcfs"),
        suite="custom",
        traces=(TRACE,),
        out_dir=str(tmp_path / "eval"),
        resamples=300,
        progress=False,
    )
    return evaluate(config, suite).out_dir


def test_tables_only_rewrites_what_evaluate_wrote_from_the_per_workload_table(
    evaluation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the script works from the repository root
    written = {name: (evaluation / name).read_bytes() for name in ("summary.csv", "summary.md", "by_trace.csv")}
    for name in TABLES:
        (evaluation / name).unlink()
    monkeypatch.setattr(script, "evaluate", lambda *a, **k: pytest.fail("--tables-only ran the policies"))
    assert script.main([str(evaluation), "--tables-only"]) == 0
    assert {name: (evaluation / name).read_bytes() for name in written} == written
    assert all((evaluation / name).is_file() for name in TABLES)
    (evaluation / "jobs.csv").unlink()  # not committed: the job CDF is left as it is
    cdf = (evaluation / "cdf.png").read_bytes()
    assert script.main([str(evaluation), "--tables-only"]) == 0
    assert (evaluation / "cdf.png").read_bytes() == cdf


def test_tables_only_refuses_a_directory_without_its_table_before_any_work(
    evaluation: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    (evaluation / "per_workload.csv").unlink()
    summary = (evaluation / "summary.csv").read_bytes()
    assert script.main([str(evaluation), "--tables-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"regenerate_results: error: {evaluation.resolve()}: no per_workload.csv to rewrite the tables from"
    assert (evaluation / "summary.csv").read_bytes() == summary


def test_frozen_directories_are_re_run_only_when_named(tmp_path: Path) -> None:
    for name, suite in (("dev", "synthetic"), ("frozen", "frozen-test")):
        write_json(tmp_path / name / "config.json", {"evaluate": EvalConfig(policies=("arena",), suite=suite)})
    assert script.evaluation_dirs(tmp_path) == [tmp_path / "dev"]
    assert script.evaluation_dirs(tmp_path, frozen=True) == [tmp_path / "dev", tmp_path / "frozen"]


def test_a_re_run_keeps_the_directorys_gitignore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    config = EvalConfig(
        policies=("fcfs", "srtf"),
        reference="fcfs",
        suite="custom",
        traces=(TRACE,),
        cluster="tiny",
        loads=(1.0,),
        out_dir=str(tmp_path / "e"),
    )
    evaluation = evaluate(dataclasses.replace(config, progress=False)).out_dir
    (evaluation / ".gitignore").write_text("jobs.csv\n")
    columns = ["workload", "policy", "avg_jct_s", "jobs_finished"]
    before = pd.read_csv(evaluation / "per_workload.csv")[columns]
    assert script.main([str(evaluation)]) == 0
    assert (evaluation / ".gitignore").read_text() == "jobs.csv\n"
    pd.testing.assert_frame_equal(pd.read_csv(evaluation / "per_workload.csv")[columns], before)  # the same runs
