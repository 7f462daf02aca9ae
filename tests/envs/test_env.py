"""ArenaSchedEnv: checkers, determinism, rewards that decompose into metrics, episode ends, vector envs."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from arena_gym.metrics import job_outcomes
from envs.config import EnvConfig

SMALL_TRACE = "synthetic:n_jobs=8,arrival=poisson,rate_per_h=30,max_gpus=4,iter_log_mean=6"
TRACE = "synthetic:n_jobs=20,arrival=poisson,rate_per_h=20,gpu_types=a40+a10,max_gpus=4,iter_log_mean=7"


def rollout(env: gym.Env, seed: int, steps: int | None = None, agent_seed: int = 0):
    """A random masked rollout: (observations, rewards, final info) until the end or ``steps``."""
    rng = np.random.default_rng(agent_seed)
    obs, info = env.reset(seed=seed)
    observations, rewards = [obs], []
    n = 0
    while steps is None or n < steps:
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        observations.append(obs)
        rewards.append(reward)
        n += 1
        if terminated or truncated:
            break
    return observations, rewards, info


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_registered_ids_pass_gymnasium_and_sb3_checkers(perf, env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(env_id, perf=perf, trace=SMALL_TRACE)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*unconventional shape.*")  # 2-D per-slot arrays are intended
        check_env(env.unwrapped)
        sb3_check_env(env.unwrapped)
    assert env.unwrapped.action_masks().dtype == bool


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_registered_ids_pass_the_checkers_with_their_default_estimator(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    import estimator

    if not hasattr(estimator, "default_perf_model"):
        pytest.skip("the estimator package has no default_perf_model yet")
    env = gym.make(env_id, trace=SMALL_TRACE)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*unconventional shape.*")
        check_env(env.unwrapped)
        sb3_check_env(env.unwrapped)
    _, _, info = rollout(env, seed=0, steps=200)
    assert not info["invalid"]


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes(perf, mode):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, render_mode=mode)
    env.reset(seed=0)
    frame = env.render()
    if mode == "ansi":
        assert frame.startswith("t=") and "a40:" in frame
    else:
        assert frame.dtype == np.uint8 and frame.shape == (4 * 4, 4 * 2, 3)


def test_same_seed_same_trajectory(perf):
    runs = []
    for _ in range(2):
        env = gym.make("ArenaGym/Testbed64-v1", perf=perf, trace=TRACE)
        first = rollout(env, seed=5, steps=300)
        env.reset()  # unseeded resets continue the seeded stream
        second = rollout(env, seed=None, steps=100)
        runs.append((first, second))
    for (obs_a, rew_a, _), (obs_b, rew_b, _) in zip(*runs):
        assert rew_a == rew_b
        for oa, ob in zip(obs_a, obs_b):
            assert all(np.array_equal(oa[k], ob[k]) for k in oa)
    env = gym.make("ArenaGym/Testbed64-v1", perf=perf, trace=TRACE)
    env.reset(seed=5)
    jobs_5 = env.unwrapped.jobs
    env.reset(seed=6)
    assert env.unwrapped.jobs != jobs_5


def test_observations_lie_in_the_space(perf):
    env = gym.make("ArenaGym/Testbed64-v1", perf=perf, trace=TRACE)
    observations, _, _ = rollout(env, seed=1, steps=200)
    space = env.observation_space
    assert all(space.contains(o) for o in observations)


def test_jct_reward_sums_to_minus_total_jct(perf):
    scale = 1 / 1000
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE, reward_scale=scale, reward_norm="none")
    _, rewards, info = rollout(env, seed=3)
    assert "episode_record" not in info
    record = env.unwrapped.last_record
    jcts = [o.jct for o in job_outcomes(record)]
    assert all(j is not None for j in jcts) and info["metrics"]["jobs_finished"] == len(jcts)
    assert math.isclose(sum(rewards), -scale * sum(jcts), rel_tol=1e-9)


@pytest.mark.parametrize("norm", ["jobs", "ideal"])
def test_normalised_jct_return_is_the_average_jct_or_the_jct_over_ideal_time(perf, norm):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE, reward_norm=norm, reward_scale=2.0)
    _, rewards, _ = rollout(env, seed=3)
    base = env.unwrapped
    jcts = [o.jct for o in job_outcomes(base.last_record)]
    if norm == "jobs":
        expected = -2.0 * float(np.mean(jcts)) / 3600.0  # minus the average JCT in hours (x scale)
    else:
        ideal = sum(s.iterations * base.truth_table.best_time(s.model, s.global_batch) for s in base.jobs)
        expected = -2.0 * sum(jcts) / ideal
    assert math.isclose(sum(rewards), expected, rel_tol=1e-9)


def test_slowdown_reward_sums_to_minus_total_slowdown(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE, reward="slowdown", reward_scale=1.0, reward_norm="none")
    _, rewards, _ = rollout(env, seed=4)
    base = env.unwrapped
    specs = {s.job_id: s for s in base.jobs}
    slowdowns = [
        o.jct / (specs[o.job_id].iterations * base.table.best_time(specs[o.job_id].model, specs[o.job_id].global_batch))
        for o in job_outcomes(base.last_record)
    ]
    assert math.isclose(sum(rewards), -sum(slowdowns), rel_tol=1e-9)


def test_throughput_reward_sums_to_samples_trained(perf):
    env = gym.make(
        "ArenaGym/Tiny-v1", perf=perf, trace=TRACE, reward="throughput", reward_scale=1e-6, reward_norm="none"
    )
    _, rewards, info = rollout(env, seed=5)
    assert info["metrics"]["jobs_finished"] == len(env.unwrapped.jobs)
    samples = sum(s.iterations * s.global_batch for s in env.unwrapped.jobs)
    assert math.isclose(sum(rewards), 1e-6 * samples, rel_tol=1e-6)


def test_horizon_truncates_and_charges_time_up_to_it(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE, horizon_s=4000.0, reward_scale=1.0, reward_norm="none")
    _, rewards, info = rollout(env, seed=3)
    record = env.unwrapped.last_record
    assert record.end_time == 4000.0 and info["metrics"]["end_time_s"] == 4000.0
    outcomes = job_outcomes(record)
    assert any(o.finish is None for o in outcomes)
    in_system = sum((o.finish if o.finish is not None else 4000.0) - o.submit for o in outcomes)
    assert math.isclose(sum(rewards), -in_system, rel_tol=1e-9)
    # stepping a finished episode stays finished
    _, reward, terminated, truncated, _ = env.unwrapped.step(0)
    assert reward == 0.0 and truncated and not terminated


def test_window_and_load_levels_of_a_file_trace(perf, tmp_path):
    from arena_gym.cluster import PRESETS
    from arena_gym.harness.experiment import trace_hooks
    from traces import resolve_trace, save_trace

    feasible, iter_time = trace_hooks(perf, PRESETS["tiny"])
    full = resolve_trace(
        "synthetic:n_jobs=40,rate_per_h=10,gpu_types=a40+a10,max_gpus=4", seed=1, feasible=feasible, iter_time=iter_time
    )
    path = save_trace(full, tmp_path / "trace.csv")
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=str(path), window_jobs=10, load_levels=(1.0, 4.0))
    source = {j.job_id: j for j in full.jobs}
    order = [j.job_id for j in full.jobs]
    loads, starts = set(), set()
    for seed in range(12):
        env.reset(seed=seed)
        jobs = env.unwrapped.jobs
        ids = [j.job_id for j in jobs]
        start = order.index(ids[0])
        assert ids == order[start : start + 10] and jobs[0].submit_time == 0.0
        gap, original = jobs[-1].submit_time, source[ids[-1]].submit_time - source[ids[0]].submit_time
        loads.add(round(original / gap, 6))
        starts.add(start)
    assert loads == {1.0, 4.0} and len(starts) > 3


def test_generator_spec_with_its_own_seed_repeats(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=TRACE + ",seed=9")
    env.reset(seed=1)
    first = env.unwrapped.jobs
    env.reset(seed=2)
    assert env.unwrapped.jobs == first


def test_bad_configuration_is_rejected_with_a_clear_message(perf):
    with pytest.raises(ValueError, match="unknown EnvConfig field"):
        gym.make("ArenaGym/Tiny-v1", perf=perf, max_slots=3)
    with pytest.raises(ValueError, match="unknown reward"):
        gym.make("ArenaGym/Tiny-v1", perf=perf, reward="makespan")
    with pytest.raises(ValueError, match="max_substeps"):
        EnvConfig(max_substeps=0)
    with pytest.raises(ValueError, match="render_mode"):
        envs.ArenaSchedEnv(EnvConfig(perf=perf), render_mode="human")


@pytest.mark.timeout(120)
def test_runs_under_subproc_vec_env(perf):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = make_vec_env(
        "ArenaGym/Tiny-v1",
        n_envs=2,
        seed=0,
        vec_env_cls=SubprocVecEnv,
        vec_env_kwargs={"start_method": "fork"},
        env_kwargs={"perf": perf, "trace": TRACE},
    )
    try:
        rng = np.random.default_rng(0)
        venv.reset()
        episodes = 0
        for _ in range(300):
            masks = np.stack(venv.env_method("action_masks"))
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
            _, rewards, dones, infos = venv.step(actions)
            assert np.isfinite(rewards).all() and not any(i["invalid"] for i in infos)
            episodes += int(dones.sum())
        assert episodes >= 2
    finally:
        venv.close()


def test_workload_without_any_choice_ends_on_the_first_step(perf):
    from arena_gym.types import ModelRef
    from tests.helpers import job

    env = gym.make("ArenaGym/Tiny-v1", perf=perf, reward_scale=1.0).unwrapped
    too_big = job("x", 0, 10, "a40", 4, model=ModelRef("gpt", "39B"))  # not in the table: fits nowhere
    obs, info = env.reset(options={"jobs": [too_big]})
    assert env.builder is None and info["action_mask"].tolist() == [False] * (env.codec.n_actions - 1) + [True]
    _, reward, terminated, truncated, info = env.step(env.codec.done_action)
    assert truncated and not terminated and reward == 0.0 and info["metrics"]["jobs_finished"] == 0


def test_decision_the_ground_truth_rejects_is_penalised_not_raised(perf, caplog):
    from arena_gym.types import ModelRef
    from tests.helpers import job, table_model

    big = ModelRef("gpt", "2.6B")  # out of memory on one a10 in the ground truth
    belief = table_model({(big, 128, "a10", 1, 1): 1.0})  # ... but the belief thinks it fits
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, belief=belief, invalid_action_penalty=0.5).unwrapped
    _, info = env.reset(options={"jobs": [job("j", 0, 100, "a10", 1, model=big)]})
    assert np.flatnonzero(info["action_mask"][:-1]).tolist() == [env.codec.encode(0, ("a10", 1, None))]
    _, reward, terminated, truncated, info = env.step(env.codec.encode(0, ("a10", 1, None)))
    assert reward == -0.5 and truncated and not terminated and info["metrics"]["jobs_finished"] == 0
    assert any("rejected" in r.getMessage() for r in caplog.records)
