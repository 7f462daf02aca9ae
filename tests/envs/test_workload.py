"""Workloads: time splits that never overlap, windows, offered load, retargeting, cluster variants, data: specs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs
from arena_gym.cluster import PRESETS, resolve_cluster
from arena_gym.harness.experiment import trace_hooks
from arena_gym.types import ModelRef
from envs.config import EnvConfig
from envs.workload import Retargeter, WorkloadSampler, expand_spec, fixed_windows, offered_load, split_range
from tests.helpers import job
from traces import resolve_trace, save_trace

GEN = "synthetic:n_jobs=120,rate_per_h=10,gpu_types=a40+a10,max_gpus=4,iter_log_mean=7"


@pytest.fixture(scope="module")
def trace_file(perf, tmp_path_factory):
    feasible, iter_time = trace_hooks(perf, PRESETS["tiny"])
    trace = resolve_trace(GEN, seed=1, feasible=feasible, iter_time=iter_time)
    return save_trace(trace, tmp_path_factory.mktemp("traces") / "trace.csv"), trace


def _ids(workloads):
    return [{j.job_id for j in w.jobs} for w in workloads]


def test_splits_are_disjoint_time_ranges(perf, trace_file):
    path, trace = trace_file
    config = EnvConfig(perf=perf, trace=str(path), window_jobs=10)
    sampler = WorkloadSampler(config, PRESETS["tiny"], perf)
    ranges = [split_range(trace, s, config.split_fractions) for s in ("train", "validation", "test")]
    assert ranges[0][0] == 0 and ranges[0][1] == ranges[1][0] and ranges[1][1] == ranges[2][0]
    assert ranges[2][1] == len(trace)
    by_split = {s: set().union(*_ids(sampler.fixed(s))) for s in ("train", "validation", "test")}
    assert by_split["train"] and by_split["validation"] and by_split["test"]
    assert not (by_split["train"] & by_split["validation"]) and not (by_split["train"] & by_split["test"])
    assert not (by_split["validation"] & by_split["test"])
    times = sampler.split_ranges()["trace"]
    assert times["train"][1] < times["validation"][0] <= times["validation"][1] < times["test"][0]
    # fixed windows of one split do not overlap each other either
    test_ids = _ids(sampler.fixed("test"))
    assert sum(map(len, test_ids)) == len(set().union(*test_ids))


def test_sampled_training_windows_stay_inside_the_train_range(perf, trace_file):
    path, trace = trace_file
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=str(path), split="train", window_jobs=10).unwrapped
    a, b = split_range(trace, "train", env.config.split_fractions)
    allowed = {j.job_id for j in trace.jobs[a:b]}
    starts = set()
    for seed in range(25):
        env.reset(seed=seed)
        ids = [j.job_id for j in env.jobs]
        assert len(ids) == 10 and set(ids) <= allowed
        starts.add(ids[0])
    assert len(starts) > 5


def test_generator_splits_use_separate_seed_streams(perf):
    config = EnvConfig(perf=perf, trace=GEN)
    jobs = {
        s: WorkloadSampler(config.replace(split=s), PRESETS["tiny"], perf).fixed(s, seeds=(7,))[0].jobs
        for s in ("train", "validation", "test")
    }
    assert jobs["train"] != jobs["validation"] != jobs["test"] != jobs["train"]
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace=GEN, split="validation").unwrapped
    env.reset(seed=7)
    assert env.jobs == jobs["validation"]  # fixed(split, seeds) is what reset(seed=...) draws


def test_fixed_windows_cover_the_range_without_overlap():
    assert fixed_windows(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert fixed_windows(3, 8, 4) == [(3, 7)]  # a rest shorter than half a window is dropped
    assert fixed_windows(0, 9, 0) == [(0, 9)]
    assert fixed_windows(5, 5, 4) == []


def test_offered_load_is_hit_exactly(perf, trace_file):
    path, _ = trace_file
    config = EnvConfig(perf=perf, trace=str(path), window_jobs=20, load_basis="offered", load_levels=(0.5, 1.5))
    sampler = WorkloadSampler(config, PRESETS["tiny"], perf)
    _, iter_time = trace_hooks(perf, PRESETS["tiny"])
    workloads = sampler.fixed("all")
    assert {w.load for w in workloads} == {0.5, 1.5}
    for w in workloads:
        assert offered_load(w.jobs, PRESETS["tiny"], iter_time) == pytest.approx(w.load, rel=1e-9)
        assert w.label.endswith(f"@rho{w.load:g}")


def test_requests_the_cluster_cannot_serve_are_retargeted(perf):
    feasible, _ = trace_hooks(perf, PRESETS["tiny"])
    retarget = Retargeter(PRESETS["tiny"], feasible)
    v100 = job("v", 0, 10, "v100", 2)  # tiny has a40 (48 GB) and a10 (24 GB): a v100 (32 GB) is closest to a10
    huge = job("h", 0, 10, "a40", 16)  # more a40s than tiny has
    nowhere = job("x", 0, 10, "a40", 1, model=ModelRef("gpt", "39B"))
    fine = job("f", 0, 10, "a40", 2)
    jobs, changed, dropped = retarget([v100, huge, nowhere, fine])
    assert (changed, dropped) == (2, 1)
    assert [(j.job_id, j.requested_gpu_type, j.requested_gpus) for j in jobs] == [
        ("v", "a10", 2),
        ("h", "a40", 4),
        ("f", "a40", 2),
    ]
    assert jobs[2] is fine


def test_cluster_variants_are_drawn_and_keep_the_spaces(perf):
    env = gym.make(
        "ArenaGym/Testbed64-v1", perf=perf, trace=GEN, cluster_variants=("testbed-64[a40=8,a10=24]",)
    ).unwrapped
    assert env.cluster_names == ("testbed-64", "testbed-64[a40=8,a10=24]")
    seen = set()
    for seed in range(8):
        obs, _ = env.reset(seed=seed)
        assert env.observation_space.contains(obs)
        seen.add(env.cluster.name)
        assert env.backend.cluster is env.cluster
    assert seen == set(env.cluster_names)
    assert resolve_cluster("testbed-64[a40=8,a10=24]").group("a10").nodes == 24
    with pytest.raises(ValueError, match="other GPU types or grid cells"):
        gym.make("ArenaGym/Testbed64-v1", perf=perf, cluster_variants=("testbed-64[a40=2]",))
    with pytest.raises(ValueError, match="TYPE=NODES"):
        resolve_cluster("testbed-64[h100=4]")


def test_data_prefix_names_a_file_in_the_data_dir(perf, trace_file):
    path, _ = trace_file
    assert expand_spec("data:trace.csv?head=5", str(path.parent)) == str(path.parent / "trace.csv?head=5")
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, trace="data:trace.csv", data_dir=str(path.parent), window_jobs=5)
    env.reset(seed=0)
    assert len(env.unwrapped.jobs) == 5
    assert env.unwrapped.episode.label.startswith("trace:all[")


def test_real_traces_split_without_overlap(shared_data):
    config = envs.ENV_CONFIGS["ArenaGym/Testbed64Real-v1"].replace(data_dir=str(shared_data))
    cluster = PRESETS["testbed-64"]
    from arena_gym.registry import make_perf

    sampler = WorkloadSampler(config, cluster, make_perf("estimator", cluster))
    per_split = {s: sampler.fixed(s) for s in ("train", "validation", "test")}
    assert len(per_split["test"]) >= 20 and len(per_split["validation"]) >= 5
    for trace in config.traces:
        ids = {
            s: set().union(set(), *_ids([w for w in ws if w.trace == expand_spec(trace, config.data_dir)]))
            for s, ws in per_split.items()
        }
        assert not (ids["train"] & ids["test"]) and not (ids["train"] & ids["validation"])
        assert not (ids["validation"] & ids["test"])
    for ranges in sampler.split_ranges().values():
        ends = [ranges[s] for s in ("train", "validation", "test") if s in ranges]
        assert all(a[1] < b[0] for a, b in zip(ends, ends[1:]))
    for w in per_split["test"]:
        assert all(j.requested_gpu_type in ("a40", "a10") for j in w.jobs)
        assert np.all(np.diff([j.submit_time for j in w.jobs]) >= 0)
