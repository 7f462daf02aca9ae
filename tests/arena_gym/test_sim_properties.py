"""Property tests: invariants under thousands of random (often invalid) decisions; determinism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.fcfs import FCFS
from agents.srtf import SRTF
from arena_gym.cluster import PRESETS
from arena_gym.loop import run_episode
from arena_gym.metrics import WALL_CLOCK_KEYS, compute_metrics
from arena_gym.protocols import InvalidDecision
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Allocation, Decision, GpuType, Grid, Placement, ResourceShape, Snapshot
from tests.helpers import GPT, MOE, job, uniform_model

TINY = PRESETS["tiny"]
PERF = uniform_model()


def random_decision(snap: Snapshot, rng: np.random.Generator) -> Decision:
    """Allocations and preemptions drawn at random: many break invariants on purpose."""
    allocs, preempt = [], []
    views = list(snap.pending + snap.running)
    rng.shuffle(views)
    for view in views[: rng.integers(0, 4)]:
        if view.allocation is not None and rng.random() < 0.3:
            preempt.append(view.job_id)
            continue
        gpu_type = GpuType(str(rng.choice(["a40", "a10", "a40"])))
        per_node = int(rng.choice([1, 2]))
        n_nodes = int(rng.choice([1, 1, 2]))
        nodes = tuple(int(x) for x in rng.choice(3, size=n_nodes, replace=False))  # node 2 does not exist
        shape = ResourceShape(gpu_type, n_nodes, per_node)
        allocs.append((view.job_id, Allocation(Grid(shape, 1), Placement(gpu_type, nodes, per_node))))
    if views and rng.random() < 0.05:
        allocs.append(allocs[0] if allocs else (views[0].job_id, None))  # duplicate or malformed
    return Decision(tuple(a for a in allocs if a[1] is not None), tuple(preempt))


def state(backend: SimBackend):
    return ({t: f.copy().tolist() for t, f in backend._free.items()}, len(backend.events))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_invariants_under_random_decisions(seed):
    rng = np.random.default_rng(seed)
    jobs = [job(f"j{i}", float(rng.integers(0, 500)), int(rng.integers(1, 200)), "a40", 2,
                model=GPT if i % 2 else MOE) for i in range(12)]
    # periodic rounds keep decision points coming while random decisions leave jobs waiting
    backend = SimBackend(TINY, PERF, config=SimConfig(round_s=50.0))
    snap = backend.reset(jobs)
    steps = 0
    while snap is not None and steps < 400:
        decision = random_decision(snap, rng)
        before = state(backend)
        try:
            backend.apply(decision)
        except InvalidDecision:
            assert state(backend) == before, "a rejected decision changed the cluster"
        backend.check_invariants()
        snap = backend.advance()
        if snap is not None:
            backend.check_invariants()
            for v in snap.running:
                assert v.allocation is not None
        steps += 1
    assert steps >= 50 or snap is None


def workload(seed: int, n: int = 40):
    rng = np.random.default_rng(seed)
    return [job(f"j{i}", float(t), int(rng.integers(10, 400)), str(rng.choice(["a40", "a10"])),
                int(rng.choice([1, 2, 4])), model=GPT if rng.random() < 0.5 else MOE)
            for i, t in enumerate(np.sort(rng.integers(0, 3000, n)))]


@pytest.mark.parametrize("policy", [FCFS, SRTF])
def test_same_seed_same_trajectory(policy):
    a = run_episode(SimBackend(TINY, PERF), policy(), workload(3))
    b = run_episode(SimBackend(TINY, PERF), policy(), workload(3))
    assert a.events == b.events
    ma, mb = compute_metrics(a), compute_metrics(b)
    assert {k: v for k, v in ma.items() if k not in WALL_CLOCK_KEYS} == {k: v for k, v in mb.items() if k not in WALL_CLOCK_KEYS}
    assert ma["jobs_finished"] == 40


def test_policies_keep_invariants_over_random_traces():
    for seed in range(5):
        for policy in (FCFS(), SRTF()):
            backend = SimBackend(TINY, PERF)
            snap = backend.reset(workload(seed, 25), ap_search=policy.ap_search)
            while snap is not None:
                backend.apply(policy.decide(snap))
                backend.check_invariants()
                snap = backend.advance()
            assert compute_metrics(backend.record(policy.name))["jobs_finished"] == 25
