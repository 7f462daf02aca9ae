"""PPO on the residual action space: the warm start is scored as itself, the critic warm-up freezes the actor."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from agents.search.residual import ResidualWeights
from arena_gym.harness.residual_ppo import ResidualPPOConfig, ResidualPPOTrainer
from arena_gym.harness.residual_train import BaseScores

START = ResidualWeights().with_vector(np.round(np.random.default_rng(2).uniform(-0.5, 0.5, 24) * 64) / 64)


def tiny(shared_data, tmp_path, **changes) -> ResidualPPOConfig:
    path = START.save(tmp_path / "start.json")
    values = {
        "warm_start": str(path),
        "data_dir": str(shared_data),
        "steps": 256,
        "n_envs": 1,
        "n_steps": 128,
        "batch_size": 64,
        "n_epochs": 2,
        "eval_every": 128,
        "validation_limit": 2,
        "workers": 1,
    }
    return ResidualPPOConfig(**(values | changes))


@pytest.mark.timeout(300)
def test_the_warm_start_is_validated_as_the_residual_policy_it_is(shared_data, tmp_path) -> None:
    config = tiny(shared_data, tmp_path, critic_warmup=100)
    trainer = ResidualPPOTrainer(config, tmp_path / "run")
    best = trainer.run(progress=False)
    history = pd.read_csv(tmp_path / "run" / "history.csv")
    assert history["timesteps"].tolist() == [0, 128, 256]
    direct = BaseScores(0, 1).log_ratios(trainer.validation, {"w": f"residual:{tmp_path / 'start.json'}"})["w"]
    assert history["validation_geomean_ratio"][0] == pytest.approx(float(np.exp(direct.mean())), rel=1e-12)
    # the actor never left the warm start: every update trained the critic alone
    assert history["validation_geomean_ratio"].nunique() == 1 and (history["log_std"] == -2.0).all()
    for weights in history["weights"]:
        assert json.loads(weights) == pytest.approx(START.vector.tolist(), abs=1e-6)
    assert best.vector.tolist() == pytest.approx(START.vector.tolist(), abs=1e-6)
    saved = ResidualWeights.load(tmp_path / "run" / "residual.json")
    assert saved.trained["timesteps"] == 0 and saved.trained["validation_windows"] == 2
    assert (tmp_path / "run" / "history.png").stat().st_size > 1000


@pytest.mark.timeout(300)
def test_without_a_warm_up_the_actor_moves(shared_data, tmp_path) -> None:
    ResidualPPOTrainer(tiny(shared_data, tmp_path, learning_rate=1e-2), tmp_path / "run").run(progress=False)
    history = pd.read_csv(tmp_path / "run" / "history.csv")
    last = np.array(json.loads(history["weights"].iloc[-1]))
    assert np.abs(last - START.vector).max() > 1e-3 and history["log_std"].iloc[-1] != -2.0


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("steps", 0, "steps must be >= 1"),
        ("critic_warmup", -1, "critic_warmup and validation_limit >= 0"),
        ("learning_rate", float("inf"), "learning_rate must be finite"),
        ("gamma", 0.0, "gamma must be in"),
        ("net_arch", (), "net_arch needs layer sizes"),
    ],
)
def test_bad_settings_are_refused(field: str, value, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ResidualPPOConfig(**{field: value})


def test_a_bad_warm_start_file_is_refused_before_any_work(tmp_path) -> None:
    (tmp_path / "w.json").write_text("{}")
    with pytest.raises(ValueError, match="residual weights"):
        ResidualPPOTrainer(ResidualPPOConfig(warm_start=str(tmp_path / "w.json")), tmp_path / "run")
    assert not (tmp_path / "run").exists()
