"""The SB3 policy of the residual action space: its mean actor is a residual network, and back."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from stable_baselines3 import PPO

from agents.residual.env import ResidualArenaEnv
from agents.residual.network import ResidualPolicy, TeacherAnchor, set_weights, weights_of
from agents.residual.priority import RESIDUAL_FEATURES, ResidualWeights, residual_policy
from arena_gym.cluster import load_cluster
from arena_gym.harness import load_jobs
from arena_gym.loop import run_episode
from arena_gym.registry import make_perf
from arena_gym.sim import SimBackend, SimConfig

TRACE = "synthetic:mix=testbed,n_jobs=24,rate_per_h=60,iter_log_mean=6.5,iter_log_sigma=1.2,iter_min=50,iter_max=20000"
N = len(RESIDUAL_FEATURES)
# multiples of 1/64: exact in float32, so the network and the file hold the same numbers
WEIGHTS = ResidualWeights().with_vector(np.round(np.random.default_rng(4).uniform(-0.6, 0.6, 2 * N) * 64) / 64)


@pytest.fixture(scope="module")
def model() -> PPO:
    env = ResidualArenaEnv(cluster="testbed-64", max_jobs=32)
    ppo = PPO(ResidualPolicy, env, n_steps=32, batch_size=32, policy_kwargs={"net_arch": [16]}, device="cpu")
    return ppo


def test_a_fresh_actor_is_the_base_and_weights_go_in_and_out(model: PPO) -> None:
    assert not model.policy.mlp_extractor.actor.weight.detach().any()
    set_weights(model.policy, WEIGHTS)
    assert weights_of(model.policy, ResidualWeights()).vector.tolist() == WEIGHTS.vector.tolist()


def test_the_mean_actor_drives_the_env_as_the_residual_policy_drives_the_simulator(model: PPO) -> None:
    cluster = load_cluster("testbed-64")
    jobs = load_jobs(TRACE, cluster, make_perf("estimator", cluster), seed=5)
    set_weights(model.policy, WEIGHTS)
    env = model.get_env().envs[0].unwrapped
    obs, done = env.reset(options={"jobs": jobs}), False
    obs = obs[0]
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        present = obs["present"].astype(bool)
        expected = obs["jobs"] @ np.array([WEIGHTS.order, WEIGHTS.urgency]).T
        np.testing.assert_allclose(action[present], expected[present], rtol=1e-5, atol=1e-6)
        assert not action[~present].any()
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    policy = residual_policy(WEIGHTS)
    record = run_episode(
        SimBackend(cluster, make_perf("estimator", cluster), config=SimConfig(overhead_class=policy.ap_search)),
        policy,
        jobs,
    )
    assert env.last_record.events == record.events


def test_the_actor_parameters_are_the_weights_and_the_noise(model: PPO) -> None:
    params = model.policy.actor_parameters()
    assert [tuple(p.shape) for p in params] == [(2, N), (2 * 32,)]
    assert all(isinstance(p, th.nn.Parameter) for p in params)


def _observations(env: ResidualArenaEnv, n: int) -> dict[str, th.Tensor]:
    obs, _ = env.reset(seed=1)
    rows = [obs]
    for _ in range(n - 1):
        obs, _, terminated, truncated, _ = env.step(np.zeros(env.action_space.shape, dtype=np.float32))
        if terminated or truncated:
            break
        rows.append(obs)
    return {k: th.as_tensor(np.stack([r[k] for r in rows])) for k in rows[0]}


def test_the_kl_penalty_is_the_gaussians_kl_from_the_teacher(model: PPO) -> None:
    policy = model.policy
    obs = _observations(model.env.envs[0].unwrapped, 6)
    set_weights(policy, WEIGHTS)
    policy.anchor = TeacherAnchor(WEIGHTS, float(policy.log_std[0].detach()), coef=0.5, target=0.01)
    try:
        assert th.allclose(policy.teacher_kl(obs), th.zeros(len(obs["jobs"])), atol=1e-6)  # at the teacher
        set_weights(policy, ResidualWeights().with_vector(WEIGHTS.vector + 0.25))
        with th.no_grad():
            policy.log_std.add_(0.3)
            kl = policy.teacher_kl(obs)
            jobs, present = obs["jobs"], obs["present"].unsqueeze(2)
            teacher = th.distributions.Normal(jobs @ policy.anchor.weight.T, np.exp(policy.anchor.log_std))
            mean = policy.mlp_extractor.actor(jobs)
            student = th.distributions.Normal(mean, th.exp(policy.log_std.view(-1, 2)).expand_as(mean))
            expected = (th.distributions.kl_divergence(teacher, student) * present).sum((1, 2))
            assert th.allclose(kl, expected, rtol=1e-5) and (kl > 0).all()
            actions = th.zeros((len(jobs), 2 * jobs.shape[1]))
            _, _, penalty = policy.evaluate_actions(obs, actions)
            assert penalty is not None and th.allclose(penalty, -0.5 * kl)  # in the entropy's place
            policy.log_std.sub_(0.3)
    finally:
        policy.anchor = None


def test_the_anchor_coefficient_adapts_towards_the_target() -> None:
    anchor = TeacherAnchor(ResidualWeights(), -2.0, coef=1.0, target=0.01)
    anchor.adapt(0.02)
    assert anchor.coef == 2.0
    anchor.adapt(0.012)
    assert anchor.coef == 2.0  # within 1.5x of the target
    anchor.adapt(0.001)
    assert anchor.coef == 1.0


def test_descending_the_penalty_returns_to_the_teacher(model: PPO) -> None:
    policy = model.policy
    obs = _observations(model.env.envs[0].unwrapped, 6)
    set_weights(policy, ResidualWeights().with_vector(WEIGHTS.vector + 0.2))
    policy.anchor = TeacherAnchor(WEIGHTS, float(policy.log_std[0].detach()), coef=1.0, target=0.01)
    try:
        optimizer = th.optim.SGD([policy.mlp_extractor.actor.weight], lr=1e-3)
        before = float(policy.teacher_kl(obs).mean().detach())
        for _ in range(100):
            _, _, penalty = policy.evaluate_actions(obs, th.zeros((len(obs["jobs"]), 2 * obs["jobs"].shape[1])))
            assert penalty is not None
            optimizer.zero_grad()
            (-penalty.mean()).backward()  # PPO's entropy term with ent_coef 1
            optimizer.step()
        assert float(policy.teacher_kl(obs).mean().detach()) < 0.25 * before
    finally:
        policy.anchor = None
        set_weights(policy, ResidualWeights())
