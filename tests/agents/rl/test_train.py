"""train(): evaluation during training, best model, BC warm start, outputs; TrainConfig validation."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from agents.rl.artifact import read_model_info
from agents.rl.train import TrainConfig, train
from arena_gym.experiment import make_policy
from tests.agents.rl.conftest import ENV_ID


def test_train_with_bc_and_periodic_evaluation(tmp_path: Path, env_overrides: dict) -> None:
    config = TrainConfig(env_id=ENV_ID, env_overrides=env_overrides, steps=256, n_envs=2, n_steps=64, batch_size=64,
                         eval_every=128, eval_seeds=(1000, 1001), eval_baselines=("fcfs",), checkpoint_every=0,
                         bc_warm_start_steps=200, bc_expert="fcfs", bc_epochs=5, out_dir=str(tmp_path / "run"),
                         progress=False)
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


@pytest.mark.parametrize("kwargs, message", [
    ({"algo": "a2c"}, "unknown algo"),
    ({"vec": "ray"}, "unknown vec"),
    ({"wandb_mode": "loud"}, "unknown wandb_mode"),
    ({"n_envs": 0}, "n_envs >= 1"),
    ({"eval_seeds": ()}, "at least one validation seed"),
    ({"seed": 5, "n_envs": 2, "eval_seeds": (7,)}, "overlap the training seeds"),
    ({"algo": "dqn", "bc_warm_start_steps": 10}, "actor-critic"),
    ({"eval_every": -1}, ">= 0"),
])
def test_config_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_bad_hyperparameters_are_a_value_error(tmp_path: Path, env_overrides: dict) -> None:
    config = TrainConfig(env_overrides=env_overrides, steps=64, algo_kwargs={"no_such_knob": 1},
                         out_dir=str(tmp_path / "bad"), progress=False)
    with pytest.raises(ValueError, match="bad hyperparameters for maskable_ppo"):
        train(config)
