"""Expert iteration: rounds of teacher labels refit the agent; labels and results do not depend on the workers."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest
import torch as th
from sb3_contrib import MaskablePPO

from agents.rl.artifact import ModelInfo, load_model, save_model
from agents.rl.env_factory import env_config, make_env
from arena_gym.harness.trainers.expert_iteration import ExpertIteration, ExpertIterationConfig, LabelTask, label_task
from tests.rl_cases import ENV_ID


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory: pytest.TempPathFactory, env_overrides: dict) -> Path:
    """An untrained slot-network MaskablePPO on the Tiny env, saved with its metadata."""
    from agents.rl.algos import policy_class

    env = make_env(ENV_ID, env_overrides)
    model = MaskablePPO(
        policy_class("maskable_ppo", "slots"), env, seed=3, device="cpu", n_steps=64, policy_kwargs={"net_arch": [16]}
    )
    path = tmp_path_factory.mktemp("warm") / "model.zip"
    return save_model(
        model, path, ModelInfo("maskable_ppo", ENV_ID, env_config(ENV_ID, env_overrides), "test", "slots")
    )


def _config(path: Path, **changes) -> ExpertIterationConfig:
    base = ExpertIterationConfig(
        warm_start=str(path), teacher="arena", rounds=2, episodes=2, epochs=30, learning_rate=3e-3, eval_limit=2
    )
    return dataclasses.replace(base, **changes)


@pytest.fixture(scope="module")
def runs(warm_start: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    out = {}
    for workers in (1, 2):
        out[workers] = tmp_path_factory.mktemp(f"ei{workers}") / "run"
        ExpertIteration(_config(warm_start, workers=workers), out[workers]).run(progress=False)
    return out


def test_rounds_fit_the_agent_to_the_teacher(runs: dict[int, Path]) -> None:
    history = pd.read_csv(runs[1] / "history.csv")
    assert list(history["round"]) == [0, 1, 2]
    first, second = history.iloc[1], history.iloc[2]
    assert first["beta"] == 1.0 and second["beta"] == 0.5
    assert first["teacher_played"] == 1.0 > second["teacher_played"]
    assert second["samples"] == first["samples"] + second["new_samples"]  # every round's labels are kept
    assert second["agent_agreement"] > first["agent_agreement"]  # the fit moved the agent towards the teacher
    assert second["train_agreement"] > 2 * first["agent_agreement"]  # measured 0.48 against 0.19 untrained
    assert second["validation_score"] < 0.6 * history.iloc[0]["validation_score"]  # measured 1.37 against 3.14
    assert all(math.isfinite(s) for s in history["validation_score"])
    for name in ("config.json", "history.png", "best_model.zip", "rounds/round_0.zip", "rounds/round_2.zip"):
        assert (runs[1] / name).is_file()
    best = history.loc[history["validation_score"].idxmin(), "round"]
    best_weights = load_model(runs[1] / "best_model.zip")[0].policy.state_dict()
    round_weights = load_model(runs[1] / "rounds" / f"round_{best}.zip")[0].policy.state_dict()
    assert all(th.equal(best_weights[k], round_weights[k]) for k in best_weights)


def test_workers_do_not_change_the_labels_or_the_result(runs: dict[int, Path]) -> None:
    one, two = (pd.read_csv(runs[w] / "history.csv") for w in (1, 2))
    timing = [c for c in one.columns if c.endswith("_s")]
    pd.testing.assert_frame_equal(one.drop(columns=timing), two.drop(columns=timing))
    a, b = (load_model(runs[w] / "best_model.zip")[0].policy.state_dict() for w in (1, 2))
    assert all(th.equal(a[k], b[k]) for k in a)


def test_a_label_task_is_deterministic(warm_start: Path, env_overrides: dict) -> None:
    task = LabelTask(warm_start.read_bytes(), env_config(ENV_ID, env_overrides), "arena-gittins", 0.5, 7, 0.99)
    (first, _), (second, _) = label_task(task), label_task(task)
    assert (first.data.actions == second.data.actions).all() and len(first.data) > 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rounds": 0}, "rounds must be >= 1"),
        ({"beta": 1.5}, "beta must be in"),
        ({"warm_start": ""}, "warm_start must name"),
        ({"learning_rate": 0.0}, "learning_rate > 0"),
    ],
)
def test_bad_settings_are_refused(warm_start: Path, changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _config(warm_start, **changes)


def test_bad_teacher_or_model_fails_before_any_work(warm_start: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no-such-policy"):
        ExpertIteration(_config(warm_start, teacher="no-such-policy"), tmp_path / "a")
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="broken.zip"):
        ExpertIteration(_config(warm_start, warm_start=str(broken)), tmp_path / "b")
    with pytest.raises(ValueError, match="expert iteration needs warm_start: an SB3 model zip"):
        ExpertIteration(ExpertIterationConfig(), tmp_path / "c")
    assert not any((tmp_path / name).exists() for name in ("a", "b", "c"))
