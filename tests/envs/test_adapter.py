"""ObservationPolicy: deploying an obs -> action function through run_episode reproduces the env rollout."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from arena_gym.harness.experiment import make_policy
from arena_gym.loop import run_episode
from arena_gym.metrics import WALL_CLOCK_KEYS, compute_metrics
from arena_gym.protocols import Policy
from arena_gym.sim import SimBackend
from envs.adapter import ObservationPolicy
from envs.expert import HeuristicAgent

TRACE = "synthetic:n_jobs=30,arrival=poisson,rate_per_h=30,gpu_types=a40+a10,max_gpus=4,iter_log_mean=7.5"


def record_rollout(env: gym.Env, agent: HeuristicAgent, seed: int) -> tuple[list, dict]:
    """(observation, env mask, action) for every step of one episode driven by ``agent``, and the final info."""
    obs, info = env.reset(seed=seed)
    agent.reset()
    steps = []
    while True:
        action = agent.act()
        steps.append((obs, info["action_mask"], action))
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return steps, info


@pytest.mark.parametrize("policy_name", ["fcfs", "srtf"])
def test_replayed_predictions_reproduce_the_env_episode(perf, policy_name):
    heuristic = make_policy(policy_name)
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE, max_pending=32, ap_search=heuristic.ap_search)
    steps, info = record_rollout(env, HeuristicAgent(heuristic, env), seed=2)
    replay = iter(steps)

    def predict(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        expected_obs, env_mask, action = next(replay)
        assert obs.keys() == expected_obs.keys()
        for key in obs:
            np.testing.assert_array_equal(obs[key], expected_obs[key], err_msg=key)
        # on sub-actions the env mask only ever narrows the builder's ("done" differs by the idle guards)
        assert not (env_mask[:-1] & ~mask[:-1]).any()
        return action

    base = env.unwrapped
    policy = ObservationPolicy("replay", predict, base.config, ap_search=heuristic.ap_search)
    assert isinstance(policy, Policy)
    backend = SimBackend(base.cluster, base.truth, base.belief, base.config.sim_config())
    metrics = compute_metrics(run_episode(backend, policy, base.jobs))
    assert next(replay, None) is None  # every recorded step was asked for
    for key in metrics.keys() - WALL_CLOCK_KEYS:
        assert metrics[key] == info["metrics"][key] or (np.isnan(metrics[key]) and np.isnan(info["metrics"][key])), key


def test_invalid_predictions_are_ignored_and_bounded(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE, max_substeps=5)
    base = env.unwrapped
    env.reset(seed=0)
    calls = []

    def predict(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        calls.append(mask)
        return int(np.flatnonzero(~mask)[0])  # always a masked action

    decision = ObservationPolicy("bad", predict, base.config).decide(base.snapshot)
    assert decision.is_empty and len(calls) == 5


def test_idle_guard_never_leaves_the_cluster_idle_with_a_startable_job(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE)
    base = env.unwrapped
    env.reset(seed=0)
    seen = []

    def lazy(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        seen.append(mask[-1])
        return base.codec.done_action if mask[-1] else int(np.flatnonzero(mask)[0])

    snapshot = base.snapshot
    assert not snapshot.running and snapshot.pending  # the first decision point: idle, jobs queued
    decision = ObservationPolicy("lazy", lazy, base.config).decide(snapshot)
    # "done" was masked, so the lazy policy had to start the queued job
    assert len(decision.allocations) == 1 and not seen[0]
