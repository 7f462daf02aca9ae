"""ResidualArenaEnv: zero actions are arena-gittins-32-f, the return is minus the average JCT, SB3 trains on it."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agents.residual.env import ResidualArenaEnv
from agents.residual.priority import RESIDUAL_FEATURES
from arena_gym.cluster import load_cluster
from arena_gym.harness import load_jobs
from arena_gym.loop import run_episode
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig

TRACE = "synthetic:mix=testbed,n_jobs=30,rate_per_h=60,iter_log_mean=6.5,iter_log_sigma=1.2,iter_min=50,iter_max=20000"


@pytest.fixture(scope="module")
def jobs():
    cluster = load_cluster("testbed-64")
    return load_jobs(TRACE, cluster, make_perf("estimator", cluster), seed=3)


def _episode(env: ResidualArenaEnv, jobs, action: np.ndarray) -> tuple[float, int, dict]:
    env.reset(options={"jobs": jobs})
    total, steps, done, info = 0.0, 0, False, {}
    while not done:
        _, reward, terminated, truncated, info = env.step(action)
        total, steps, done = total + reward, steps + 1, terminated or truncated
    assert terminated
    return total, steps, info


def test_zero_actions_are_the_base_policy_and_the_return_is_minus_the_average_jct(jobs) -> None:
    env = ResidualArenaEnv(cluster="testbed-64")
    ret, steps, info = _episode(env, jobs, np.zeros(env.action_space.shape, np.float32))
    base = make_policy("arena-gittins-32-f")
    cluster = load_cluster("testbed-64")
    record = run_episode(
        SimBackend(cluster, make_perf("estimator", cluster), config=SimConfig(overhead_class=base.ap_search)),
        base,
        jobs,
    )
    assert env.last_record is not None and env.last_record.events == record.events
    assert steps >= len(jobs)  # at least every arrival is a choice
    assert ret == pytest.approx(-info["metrics"]["avg_jct_s"] / 3600.0, rel=1e-9)
    # promoting the later-listed jobs and protecting the earlier ones changes the schedule
    push = np.stack([np.linspace(-3, 3, env.max_jobs), np.linspace(3, -3, env.max_jobs)], axis=1).astype(np.float32)
    other, _, _ = _episode(env, jobs, push)
    assert other != pytest.approx(ret)


def test_observations_hold_the_listed_jobs_features(jobs) -> None:
    env = ResidualArenaEnv(cluster="testbed-64", max_jobs=8)
    obs, _ = env.reset(options={"jobs": jobs})
    assert obs["jobs"].shape == (8, len(RESIDUAL_FEATURES)) and env.observation_space.contains(obs)
    listed = int(obs["present"].sum())
    assert listed >= 1 and (obs["jobs"][:listed, 0] == 1.0).all() and not obs["jobs"][listed:].any()


def test_the_gymnasium_checker_passes_and_bad_input_is_refused(jobs) -> None:
    env = ResidualArenaEnv(cluster="testbed-64", max_jobs=16, trace=TRACE)
    check_env(env, skip_render_check=True)
    for seed in range(3):  # episodes after episodes (job ids repeat across workloads)
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="unknown option\\(s\\) trace; valid: jobs, cluster$"):
        env.reset(options={"trace": "x"})
    with pytest.raises(ValueError, match="max_jobs"):
        ResidualArenaEnv(max_jobs=0)


def test_sb3_ppo_learns_on_it(jobs) -> None:
    sb3 = pytest.importorskip("stable_baselines3")
    env = ResidualArenaEnv(cluster="testbed-64", max_jobs=16, trace=TRACE)
    model = sb3.PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(128)
    obs, _ = env.reset(options={"jobs": jobs})
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (16, 2) and env.action_space.contains(action.astype(np.float32))


def test_an_episode_runs_on_the_cluster_its_options_or_its_draw_name(jobs) -> None:
    env = ResidualArenaEnv(cluster="testbed-64", cluster_variants=("arena-1280",))
    zeros = np.zeros(env.action_space.shape, np.float32)
    base = make_policy("arena-gittins-32-f")
    big = load_cluster("arena-1280")
    env.reset(options={"jobs": jobs, "cluster": "arena-1280"})
    while env.step(zeros)[2:4] == (False, False):
        pass
    record = run_episode(
        SimBackend(big, make_perf("estimator", big), config=SimConfig(overhead_class=base.ap_search)), base, jobs
    )
    assert env.last_record is not None and env.last_record.events == record.events  # zero actions there too
    _, _, small = _episode(env, jobs, zeros)  # no cluster named: the config's
    assert env.backend.cluster.name == "testbed-64" and env.last_record.events != record.events
    drawn = set()
    for seed in range(12):
        env.reset(seed=seed)
        drawn.add(env.backend.cluster.name)
    assert drawn == {"testbed-64", "arena-1280"}
    for options, problem in (
        ({"jobs": jobs, "cluster": "tiny"}, "must name one of testbed-64, arena-1280 and go with 'jobs', got 'tiny'"),
        ({"cluster": "arena-1280"}, "go with 'jobs', got 'arena-1280'"),
    ):
        with pytest.raises(ValueError, match=problem):
            env.reset(options=options)
