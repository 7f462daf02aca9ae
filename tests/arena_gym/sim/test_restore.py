"""SimBackend.restore: an episode continued from the views of another at one moment (what sampled worlds are built from)."""

from __future__ import annotations

import copy
import dataclasses
import math

import pytest

from arena_gym.cluster import load_cluster
from arena_gym.harness import load_jobs
from arena_gym.records import EventKind
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import JobStatus
from tests.arena_gym.sim.test_fork import _drive


@pytest.mark.parametrize("name", ["arena", "tiresias", "gavel"])
def test_restoring_the_true_state_continues_as_the_original(name: str) -> None:
    cluster = load_cluster("testbed-64")
    perf = make_perf("estimator", cluster)
    jobs = load_jobs("synthetic:mix=testbed,n_jobs=50,rate_per_h=60", cluster, perf, seed=7)
    policy = make_policy(name)
    policy.reset()
    config = SimConfig(overhead_class=policy.ap_search)
    original = SimBackend(cluster, perf, config=config)
    snapshot = _drive(original, policy, original.reset(jobs), steps=30)
    assert snapshot is not None
    now, logged = snapshot.now, original.state.n_events
    specs = {s.job_id: s for s in jobs}
    current = [(specs[v.job_id], v) for v in (*snapshot.running, *snapshot.pending)]  # the snapshot's order
    future = [s for s in jobs if s.submit_time > now]
    assert any(v.status is JobStatus.RUNNING for _, v in current) and any(v.allocation is None for _, v in current)
    world = SimBackend(cluster, perf, config=config)
    world.restore(now, current, future)
    world.check_invariants()
    twin_policy = copy.deepcopy(policy)
    world_snapshot = world.state.snapshot(now, snapshot.arrivals, snapshot.departures)
    _drive(world, twin_policy, world_snapshot)
    _drive(original, policy, snapshot)
    expected, got = original.state.events_since(logged), world.events
    assert [(e.kind, e.job_id, e.shape) for e in got] == [(e.kind, e.job_id, e.shape) for e in expected]
    assert all(math.isclose(a.time, b.time, rel_tol=1e-9, abs_tol=1e-6) for a, b in zip(got, expected))
    assert sum(e.kind is EventKind.FINISH for e in got) > len(current) // 2  # the continuation ran its course


def test_bad_restores_are_refused() -> None:
    cluster = load_cluster("tiny")
    perf = make_perf("estimator", cluster)
    jobs = load_jobs("synthetic:n_jobs=6,gpu_types=a40+a10,max_gpus=2", cluster, perf, seed=1)
    backend = SimBackend(cluster, perf)
    snapshot = _drive(backend, make_policy("fcfs"), backend.reset(jobs), steps=3)
    assert snapshot is not None
    held = next(iter(snapshot.running))
    spec = next(s for s in jobs if s.job_id == held.job_id)
    other = next(s for s in jobs if s.job_id != held.job_id)
    world = SimBackend(cluster, perf)
    with pytest.raises(ValueError, match="future jobs must be submitted after now"):
        world.restore(snapshot.now, [], [dataclasses.replace(other, submit_time=snapshot.now)])
    with pytest.raises(ValueError, match="from the view of"):
        world.restore(snapshot.now, [(other, held)], [])
    others = [(s, dataclasses.replace(held, spec=s)) for s in jobs if s.job_id != held.job_id]  # on the same GPUs
    with pytest.raises(ValueError, match="taken twice"):
        world.restore(snapshot.now, [(spec, held), *others], [])
