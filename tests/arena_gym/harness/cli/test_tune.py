"""``arena-gym tune``: a study from the command line; bad settings are one line and exit code 2."""

from __future__ import annotations

import json

import pytest

from arena_gym.harness.cli import main
from tests.arena_gym.harness.quadratic_target import SPEC


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
        (["--set", "steps=lots"], "QuadConfig.steps: 'lots' is not a int"),
        (["--trials", "0"], "--trials"),
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
        "unknown tune target 'nope'; valid: sb3, es, residual-ppo, expert-iteration, residual, ppo or module:attr"
        in capsys.readouterr().err
    )
