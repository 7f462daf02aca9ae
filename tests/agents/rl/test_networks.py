"""The slot-structured policy: logits in the codec's order, one network shared by the slots, saved and loaded safely."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

from agents.rl.algos import greedy_action, policy_class
from agents.rl.artifact import ModelInfo, load_model, read_model_info, save_model
from agents.rl.env_factory import env_config, make_env
from agents.rl.networks import SlotPolicy
from tests.rl_cases import ENV_ID


@pytest.fixture(scope="module")
def model(env_overrides: dict) -> MaskablePPO:
    env = make_env(ENV_ID, {**env_overrides, "advisor": "arena"})
    return MaskablePPO(
        SlotPolicy, env, n_steps=64, batch_size=32, seed=1, device="cpu", policy_kwargs={"net_arch": [32, 32]}
    )


def _logits(model: MaskablePPO, obs: dict) -> torch.Tensor:
    tensor, _ = model.policy.obs_to_tensor(obs)
    with torch.no_grad():
        return model.policy.get_distribution(tensor).distribution.logits[0]


def test_logits_follow_the_slots(model: MaskablePPO, env_overrides: dict) -> None:
    env = make_env(ENV_ID, {**env_overrides, "advisor": "arena"})
    obs, info = env.reset(seed=4)
    codec = env.unwrapped.codec
    while len(np.flatnonzero(obs["jobs"][:, 0])) < 2:  # play on until two slots hold jobs
        obs, _, _, _, info = env.step(int(np.flatnonzero(info["action_mask"])[-1]))
    logits = _logits(model, obs)
    assert logits.shape == (codec.n_actions,)
    occupied = np.flatnonzero(obs["jobs"][:, 0])
    a, b = int(occupied[0]), int(occupied[1])
    swapped = {k: v.copy() for k, v in obs.items()}
    for key in ("jobs", "grid", "mask", "advice"):
        swapped[key][[a, b]] = swapped[key][[b, a]]
    other = _logits(model, swapped)
    w = codec.width
    # one network for every slot: swapping two slots' rows swaps their logits and nothing else
    assert torch.allclose(other[a * w : (a + 1) * w], logits[b * w : (b + 1) * w], atol=1e-5)
    assert torch.allclose(other[b * w : (b + 1) * w], logits[a * w : (a + 1) * w], atol=1e-5)
    assert torch.allclose(other[-1], logits[-1], atol=1e-5)


def test_trains_saves_and_loads_without_pickles(model: MaskablePPO, env_overrides: dict, tmp_path: Path) -> None:
    model.learn(128)
    config = env_config(ENV_ID, {**env_overrides, "advisor": "arena"})
    path = save_model(model, tmp_path / "slots.zip", ModelInfo("maskable_ppo", ENV_ID, config, "test", "slots"))
    assert read_model_info(path).policy == "slots"
    loaded, _ = load_model(path)
    assert type(loaded.policy) is SlotPolicy
    env = make_env(ENV_ID, {**env_overrides, "advisor": "arena"})
    obs, info = env.reset(seed=7)
    for _ in range(20):
        action = greedy_action(model, obs, info["action_mask"])
        assert action == greedy_action(loaded, obs, info["action_mask"]) and info["action_mask"][action]
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()


def test_architecture_names_are_checked() -> None:
    assert policy_class("maskable_ppo", "slots") is SlotPolicy
    with pytest.raises(ValueError, match="unknown policy architecture"):
        policy_class("maskable_ppo", "transformer")
    with pytest.raises(ValueError, match="maskable_ppo only"):
        policy_class("ppo", "slots")
