"""``arena-gym tune``: a study from the command line; bad settings are one line and exit code 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from arena_gym.harness.cli import main
from tests.arena_gym.harness.quadratic_target import SPEC
from tests.helpers import default_sigint


def test_tune_runs_a_study_and_prints_the_best_trial(capsys, tmp_path) -> None:
    out = tmp_path / "study"
    argv = ["tune", "--target", SPEC, "--trials", "4", "--workers", "1", "--startup-trials", "2"]
    argv += ["--set", "label=cli", "--trial-set", "steps=1", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    best = json.loads((out / "best_config.json").read_text())
    assert f"best trial {best['trial']}: {best['value']:.4f}" in printed and str(out / "best_config.json") in printed
    assert best["config"]["label"] == "cli" and best["config"]["steps"] == 3
    assert json.loads((out / "config.json").read_text())["tune"]["trial_set"] == {"steps": 1}


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (["--set", "nothing"], "--set: 'nothing' is not KEY=VALUE"),
        (["--trial-set", "zz=1"], "QuadConfig has no field 'zz'"),
        (["--set", "steps=lots"], "QuadConfig.steps: bad value 'lots': expected an integer"),
        (["--trials", "0"], "--trials"),
        (["--trial-set", "y=lots"], "QuadConfig.y: bad value 'lots': expected a number"),
        (["--storage", "notaurl"], "tune --storage 'notaurl' is not a database URL"),
        (["--storage", "sqlite:////nonexistent/dir/x.db"], "folder /nonexistent/dir does not exist"),
        (["--storage", "nosuchdialect://h/db"], "tune --storage 'nosuchdialect://h/db': "),
        (["--storage", "sqlite://"], "tune --storage 'sqlite://': an in-memory database is not shared by the trials"),
        (["--storage", "sqlite:////etc/passwd"], "/etc/passwd is not an SQLite database (file is not a database)"),
        (["--storage", "sqlite:////dev/null"], "/dev/null is not a regular file"),
        (["--storage", "sqlite:///%00"], "the file name holds a NUL character"),
        (["--target", "os:path"], "tune target 'os:path' is not a tune target (it lacks config_type"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(capsys, tmp_path, extra: list[str], problem: str) -> None:
    code = main(["tune", "--target", SPEC, "--out", str(tmp_path / "study"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and problem in err and "\n" not in err
    assert not (tmp_path / "study").exists()


def test_an_unknown_target_names_the_valid_ones(capsys, tmp_path) -> None:
    assert main(["tune", "--target", "nope", "--out", str(tmp_path / "s")]) == 2
    assert (
        "unknown tune target 'nope'; valid: sb3, es, residual-ppo, expert-iteration, policy-iteration, residual, ppo or module:attr"
        in capsys.readouterr().err
    )


REPO = Path(__file__).resolve().parents[4]


def _interrupted(argv: list[str], out: Path, group: bool) -> int:
    """Run ``arena-gym tune`` until its first trial has reported, then Ctrl-C it (the process group, or its PID)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    run = subprocess.Popen(
        [sys.executable, "-m", "arena_gym", *argv],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stderr=subprocess.PIPE,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 60
    while not list(out.glob("trials/*")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(run.pid, signal.SIGINT) if group else os.kill(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert "Traceback" not in err.decode(), err.decode()
    return run.returncode


@pytest.mark.timeout(300)
def test_tune_interrupted_twice_with_two_workers_reaches_its_trials_when_rerun(tmp_path) -> None:
    out = tmp_path / "study"
    argv = ["tune", "--target", SPEC, "--trials", "6", "--workers", "2", "--startup-trials", "2", "--no-progress"]
    argv += ["--trial-set", "steps=4", "--trial-set", "pause_s=0.5", "--out", str(out)]
    assert _interrupted(argv, out, group=True) == 130  # a terminal's Ctrl-C reaches every process
    assert _interrupted(argv, out, group=False) == 130  # SIGINT to the command alone
    assert main(argv) == 0
    states = pd.read_csv(out / "trials.csv")["state"]
    assert (states.isin(["COMPLETE", "PRUNED"])).sum() >= 6 and "RUNNING" not in set(states)
    assert (states == "FAIL").sum() >= 2  # the interrupted trials, marked failed at once


def test_a_tuned_field_fixed_by_set_or_trial_set_is_not_sampled_and_recorded_as_run(tmp_path) -> None:
    out = tmp_path / "study"
    argv = ["tune", "--target", SPEC, "--trials", "3", "--workers", "1", "--startup-trials", "2", "--no-progress"]
    assert main([*argv, "--set", "x=0.25", "--trial-set", "y=-0.5", "--trial-set", "steps=1", "--out", str(out)]) == 0
    trials = pd.read_csv(out / "trials.csv")
    assert "params_x" not in trials and "params_y" not in trials  # nothing left to sample
    best = json.loads((out / "best_config.json").read_text())
    assert best["params"] == {} and (best["config"]["x"], best["config"]["y"]) == (0.25, -0.5)
    assert best["value"] == pytest.approx((0.25 - 1.0) ** 2)
