"""ObservationEncoder: documented features on a hand-built decision point."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.encoder import CLOCK_FEATURES, CLUSTER_FEATURES, JOB_FEATURES, log_count, model_size_feature, squash
from tests.helpers import GPT, job


def col(name: str) -> int:
    return JOB_FEATURES.index(name)


def test_features_of_a_small_scenario(perf):
    env = gym.make("ArenaGym/Tiny-v0", perf=perf, max_substeps=8)
    codec = env.unwrapped.codec
    jobs = [job("a", 0, 1000, "a40", 1), job("b", 0, 500, "a10", 2, batch=256), job("c", 0, 100, "a40", 4)]
    obs, _ = env.reset(options={"jobs": jobs})
    assert obs["jobs"][:3, col("present")].tolist() == [1, 1, 1] and obs["jobs"][3:, col("present")].sum() == 0
    assert obs["jobs"][1, col("requested_gpus")] == pytest.approx(log_count(2)) == pytest.approx(0.4)
    assert obs["jobs"][0, col("model_size")] == pytest.approx(model_size_feature(GPT.size))
    assert obs["jobs"][0, col("family_gpt")] == 1 and obs["jobs"][0, col("family_moe")] == 0
    n = len(JOB_FEATURES)
    assert obs["jobs"][0, n:n + 2].tolist() == [1, 0]  # requested a40
    assert obs["jobs"][1, n:n + 2].tolist() == [0, 1]  # requested a10
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
    env = gym.make("ArenaGym/Testbed64-v0", perf=perf,
                   trace="synthetic:n_jobs=30,arrival=poisson,rate_per_h=40,max_gpus=8,iter_log_mean=7")
    base = env.unwrapped
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
            assert row[col("progress")] == pytest.approx(view.iterations_done(now) / spec.iterations, abs=1e-6)
            assert row[col("attained")] == pytest.approx(squash(view.attained_gpu_seconds(now), 8 * 3600), abs=1e-6)
            assert row[col("holds_gpus")] == (view.allocation is not None)
            if view.allocation is not None:
                assert row[col("gpus")] == pytest.approx(log_count(view.allocation.num_gpus))
                t = base.cluster.gpu_types.index(view.allocation.shape.gpu_type)
                assert row[len(JOB_FEATURES) + len(base.cluster.gpu_types) + t] == 1
            checked += 1
        obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            obs, info = env.reset()
    assert checked > 300
