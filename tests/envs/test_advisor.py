"""The advisor: a heuristic's decision offered as an observation; following it replays the heuristic."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from arena_gym.harness.experiment import make_policy
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.sim import SimBackend
from envs import ObservationPolicy

TRACE = "synthetic:n_jobs=20,arrival=poisson,rate_per_h=20,gpu_types=a40+a10,max_gpus=8,iter_log_mean=7"


def follow(obs, mask, done):
    """Take the first advised action, else "done" (or the last valid action when "done" is masked)."""
    advised = np.flatnonzero(obs["advice"].ravel())
    action = int(advised[0]) if len(advised) else done
    return action if mask[action] else int(np.flatnonzero(mask)[-1])


@pytest.mark.parametrize("name", ["arena", "fcfs"])
def test_following_the_advice_replays_the_heuristic(perf, name):
    env = gym.make(
        "ArenaGym/Testbed64-v1", perf=perf, trace=TRACE, advisor=name, ap_search=make_policy(name).ap_search
    ).unwrapped
    obs, info = env.reset(seed=1)
    assert obs["advice"].shape == obs["mask"].shape and obs["advice"].sum() >= 1
    assert not (obs["advice"] > obs["mask"]).any()  # only valid actions are advised
    while True:
        obs, _, terminated, truncated, info = env.step(follow(obs, info["action_mask"], env.codec.done_action))
        if terminated or truncated:
            break
    policy = make_policy(name)
    backend = SimBackend(env.cluster, env.truth, env.belief, env.config.sim_config(policy.ap_search))
    reference = compute_metrics(run_episode(backend, policy, env.jobs))
    assert info["metrics"]["jobs_finished"] == reference["jobs_finished"] == len(env.jobs)
    assert info["metrics"]["avg_jct_s"] == pytest.approx(reference["avg_jct_s"], rel=0.02)


def test_deployed_policy_sees_the_same_advice(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE, advisor="arena").unwrapped
    obs, info = env.reset(seed=2)
    while True:
        obs, _, terminated, truncated, info = env.step(follow(obs, info["action_mask"], env.codec.done_action))
        if terminated or truncated:
            break
    deployed = ObservationPolicy("follow", lambda o, m: follow(o, m, env.codec.done_action), env.config)
    assert deployed.advisor is not None and not deployed.clairvoyant
    backend = SimBackend(env.cluster, env.truth, env.belief, env.config.sim_config())
    metrics = compute_metrics(run_episode(backend, deployed, env.jobs))
    assert metrics["avg_jct_s"] == pytest.approx(info["metrics"]["avg_jct_s"], rel=1e-9)
    srtf_advised = ObservationPolicy("x", lambda o, m: 0, env.config.replace(advisor="srtf"))
    assert srtf_advised.clairvoyant  # a clairvoyant advisor makes the agent clairvoyant


def test_unknown_advisor_is_a_clear_error(perf):
    with pytest.raises(ValueError, match="unknown policy 'oracle'"):
        gym.make("ArenaGym/Tiny-v1", perf=perf, advisor="oracle")
    with pytest.raises(TypeError, match="advisor"):
        gym.make("ArenaGym/Tiny-v1", perf=perf, advisor=3)
