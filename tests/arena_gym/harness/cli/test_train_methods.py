"""``arena-gym train --method``: every trainer runs for a few steps from the command line; bad input is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from agents.residual import ResidualWeights
from arena_gym.harness.cli import main
from arena_gym.harness.trainers import METHODS
from arena_gym.harness.tune import TUNE_TARGETS
from tests.rl_cases import ENV_ID


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["train", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_method_is_a_tune_target_under_its_name() -> None:
    assert set(METHODS) == {"sb3", "es", "residual-ppo", "expert-iteration", "policy-iteration"}
    assert all(TUNE_TARGETS[name] == target for name, target in METHODS.items())


def test_sb3_is_the_default_method(tmp_path: Path, env_overrides: dict, capsys) -> None:
    argv = ["--env", ENV_ID, "--steps", "128", "--n-envs", "1", "--vec", "dummy", "--n-steps", "64"]
    argv += ["--batch-size", "64", "--eval-every", "64", "--eval-seeds", "1000", "--checkpoint-every", "0"]
    argv += ["--baselines", "fcfs", "--no-progress", "--out", str(tmp_path / "sb3")]
    for key, value in env_overrides.items():
        argv += ["--env-arg", f"{key}={value}"]
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and "model:" in out
    history = pd.read_csv(tmp_path / "sb3" / "eval_history.csv")
    agent = history[history["policy"] == "agent"]
    assert agent["selection_score"].gt(0).all() and (tmp_path / "sb3" / "best_model.zip").is_file()


@pytest.mark.timeout(300)
def test_es_trains_from_the_command_line(shared_data: Path, tmp_path: Path, capsys) -> None:
    sets = ["iterations=1", "pairs=1", "windows=1", "validation_limit=1", "workers=1", f"data_dir={shared_data}"]
    code, out, err = _run(
        capsys, "--method", "es", *[a for s in sets for a in ("--set", s)], "--out", str(tmp_path / "es")
    )
    assert code == 0 and "best validation selection score" in out
    assert "residual ES" in err and "evaluate" in err  # the iterations' bar and, inside one, the windows'
    trained = ResidualWeights.load(tmp_path / "es" / "residual.json").trained
    assert trained["selection_reference"] == "arena" and 0.3 < trained["validation_geomean_ratio"] < 3.0


@pytest.mark.timeout(300)
def test_es_stopped_after_writing_its_config_leaves_nothing_a_rerun_refuses(
    shared_data: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from arena_gym.harness.out_dirs import check_out_dir
    from arena_gym.harness.trainers.es import ResidualTrainer

    def stopped(trainer: ResidualTrainer, folder: Path, *_: object) -> None:
        assert json.loads((folder.parent / "config.json").read_text())["kind"] == "train:es"  # written, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(ResidualTrainer, "_iterate", stopped)
    sets = ["iterations=1", "pairs=1", "windows=1", "validation_limit=1", "workers=1", f"data_dir={shared_data}"]
    code, _, err = _run(
        capsys, "--method", "es", *[a for s in sets for a in ("--set", s)], "--out", str(tmp_path / "es")
    )
    assert code == 130 and "interrupted" in err
    assert list(tmp_path.iterdir()) == []  # no run directory, no partial one, no lock
    assert check_out_dir(tmp_path / "es", kind="train:es") == tmp_path / "es"  # what a rerun checks first


@pytest.mark.timeout(300)
def test_residual_ppo_trains_from_a_config_file(shared_data: Path, tmp_path: Path, capsys) -> None:
    config = {"steps": 64, "n_envs": 1, "n_steps": 64, "batch_size": 32, "n_epochs": 1, "eval_every": 64}
    config |= {"validation_limit": 1, "workers": 1, "data_dir": str(shared_data)}
    path = tmp_path / "best_config.json"
    path.write_text(json.dumps({"config": config}))
    code, out, _ = _run(capsys, "--method", "residual-ppo", "--config", str(path), "--out", str(tmp_path / "ppo"))
    assert code == 0 and "best validation selection score" in out
    history = pd.read_csv(tmp_path / "ppo" / "history.csv")
    assert history["timesteps"].tolist() == [0, 64] and (tmp_path / "ppo" / "residual.json").is_file()


@pytest.mark.timeout(300)
def test_expert_iteration_trains_from_the_command_line(tmp_path: Path, env_overrides: dict, capsys) -> None:
    from sb3_contrib import MaskablePPO

    from agents.rl.algos import policy_class
    from agents.rl.artifact import ModelInfo, save_model
    from agents.rl.env_factory import env_config, make_env

    model = MaskablePPO(
        policy_class("maskable_ppo", "slots"),
        make_env(ENV_ID, env_overrides),
        seed=3,
        device="cpu",
        n_steps=64,
        policy_kwargs={"net_arch": [16]},
    )
    info = ModelInfo("maskable_ppo", ENV_ID, env_config(ENV_ID, env_overrides), "test", "slots")
    start = save_model(model, tmp_path / "start.zip", info)
    sets = [f"warm_start={start}", "teacher=arena", "rounds=1", "episodes=1", "epochs=2", "eval_limit=1"]
    argv = ["--method", "expert-iteration", *[a for s in sets for a in ("--set", s)], "--out", str(tmp_path / "ei")]
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and "best validation selection score" in out
    history = pd.read_csv(tmp_path / "ei" / "history.csv")
    assert history["round"].tolist() == [0, 1] and history["validation_score"].gt(0).all()


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--method", "es", "--set", "iterations=0"], "iterations must be >= 1"),
        (["--method", "es", "--set", "speed=1"], "no field 'speed'"),
        (["--method", "es", "--steps", "10"], "--steps: options of --method sb3"),
        (["--method", "es", "--set", "out=x"], "no field 'out'"),
        (["--set", "sigma=1"], "sb3 takes its fields as options"),
        (["--method", "nope"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys, argv: list[str], problem: str) -> None:
    code, _, err = _run(capsys, *argv, "--out", str(tmp_path / "out"))
    assert code == 2 and problem in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "cannot read it as JSON"),
        ("[]", "no 'config' object of ResidualTrainConfig fields"),
        ('{"config": {"speed": 1}}', "c.json: config: unknown field(s) speed; valid: "),
        ('{"config": {"pairs": 2.0}}', "c.json: config: pairs must be an integer, got 2.0"),
        ('{"config": {"loads": 0.9}}', "c.json: config: loads must be a tuple of numbers, got 0.9"),
        ('{"train": {"steps": 64}}', "no 'config' object"),
    ],
)
def test_a_bad_config_file_of_a_method_is_one_line(tmp_path: Path, capsys, text: str, problem: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    code, _, err = _run(capsys, "--method", "es", "--config", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and problem in err and "--config" in err and err.count("\n") == 1
