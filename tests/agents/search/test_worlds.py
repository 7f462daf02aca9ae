"""Sampled worlds hold only what a non-clairvoyant policy may see; rollouts score the jobs-in-system integral."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.belief import default_belief
from agents.search.worlds import SampledWorlds, TrueWorld, jobs_in_system, rollout, sampled_world
from arena_gym.cluster import load_cluster
from arena_gym.core.information import Masker, information_set
from arena_gym.harness import load_jobs
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Decision, ForkableSnapshot, JobStatus, Snapshot
from tests.agents.baseline_cases import TINY
from tests.helpers import job, uniform_model

TRACE = "synthetic:mix=testbed,n_jobs=40,rate_per_h=60,iter_log_mean=5.06,iter_log_sigma=0.89,iter_min=6,iter_max=500"


@pytest.fixture(scope="module")
def testbed():
    cluster = load_cluster("testbed-64")
    perf = make_perf("estimator", cluster)
    return cluster, perf, load_jobs(TRACE, cluster, perf, seed=2)


def _hidden_snapshot_after(cluster, perf, jobs, steps: int) -> tuple[Snapshot, SimBackend]:
    policy = make_policy("arena")
    policy.reset()
    backend = SimBackend(cluster, perf)
    shown = information_set(policy)
    snapshot = backend.reset(jobs)
    for _ in range(steps):
        backend.apply(policy.decide(shown(snapshot)))
        snapshot = backend.advance()
    assert snapshot is not None
    return Masker("lookahead").snapshot(snapshot), backend


def test_a_world_continues_the_snapshot_with_lengths_above_the_attained(testbed) -> None:
    cluster, perf, jobs = testbed
    snapshot, _ = _hidden_snapshot_after(cluster, perf, jobs, 15)
    now, until = snapshot.now, snapshot.now + 3600.0
    arrivals = [j.submit_time for j in jobs if j.submit_time <= now]
    world = sampled_world(
        snapshot, default_belief("synthetic"), arrivals, until, np.random.default_rng(0), SimConfig(horizon_s=until)
    )
    world.check_invariants()
    seen = {v.job_id: v for v in (*snapshot.running, *snapshot.pending)}
    assert any(v.status is JobStatus.RUNNING and v.iterations_done(now) > 0 for v in seen.values())
    for spec in world.state.jobs:
        view = seen.get(spec.job_id)
        if view is None:  # a sampled arrival: a fresh id, after now, within the horizon
            assert spec.job_id.startswith("~sampled-") and now < spec.submit_time <= until
            assert spec.requested_gpu_type in (None, *cluster.gpu_types)
        else:
            assert spec.iterations > view.iterations_done(now)
            restored = world.state.view(spec.job_id)
            assert (restored.status, restored.allocation) == (view.status, view.allocation)
    assert set(seen) <= {s.job_id for s in world.state.jobs}


def test_a_world_is_the_same_whatever_the_true_lengths_and_the_true_future(testbed) -> None:
    cluster, perf, jobs = testbed
    snapshot, backend = _hidden_snapshot_after(cluster, perf, jobs, 4)  # before any job finishes
    assert not any(e.kind.value == "finish" for e in backend.events) and len(snapshot.running) >= 3
    now = snapshot.now
    other = tuple(
        dataclasses.replace(
            j,
            iterations=j.iterations * 3 + 1,
            submit_time=j.submit_time if j.submit_time <= now else j.submit_time + 999.0,
        )
        for j in jobs
    )
    twin, _ = _hidden_snapshot_after(cluster, perf, other, 4)
    assert twin.now == now
    worlds = []
    for s in (snapshot, twin):
        arrivals = [j.submit_time for j in jobs if j.submit_time <= now]
        w = sampled_world(
            s,
            default_belief("synthetic"),
            arrivals,
            now + 7200.0,
            np.random.default_rng(5),
            SimConfig(horizon_s=now + 7200.0),
        )
        worlds.append(w.state.jobs)
    assert worlds[0] == worlds[1]


def test_the_integral_of_jobs_in_the_system() -> None:
    perf = uniform_model()  # a40, 2 GPUs: 2 / sqrt(2) s per iteration
    backend = SimBackend(TINY, perf, config=SimConfig(overhead_class="none"))
    jobs = [job("a", 0.0, 100, "a40", 2), job("b", 50.0, 10, "a40", 2)]
    snapshot = backend.reset(jobs)
    assert snapshot is not None
    policy = make_policy("fcfs")
    score = rollout(backend, policy.decide(snapshot), policy, lambda s: s, 0.0, 10_000.0)
    finish = {e.job_id: e.time for e in backend.events if e.kind.value == "finish"}
    assert score == pytest.approx(finish["a"] + (finish["b"] - 50.0))
    assert jobs_in_system(backend, 0.0, 60.0) == pytest.approx(60.0 + 10.0)  # a all along, b from 50 s
    assert rollout(backend.fork(), Decision(preemptions=("nobody",)), policy, lambda s: s, 0.0, 1.0) == float("inf")


def test_sampled_worlds_carry_their_drawn_scale_and_the_true_world_none(testbed) -> None:
    cluster, perf, jobs = testbed
    snapshot, backend = _hidden_snapshot_after(cluster, perf, jobs, 15)
    until = snapshot.now + 3600.0
    config = SimConfig(horizon_s=until)
    adapting = SampledWorlds("synthetic", 3, adapt=True, seed=0)
    adapting.observe(snapshot)
    drawn = list(adapting.worlds(snapshot, until, config))
    assert len(drawn) == 3 and all(w.log_scale is not None and w.backend.config.horizon_s == until for w in drawn)
    fixed = SampledWorlds("synthetic", 2, adapt=False, seed=0)
    fixed.observe(snapshot)
    assert [w.log_scale for w in fixed.worlds(snapshot, until, config)] == [None, None]
    truth = ForkableSnapshot.of(backend.state.snapshot(snapshot.now), backend.fork)
    (world,) = TrueWorld("oracle").worlds(truth, until, config)
    assert world.log_scale is None and world.backend.config.horizon_s == until and world.backend.state.horizon == until
    assert backend.config.horizon_s != until  # the fork's horizon, not the backend's
    with pytest.raises(ValueError, match="cannot fork"):
        next(TrueWorld("oracle").worlds(snapshot, until, config))
