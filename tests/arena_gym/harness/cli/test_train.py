"""Smoke runs of ``arena-gym train`` with a tiny budget (wandb disabled), and its argument errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from arena_gym.harness.cli import main
from tests.helpers import load_script
from tests.rl_cases import ENV_ID


def _train_args(tmp_path: Path, env_overrides: dict, algo: str, *extra: str) -> list[str]:
    args = [
        "train",
        "--algo",
        algo,
        "--env",
        ENV_ID,
        "--steps",
        "256",
        "--n-envs",
        "1",
        "--vec",
        "dummy",
        "--n-steps",
        "128",
        "--batch-size",
        "64",
        "--eval-every",
        "0",
        "--eval-seeds",
        "1000",
        "--checkpoint-every",
        "128",
        "--baselines",
        "fcfs",
        "--no-progress",
        "--out",
        str(tmp_path / algo),
    ]
    for key, value in env_overrides.items():
        args += ["--env-arg", f"{key}={value}"]
    return args + list(extra)


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo", "dqn"])
def test_train_smoke(tmp_path: Path, env_overrides: dict, algo: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ("--env-arg", "invalid_action_penalty=0.5") if algo == "dqn" else ()
    assert main(_train_args(tmp_path, env_overrides, algo, *extra)) == 0
    out = tmp_path / algo
    assert "model:" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["seed"] == 0 and config["code_version"] and config["train"]["algo"] == algo
    assert config["env_config"]["trace"] == env_overrides["trace"]
    for name in (
        "model.zip",
        "learning_curve.csv",
        "learning_curve.png",
        "eval.csv",
        "eval_summary.csv",
        "checkpoints/model_128_steps.zip",
        "checkpoints/arena_gym.json",
    ):
        assert (out / name).is_file(), name
    table = pd.read_csv(out / "eval.csv")
    assert {"agent", "fcfs"} <= set(table["policy"]) <= {"agent", "agent-best", "fcfs"}
    assert (table["seed"] == 1000).all() and (table["jobs_total"] == 8).all()
    assert (table.loc[table["policy"] == "fcfs", "jobs_finished"] == 8).all()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--steps", "0"], "steps"),
        (["--batch-size", "0"], "batch_size must be >= 2"),
        (["--net-arch", "0"], "net_arch needs one or more layer sizes >= 1"),
        (["--net-arch", "64,0"], "net_arch"),
        (["--lr", "nan"], "learning_rate"),
        (["--gamma", "1.5"], "gamma"),
        (["--algo", "dqn", "--bc-steps", "10"], "actor-critic"),
        (["--env", "ArenaGym/Nope-v0"], "unknown env"),
        (["--env-arg", "no_such_field=1"], "unknown EnvConfig field"),
        (["--env-arg", "oops"], "KEY=VALUE"),
        (["--env-arg", "reward_scale=nan"], "reward_scale must be finite"),
        (["--env-arg", "fold_stages=no"], "EnvConfig.fold_stages must be true or false"),
        (["--env-arg", 'max_pending="8"'], "EnvConfig.max_pending must be an integer"),
        (["--env-arg", "split=test"], "may not set split"),
        (["--algo-arg", "x"], "KEY=VALUE"),
        (["--seed", "-1"], "seed must be >= 0, got -1"),
        (["--seed", "4294967295"], "seed must be < 2**32 - n_envs = 4294967294, got 4294967295"),
        (["--eval-seeds", "5,-2"], "eval_seeds must be >= 0, got -2"),
        (["--env-arg", "seed=-1"], "EnvConfig: seed must be >= 0, got -1"),
        (["--env-arg", "max_pending=1000000000"], "EnvConfig: max_pending must be in [1, 1024], got 1000000000"),
        (["--resume", "/nonexistent/run"], "--resume /nonexistent/run: no such file or directory"),
        (["--out", "/dev/null"], "--out /dev/null: exists and is not a directory"),
    ],
)
def test_train_bad_arguments_fail_at_once(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["train", "--no-progress", "--out", str(tmp_path / "bad"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("arena-gym train: error:") and message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "bad").exists()  # refused before anything was started


@pytest.mark.timeout(180)
def test_train_with_subprocess_envs(tmp_path: Path, env_overrides: dict) -> None:
    args = _train_args(tmp_path, env_overrides, "maskable_ppo")
    args[args.index("--n-envs") + 1] = "2"
    args[args.index("--vec") + 1] = "subproc"
    args[args.index("--steps") + 1] = "256"
    assert main(args) == 0
    assert {"agent", "fcfs"} <= set(pd.read_csv(tmp_path / "maskable_ppo" / "eval.csv")["policy"])


def test_both_front_ends_are_generated_from_the_train_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from agents.rl.config import TrainConfig
    from arena_gym.harness.cli import build_parser
    from arena_gym.harness.train_options import config_from_args

    script = load_script("train_agent")
    monkeypatch.setattr("sys.argv", ["train_agent.py"])
    script_args = script.parse_args()
    cli_args = build_parser().parse_args(["train"])
    defaults = TrainConfig()
    assert config_from_args(script_args) == config_from_args(cli_args) == defaults
    for f in dataclasses.fields(TrainConfig):
        assert hasattr(script_args, f.name) and hasattr(cli_args, f.name), f.name


def test_a_config_file_sets_the_fields_and_options_beside_it_win(tmp_path: Path) -> None:
    from agents.rl.config import TrainConfig
    from arena_gym.harness.cli import build_parser
    from arena_gym.harness.train_options import config_from_args

    written = TrainConfig(
        learning_rate=1e-4, n_steps=256, net_arch=(64, 64), env_overrides={"load_levels": [0.9]}, out_dir="elsewhere"
    )
    path = tmp_path / "best_config.json"
    path.write_text(json.dumps({"config": written.to_json()}))
    parser = build_parser(["train"])
    args = parser.parse_args(["train", "--n-steps", "64", "--config", str(path), "--env-arg", "max_pending=8"])
    config = config_from_args(args)
    assert (config.learning_rate, config.net_arch, config.n_steps) == (1e-4, (64, 64), 64)
    assert dict(config.env_overrides) == {"load_levels": [0.9], "max_pending": 8}
    assert config.out_dir == TrainConfig.out_dir  # a file never says where the run goes
    run = tmp_path / "run_config.json"
    run.write_text(json.dumps({"train": written.to_json(), "code_version": "x"}))
    assert config_from_args(parser.parse_args(["train", "--config", str(run)])).n_steps == 256


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "cannot read it as JSON"),
        ('{"other": 1}', "no 'train' or 'config' object"),
        ("[]", "no 'train' or 'config' object of TrainConfig fields"),
        ('{"config": {"speed": 3}}', "c.json: config: unknown field(s) speed; valid: "),
        ('{"train": []}', "c.json: train must be an object, got []"),
        ('{"train": {"n_steps": true}}', "c.json: train: n_steps must be an integer, got True"),
        ('{"config": {"net_arch": "64,64"}}', "c.json: config: net_arch must be a tuple of integers, got '64,64'"),
        ('{"config": {"learning_rate": "3e-4"}}', "c.json: config: learning_rate must be a number, got '3e-4'"),
    ],
)
def test_a_bad_config_file_is_one_line(tmp_path: Path, text: str, message: str, capsys) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("arena-gym train: error: --config") and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()
