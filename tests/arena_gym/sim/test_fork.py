"""SimBackend.fork: an independent copy at a decision point that continues exactly as the original does."""

from __future__ import annotations

import copy

import pytest

from arena_gym.cluster import load_cluster
from arena_gym.core.information import information_set
from arena_gym.harness import load_jobs
from arena_gym.protocols import Policy
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Snapshot


def _drive(
    backend: SimBackend, policy: Policy, snapshot: Snapshot | None, steps: float = float("inf")
) -> Snapshot | None:
    """Decide-apply-advance from ``snapshot`` for at most ``steps`` decisions."""
    shown = information_set(policy)
    while snapshot is not None and steps > 0:
        backend.apply(policy.decide(shown(snapshot)))
        snapshot = backend.advance()
        steps -= 1
    return snapshot


@pytest.fixture(scope="module")
def workload():
    cluster = load_cluster("testbed-64")
    perf = make_perf("estimator", cluster)
    return cluster, perf, load_jobs("synthetic:mix=testbed,n_jobs=50,rate_per_h=60", cluster, perf, seed=5)


@pytest.mark.parametrize("name, round_s", [("arena", None), ("tiresias", None), ("arena", 300.0), ("srtf", None)])
def test_a_fork_continues_bit_identically(workload, name: str, round_s: float | None) -> None:
    cluster, perf, jobs = workload
    policy = make_policy(name)
    policy.reset()
    backend = SimBackend(cluster, perf, config=SimConfig(round_s=round_s, overhead_class=policy.ap_search))
    snapshot = _drive(backend, policy, backend.reset(jobs), steps=25)
    assert snapshot is not None and len(snapshot.running) > 0
    twin, twin_policy = backend.fork(), copy.deepcopy(policy)
    twin_snapshot = twin.state.snapshot(snapshot.now, snapshot.arrivals, snapshot.departures, snapshot.round_index)
    _drive(twin, twin_policy, twin_snapshot)
    _drive(backend, policy, snapshot)
    assert twin.events == backend.events and twin.now() == backend.now()
    twin.check_invariants()
    assert twin.record(name).events == backend.record(name).events


def test_a_fork_is_independent(workload) -> None:
    cluster, perf, jobs = workload
    policy = make_policy("arena")
    policy.reset()
    backend = SimBackend(cluster, perf)
    snapshot = _drive(backend, policy, backend.reset(jobs), steps=10)
    assert snapshot is not None
    before = backend.events
    twin = backend.fork()
    twin_snapshot = twin.state.snapshot(snapshot.now)
    victim = next(iter(twin_snapshot.running)).job_id
    from arena_gym.types import Decision

    twin.apply(Decision(preemptions=(victim,)))
    _drive(twin, copy.deepcopy(policy), twin.advance())
    assert backend.events == before  # the original did not move
    assert backend.state.view(victim).status is not twin.state.view(victim).status or twin.events != before
    backend.check_invariants()
    twin.check_invariants()
