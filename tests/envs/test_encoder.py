"""ObservationEncoder: documented features on a hand-built decision point."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.encoder import CLOCK_FEATURES, CLUSTER_FEATURES, JOB_FEATURES, log_count, model_size_feature, squash
from tests.helpers import GPT, job


def col(name: str) -> int:
    return JOB_FEATURES.index(name)


def test_features_of_a_small_scenario(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, max_substeps=8)
    codec = env.unwrapped.codec
    jobs = [job("a", 0, 1000, "a40", 1), job("b", 0, 500, "a10", 2, batch=256), job("c", 0, 100, "a40", 4)]
    obs, _ = env.reset(options={"jobs": jobs})
    assert obs["jobs"][:3, col("present")].tolist() == [1, 1, 1] and obs["jobs"][3:, col("present")].sum() == 0
    assert obs["jobs"][1, col("requested_gpus")] == pytest.approx(log_count(2)) == pytest.approx(0.4)
    assert obs["jobs"][0, col("model_size")] == pytest.approx(model_size_feature(GPT.size))
    assert obs["jobs"][0, col("family_gpt")] == 1 and obs["jobs"][0, col("family_moe")] == 0
    n = len(JOB_FEATURES)
    assert obs["jobs"][0, n : n + 2].tolist() == [1, 0]  # requested a40
    assert obs["jobs"][1, n : n + 2].tolist() == [0, 1]  # requested a10
    # grid: relative belief throughput, 1 on the job's fastest cell
    assert obs["grid"][0].max() == pytest.approx(1.0) and (obs["grid"] <= 1).all()
    fastest = codec.cells[int(np.argmax(obs["grid"][0]))]
    assert fastest == ("a40", 4, None)
    # one GPU of a40 node 0 taken: free 3/4, 1 of 2 nodes whole, 1 of 3 free GPUs on a partly used node
    obs, _, _, _, _ = env.step(codec.encode(0, ("a40", 1, None)))
    a40 = obs["cluster"][0]
    assert a40.tolist() == pytest.approx([0.75, 0.5, 1 / 3, a40[CLUSTER_FEATURES.index("pending_demand")]])
    assert obs["jobs"][0, col("touched")] == 1 and obs["jobs"][1, col("touched")] == 0
    assert obs["clock"][CLOCK_FEATURES.index("substeps")] == pytest.approx(1 / 8)
    assert not obs["mask"][0].any()  # the touched slot is fully masked


def test_squash_and_counts():
    assert squash(0, 10) == 0 and squash(10, 10) == 0.5 and squash(float("inf"), 1) == 1
    assert [log_count(n) for n in (None, 1, 16)] == [0.0, 0.2, 1.0]
    assert model_size_feature("1.3B") == pytest.approx((np.log10(1.3e9) - 8) / 4)
    assert model_size_feature("odd") == 0.0


def test_time_dependent_features_follow_the_job_views(perf):
    env = gym.make(
        "ArenaGym/Testbed64-v1",
        perf=perf,
        oracle_remaining=True,
        trace="synthetic:n_jobs=30,arrival=poisson,rate_per_h=40,max_gpus=8,iter_log_mean=7",
    )
    base = env.unwrapped
    features = base.encoder.job_features
    assert features[-2:] == ("progress", "remaining")
    rng = np.random.default_rng(3)
    obs, info = env.reset(seed=4)
    checked = 0
    for _ in range(300):
        now = base.snapshot.now
        for s, view in enumerate(base.builder.slots):
            if view is None:
                continue
            row = obs["jobs"][s]
            spec = view.spec
            assert row[col("waiting")] == pytest.approx(squash(view.queued_s(now), 3600), abs=1e-6)
            assert row[col("attained_iterations")] == pytest.approx(
                min(1.0, np.log10(1 + view.iterations_done(now)) / 6), abs=1e-6
            )
            assert row[features.index("progress")] == pytest.approx(
                view.iterations_done(now) / spec.iterations, abs=1e-6
            )
            assert row[col("attained")] == pytest.approx(squash(view.attained_gpu_seconds(now), 8 * 3600), abs=1e-6)
            assert row[col("holds_gpus")] == (view.allocation is not None)
            if view.allocation is not None:
                assert row[col("gpus")] == pytest.approx(log_count(view.allocation.num_gpus))
                t = base.cluster.gpu_types.index(view.allocation.shape.gpu_type)
                assert row[features.index(f"current_{base.cluster.gpu_types[t]}")] == 1
                best = base.table.best_time(spec.model, spec.global_batch)
                assert 0 < row[col("speed")] <= 1 + 1e-6
                assert row[col("best_iter_time")] == pytest.approx(squash(best, 1.0), abs=1e-6)
            else:
                assert row[col("speed")] == 0
            checked += 1
        obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            obs, info = env.reset()
    assert checked > 300


def _play_until_finish(env, jobs, job_id, steps=2000, seed=0):
    """Observations of a random masked agent on ``jobs`` until ``job_id`` finishes (or ``steps``)."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(options={"jobs": jobs})
    out = [obs]
    for _ in range(steps):
        obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if any(e.kind.value == "finish" and e.job_id == job_id for e in env.backend.events) or terminated or truncated:
            break
        out.append(obs)
    return out


@pytest.mark.parametrize("oracle", [False, True])
def test_default_observation_does_not_depend_on_total_iterations(perf, oracle):
    """Perturb one job's total iterations: the non-clairvoyant observation is unchanged until it finishes."""
    env = gym.make(
        "ArenaGym/Testbed64-v1",
        perf=perf,
        oracle_remaining=oracle,
        trace="synthetic:n_jobs=20,arrival=poisson,rate_per_h=30,max_gpus=8,iter_log_mean=7",
    ).unwrapped
    env.reset(seed=2)
    jobs = list(env.jobs)
    target = jobs[0]
    longer = jobs.copy()
    longer[0] = dataclasses.replace(target, iterations=target.iterations * 5 + 17)
    a = _play_until_finish(env, jobs, target.job_id)
    b = _play_until_finish(env, longer, target.job_id)
    n = min(len(a), len(b))
    assert n > 20  # the job ran for a while before finishing
    same = all(np.array_equal(x[k], y[k]) for x, y in zip(a[:n], b[:n]) for k in x)
    assert same != oracle  # the clairvoyant ablation does see the difference
