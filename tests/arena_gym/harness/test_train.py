"""train(): evaluation during training, best model, BC warm start, outputs; TrainConfig validation."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from agents.rl.artifact import load_model, read_model_info
from arena_gym.harness.experiment import make_policy
from arena_gym.harness.train import TrainConfig, latest_checkpoint, resume, train
from tests.rl_cases import ENV_ID


def test_train_with_bc_and_periodic_evaluation(tmp_path: Path, env_overrides: dict) -> None:
    config = TrainConfig(
        env_id=ENV_ID,
        env_overrides=env_overrides,
        steps=256,
        n_envs=2,
        n_steps=64,
        batch_size=64,
        eval_every=128,
        eval_seeds=(1000, 1001),
        eval_baselines=("fcfs",),
        checkpoint_every=0,
        bc_warm_start_steps=200,
        bc_expert=("fcfs",),
        bc_epochs=5,
        out_dir=str(tmp_path / "run"),
        progress=False,
    )
    result = train(config)
    assert result.timesteps == 256
    assert result.bc is not None and result.bc.samples >= 200 and result.bc.final_loss < result.bc.initial_loss
    history = pd.read_csv(tmp_path / "run" / "eval_history.csv")
    assert sorted(history["timesteps"].unique()) == [0, 128, 256]
    assert set(history["policy"]) == {"agent", "fcfs"} and set(history["seed"]) == {1000, 1001}
    table = pd.read_csv(result.eval_path)
    assert set(table["policy"]) == {"agent", "agent-best", "fcfs"}
    fcfs = table[table["policy"] == "fcfs"]["avg_jct_s"].mean()
    assert result.metrics["fcfs_avg_jct_s"] == pytest.approx(fcfs)
    assert result.best_model_path is not None
    assert read_model_info(result.best_model_path).env_config.trace == env_overrides["trace"]
    assert make_policy(f"sb3:{result.best_model_path}").name == f"sb3:{result.best_model_path}"
    curve = pd.read_csv(result.learning_curve_path)
    assert list(curve.columns[:3]) == ["timesteps", "episode_return", "episode_length"]
    assert (curve["episode_return"] < 0).all()
    assert (tmp_path / "run" / "learning_curve.png").stat().st_size > 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"algo": "a2c"}, "unknown algo"),
        ({"vec": "ray"}, "unknown vec"),
        ({"wandb_mode": "loud"}, "unknown wandb_mode"),
        ({"n_envs": 0}, "n_envs must be >= 1"),
        ({"batch_size": 1}, "batch_size must be >= 2"),
        ({"net_arch": ()}, "net_arch"),
        ({"net_arch": (64, 0)}, "net_arch"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"eval_seeds": ()}, "at least one validation seed"),
        ({"algo": "dqn", "bc_warm_start_steps": 10}, "actor-critic"),
        ({"eval_every": -1}, ">= 0"),
        ({"env_overrides": {"split": "test"}}, "may not set split"),
    ],
)
def test_config_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("kwargs", [{"steps": "10"}, {"net_arch": (64.5,)}, {"progress": 1}, {"bc_expert": "arena"}])
def test_config_types(kwargs: dict) -> None:
    with pytest.raises(TypeError, match=next(iter(kwargs))):
        TrainConfig(**kwargs)


def test_resume_continues_from_the_latest_checkpoint(tmp_path: Path, env_overrides: dict) -> None:
    config = TrainConfig(
        env_id=ENV_ID,
        env_overrides=env_overrides,
        steps=256,
        n_envs=1,
        n_steps=64,
        batch_size=64,
        eval_every=128,
        eval_seeds=(1000,),
        eval_baselines=("fcfs",),
        checkpoint_every=128,
        out_dir=str(tmp_path / "run"),
        progress=False,
    )
    first = train(config)
    assert first.timesteps == 256 and latest_checkpoint(tmp_path / "run")[1] == 256
    with pytest.raises(ValueError, match="give more steps"):
        resume(tmp_path / "run")
    params = {k: v.clone() for k, v in load_model(first.model_path)[0].policy.state_dict().items()}
    second = resume(tmp_path / "run", steps=384)
    assert second.timesteps == 384
    history = pd.read_csv(tmp_path / "run" / "eval_history.csv")
    assert sorted(history["timesteps"].unique()) == [0, 128, 256, 384]  # the first run's validations kept
    assert json.loads((tmp_path / "run" / "config.json").read_text())["resumed_from_steps"] == 256
    resumed = load_model(second.model_path)[0].policy.state_dict()
    assert any(not torch.equal(params[k], resumed[k]) for k in params)  # it learned further
    curve = pd.read_csv(second.learning_curve_path)
    assert curve["timesteps"].is_monotonic_increasing and curve["timesteps"].max() > 256
    with pytest.raises(ValueError, match="no config.json"):
        resume(tmp_path / "nowhere")


def test_bad_hyperparameters_are_a_value_error(tmp_path: Path, env_overrides: dict) -> None:
    config = TrainConfig(
        env_overrides=env_overrides,
        steps=64,
        algo_kwargs={"no_such_knob": 1},
        out_dir=str(tmp_path / "bad"),
        progress=False,
    )
    with pytest.raises(ValueError, match="bad hyperparameters for maskable_ppo"):
        train(config)
