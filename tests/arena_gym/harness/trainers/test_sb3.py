"""train(): evaluation during training, best model, BC warm start, outputs; TrainConfig validation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from agents.rl.artifact import load_model, read_model_info
from arena_gym.harness.experiment import make_policy
from arena_gym.harness.trainers.sb3 import TrainConfig, config_hash, latest_checkpoint, resume, train
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
        ({"vec": "ray"}, "vec must be one of dummy, subproc, got .ray."),
        ({"wandb_mode": "loud"}, "wandb_mode must be one of disabled, offline, online, got .loud."),
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


def test_a_new_run_never_mixes_with_another_and_a_resume_needs_the_config_of_its_checkpoint(
    tmp_path: Path, env_overrides: dict
) -> None:
    run = tmp_path / "run"
    config = TrainConfig(
        env_id=ENV_ID,
        env_overrides=env_overrides,
        steps=128,
        n_envs=1,
        n_steps=64,
        batch_size=64,
        eval_every=0,
        eval_seeds=(1000,),
        eval_baselines=("fcfs",),
        checkpoint_every=64,
        out_dir=str(run),
        progress=False,
    )
    simulated = tmp_path / "sim"
    simulated.mkdir()
    (simulated / "config.json").write_text(json.dumps({"code_version": "0", "policy": "fcfs", "kind": "simulate"}))
    for replace in (False, True):
        with pytest.raises(ValueError, match="holds simulate results, not an sb3 training run; name a new directory"):
            train(dataclasses.replace(config, out_dir=str(simulated)), replace=replace)
    (simulated / "config.json").write_text(json.dumps({"code_version": "0", "policy": "fcfs"}))  # records no kind
    with pytest.raises(ValueError, match="record no kind; pass --replace if they are an sb3 training run"):
        train(dataclasses.replace(config, out_dir=str(simulated)))
    assert sorted(p.name for p in simulated.iterdir()) == ["config.json"]
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an arena-gym results directory"):
        train(dataclasses.replace(config, out_dir=str(tmp_path / "junk")))
    assert (tmp_path / "junk" / "notes.txt").read_text() == "mine"

    train(config)
    stamp = json.loads((run / "checkpoints" / "model_128_steps.json").read_text())
    assert stamp == {"config_hash": config_hash(config)}
    assert config_hash(dataclasses.replace(config, steps=999, progress=True)) == config_hash(config)
    assert config_hash(dataclasses.replace(config, learning_rate=1e-3)) != config_hash(config)
    result = (run / "result.json").read_text()
    (run / "result.json").unlink()  # as if the run had been killed after its last checkpoint
    with pytest.raises(
        ValueError, match=r"unfinished training run \(latest checkpoint at 128 steps\); continue it with --resume"
    ):
        train(config)
    (run / "result.json").write_text(result)
    (run / "stray.txt").write_text("from the earlier run")
    with pytest.raises(ValueError, match="holds an sb3 training run already; pass --replace to replace it"):
        train(dataclasses.replace(config, steps=64))
    assert (run / "model.zip").is_file() and (run / "stray.txt").exists()
    replaced = train(dataclasses.replace(config, steps=64), replace=True)  # a finished run is replaced as a whole
    assert not (run / "stray.txt").exists() and json.loads((run / "config.json").read_text())["kind"] == "train:sb3"
    assert replaced.model_path == run / "model.zip" and replaced.out_dir == run
    assert json.loads((run / "result.json").read_text())["model"] == str(run / "model.zip")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk", "run", "sim"]  # nothing left beside it
    assert sorted(p.name for p in (run / "checkpoints").glob("model_*")) == [
        "model_64_steps.json",
        "model_64_steps.zip",
    ]
    meta = json.loads((run / "config.json").read_text())
    meta["train"]["learning_rate"] = 1e-3
    (run / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="model_64_steps.zip was written under another config"):
        resume(run, steps=128)
