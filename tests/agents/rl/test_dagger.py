"""DAgger labelling: beta 1 replays the teacher's own episode, labels are deterministic, the mixture is honoured."""

from __future__ import annotations

import numpy as np
import pytest
from sb3_contrib import MaskablePPO

from agents.rl.algos import greedy_action
from agents.rl.dagger import label_episode
from agents.rl.env_factory import make_env
from arena_gym.registry import make_policy
from envs import HeuristicAgent
from tests.rl_cases import ENV_ID


@pytest.fixture(scope="module")
def env(env_overrides: dict):
    return make_env(ENV_ID, env_overrides)


@pytest.fixture(scope="module")
def agent(env):
    model = MaskablePPO("MultiInputPolicy", env, seed=3, device="cpu", n_steps=64, batch_size=32)
    return lambda obs, mask: greedy_action(model, obs, mask)


def test_beta_one_plays_the_teachers_own_episode(env, agent) -> None:
    own = HeuristicAgent(make_policy("arena"), env).play(seed=11)
    episode = label_episode(env, make_policy("arena"), agent, beta=1.0, seed=11)
    played = env.unwrapped.last_record
    assert played.events == own.record.events  # the same event log as the teacher scheduling alone
    assert episode.teacher_played == 1.0
    assert len(episode.data) == own.steps
    assert episode.data.masks[np.arange(len(episode.data)), episode.data.actions].all()  # labels are valid actions
    assert episode.decisions >= 1


def test_labels_are_a_function_of_the_seed(env, agent) -> None:
    first = label_episode(env, make_policy("arena-gittins"), agent, beta=0.5, seed=5)
    second = label_episode(env, make_policy("arena-gittins"), agent, beta=0.5, seed=5)
    other = label_episode(env, make_policy("arena-gittins"), agent, beta=0.5, seed=6)
    assert np.array_equal(first.data.actions, second.data.actions)
    assert np.array_equal(first.data.returns, second.data.returns)
    assert all(np.array_equal(first.data.obs[k], second.data.obs[k]) for k in first.data.obs)
    assert not (
        len(other.data) == len(first.data) and np.array_equal(other.data.actions, first.data.actions)
    )  # another window


def test_beta_zero_plays_the_agent(env, agent) -> None:
    episode = label_episode(env, make_policy("arena"), agent, beta=0.0, seed=11)
    assert episode.teacher_played == pytest.approx(episode.agent_agreement)  # played the label only where they agreed
    assert episode.agent_agreement < 1.0  # an untrained agent is not Arena


def test_beta_out_of_range_is_refused(env, agent) -> None:
    with pytest.raises(ValueError, match="beta"):
        label_episode(env, make_policy("arena"), agent, beta=1.5, seed=0)
