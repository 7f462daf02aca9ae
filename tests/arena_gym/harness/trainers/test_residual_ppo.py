"""PPO on the residual action space: the warm start is scored as itself, the critic warm-up freezes the actor."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from agents.residual.env import ResidualArenaEnv
from agents.residual.priority import ResidualWeights
from arena_gym.cluster import load_cluster
from arena_gym.harness import load_jobs
from arena_gym.harness.selection import SELECTION_REFERENCE
from arena_gym.harness.trainers.residual_ppo import ResidualPPOConfig, ResidualPPOTrainer, WindowEnv
from arena_gym.harness.trainers.windows import ReferenceScores
from arena_gym.registry import make_perf

TRACE = "synthetic:mix=testbed,n_jobs=24,rate_per_h=60,iter_log_mean=6.5,iter_log_sigma=1.2,iter_min=50,iter_max=20000"
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
    direct = ReferenceScores(0, 1).log_ratios(
        trainer.validation, {"w": f"residual:{tmp_path / 'start.json'}"}, SELECTION_REFERENCE
    )["w"]
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


@pytest.mark.timeout(300)
def test_a_validation_scores_the_actor_after_the_update_of_every_step_it_counts(shared_data, tmp_path) -> None:
    # the first update trains the critic alone, the second moves the actor: the validation at
    # step 128 scores the warm start, the one at 256 (the last, after learn) the moved actor
    config = tiny(shared_data, tmp_path, learning_rate=1e-2, critic_warmup=1)
    ResidualPPOTrainer(config, tmp_path / "run").run(progress=False)
    history = pd.read_csv(tmp_path / "run" / "history.csv")
    assert history["timesteps"].tolist() == [0, 128, 256]
    weights = [np.array(json.loads(w)) for w in history["weights"]]
    assert weights[1] == pytest.approx(START.vector, abs=1e-6) and history["log_std"].iloc[1] == -2.0
    assert np.abs(weights[2] - START.vector).max() > 1e-3 and history["log_std"].iloc[2] != -2.0


@pytest.mark.timeout(300)
def test_the_kl_penalty_is_measured_and_its_coefficient_adapted(shared_data, tmp_path) -> None:
    config = tiny(
        shared_data,
        tmp_path,
        learning_rate=1e-2,
        kl_target=1e-4,
        kl_coef=100.0,
        steps=512,
        critic_warmup=1,
        returns="relative",
        traces=("data:arena/traces/testbed.csv?iteration_divisor=1",),
        loads=(0.9,),
    )
    trainer = ResidualPPOTrainer(config, tmp_path / "run")
    trainer.run(progress=False)
    # the relative returns' scales are the base's average JCTs on the train windows
    assert trainer.scores.mean_jct_h(trainer.train) == trainer._scales
    first = trainer.train.workloads[0]
    direct = trainer.train.__class__(trainer.train.config, [first]).score_specs({"b": "arena-gittins-32-f"}, 0, 1)
    assert trainer._scales[0] == pytest.approx(float(direct["avg_jct_s"].iloc[0]) / 3600, rel=1e-9)
    history = pd.read_csv(tmp_path / "run" / "history.csv")
    # a validation at step 128k follows rollout k and its update, and sees the KL measured on rollout k
    assert history["timesteps"].tolist() == [0, 128, 256, 384, 512] and np.isnan(history["kl"].iloc[0])
    # the first rollout is the warm start's own, the second follows the warm-up's frozen update:
    # both have KL 0 and leave the coefficient as it was (halving it would only weaken the anchor)
    assert history["kl"].iloc[1:3].to_numpy() == pytest.approx([0.0, 0.0], abs=1e-9)
    assert (history["kl_coef"].iloc[1:3] == 100.0).all()
    # the third follows the first update that moved the actor: the coefficient adapts to its KL
    kl, target = history["kl"].iloc[3], config.kl_target
    assert kl > 0
    assert history["kl_coef"].iloc[3] == (200.0 if kl > 1.5 * target else 50.0 if kl < target / 1.5 else 100.0)


def _episode_return(env: WindowEnv) -> float:
    env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(np.zeros(env.action_space.shape, dtype=np.float32))
        total += float(reward)
        done = terminated or truncated
    return total


def test_relative_returns_measure_the_window_against_its_base() -> None:
    cluster = load_cluster("testbed-64")
    window = SimpleNamespace(
        jobs=load_jobs(TRACE, cluster, make_perf("estimator", cluster), seed=5), cluster=cluster.name
    )
    base = ResidualArenaEnv(cluster="testbed-64", max_jobs=32)
    absolute = _episode_return(WindowEnv(base, [window]))  # zero actions: the base itself
    assert absolute < 0  # minus its average JCT in hours
    assert _episode_return(WindowEnv(base, [window], [-absolute])) == pytest.approx(0.0, abs=1e-9)
    assert _episode_return(WindowEnv(base, [window], [-2 * absolute])) == pytest.approx(0.5, rel=1e-9)
    with pytest.raises(ValueError, match="2 scales for 1 workloads"):
        WindowEnv(base, [window], [1.0, 2.0])


def test_a_window_is_replayed_on_its_own_cluster() -> None:
    cluster = load_cluster("testbed-64")
    jobs = load_jobs(TRACE, cluster, make_perf("estimator", cluster), seed=5)
    windows = [SimpleNamespace(jobs=jobs, cluster=name) for name in ("testbed-64", "arena-1280")]
    env = WindowEnv(ResidualArenaEnv(cluster="testbed-64", cluster_variants=("arena-1280",), max_jobs=32), windows)
    seen = set()
    for seed in range(8):
        env.reset(seed=seed)
        seen.add(env.unwrapped.backend.cluster.name)
    assert seen == {"testbed-64", "arena-1280"}


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("steps", 0, "steps must be >= 1"),
        ("critic_warmup", -1, "critic_warmup and validation_limit >= 0"),
        ("learning_rate", float("inf"), "learning_rate must be finite"),
        ("gamma", 0.0, "gamma must be in"),
        ("net_arch", (), "net_arch needs layer sizes"),
        ("kl_target", -1.0, "kl_target must be finite and >= 0"),
        ("kl_coef", 0.0, "kl_coef finite and > 0"),
        ("returns", "ranked", "returns must be one of absolute, relative"),
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
