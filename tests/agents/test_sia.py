"""Sia: the assignment MILP against brute force, the bootstrapped throughput model, re-allocation factor."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from agents.common import AssignmentJob, assign
from agents.sia import BootstrapThroughput, Sia
from arena_gym.records import EventKind
from arena_gym.sim import SimBackend
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    GpuType,
    Grid,
    JobId,
    JobStatus,
    JobView,
    ModelRef,
    NodeGroup,
    Placement,
    ResourceShape,
)
from estimator.measured import ARTIFACT_GPU_MEMORY_GB, DpMemoryTable, MeasuredPerfModel
from tests.agents.baseline_cases import FREE, check_random_traces, random_workload
from tests.helpers import GPT, MOE, job, table_model, uniform_model

TWO_TYPES = ClusterSpec("two-types", (NodeGroup(GpuType("a40"), 1, 4), NodeGroup(GpuType("a10"), 1, 4)))
CONFIGS = [(t, n) for t in ("a40", "a10") for n in (1, 2, 4)]


def brute_force(jobs, room, max_migrations):
    """Best objective over every choice (None = unassigned, allowed for pending jobs only)."""
    best = -np.inf
    options = [list(j.values) + ([None] if j.current is None else []) for j in jobs]
    for pick in itertools.product(*options):
        used = Counter()
        for c in pick:
            if c is not None:
                used[c[0]] += c[1]
        moved = sum(1 for j, c in zip(jobs, pick) if j.current is not None and c != j.current)
        if moved <= max_migrations and all(n <= room[t] for t, n in used.items()):
            best = max(best, sum(j.values[c] for j, c in zip(jobs, pick) if c is not None))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_assignment_matches_brute_force(seed):
    # 3 jobs x 2 types x counts {1, 2, 4}; some running (must keep a configuration), tight room
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(3):
        configs = [c for c in CONFIGS if rng.random() < 0.8] or [CONFIGS[0]]
        values = {c: float(rng.uniform(0.5, 3.0)) * (1 + np.log2(c[1])) for c in configs}
        current = configs[int(rng.integers(len(configs)))] if rng.random() < 0.4 else None
        if current is None and rng.random() < 0.5:
            values = {c: v + 1e3 for c, v in values.items()}  # Sia's not-allocated penalty
        jobs.append(AssignmentJob(JobId(f"j{i}"), values, current))
    room = {t: int(rng.integers(0, 7)) for t in ("a40", "a10")}
    for j in jobs:  # room counts the GPUs running jobs hold
        if j.current is not None:
            room[j.current[0]] += j.current[1]
    result = assign(jobs, room, max_migrations=1)
    chosen = result.choice
    assert all(j.job_id in chosen for j in jobs if j.current is not None)
    used = Counter()
    for c in chosen.values():
        used[c[0]] += c[1]
    assert all(n <= room[t] for t, n in used.items())
    assert sum(1 for j in jobs if j.current is not None and chosen[j.job_id] != j.current) <= 1
    objective = sum(j.values[chosen[j.job_id]] for j in jobs if j.job_id in chosen)
    assert objective == pytest.approx(brute_force(jobs, room, 1))


def test_sia_decision_matches_brute_force_over_its_utilities():
    # Three pending jobs on two 4-GPU types, counts {1, 2, 4}: Sia admits the configurations that
    # maximise sum(utility + 1e3) under the capacities, exactly as brute force over its utilities.
    wrn = ModelRef("wide_resnet", "1B")
    perf = table_model(
        {
            (GPT, 128, "a40", 1, 1): 1.0,
            (GPT, 128, "a40", 1, 2): 0.6,
            (GPT, 128, "a40", 1, 4): 0.4,
            (GPT, 128, "a10", 1, 1): 1.5,
            (GPT, 128, "a10", 1, 2): 0.9,
            (MOE, 128, "a40", 1, 2): 1.0,
            (MOE, 128, "a40", 1, 4): 0.5,
            (MOE, 128, "a10", 1, 1): 4.0,
            (MOE, 128, "a10", 1, 2): 2.0,
            (MOE, 128, "a10", 1, 4): 1.0,
            (wrn, 128, "a40", 1, 1): 0.5,
            (wrn, 128, "a10", 1, 1): 0.6,
            (wrn, 128, "a10", 1, 4): 0.3,
        }
    )
    jobs = [job("A", 0, 100, "a40", 1), job("B", 0, 100, "a40", 1, model=MOE), job("C", 0, 100, "a10", 1, model=wrn)]
    snapshot = SimBackend(TWO_TYPES, perf).reset(jobs)
    policy = Sia(max_gpus=4)
    decision = policy.decide(snapshot)
    views = {v.job_id: v for v in snapshot.pending}
    utilities = {j: policy.utilities(snapshot, v) for j, v in views.items()}
    chosen = {j: (a.shape.gpu_type, a.num_gpus) for j, a in decision.allocations}
    objective = sum(utilities[j][c] + 1e3 for j, c in chosen.items())
    expected = brute_force(
        [AssignmentJob(j, {c: u + 1e3 for c, u in us.items()}) for j, us in utilities.items()], {"a40": 4, "a10": 4}, 3
    )
    assert len(chosen) == 3 and objective == pytest.approx(expected)


def running_view(job_id, gpu_type, n, first_start=0.0, reconfigurations=0):
    shape = ResourceShape(GpuType(gpu_type), 1, n)
    alloc = Allocation(Grid(shape, 1), Placement(GpuType(gpu_type), (0,), n))
    return JobView(
        job(job_id, 0, 100, gpu_type, n),
        JobStatus.RUNNING,
        alloc,
        0.0,
        0.0,
        1.0,
        first_start,
        first_start,
        0.0,
        0.0,
        reconfigurations,
        0,
    )


def test_bootstrap_is_exact_at_the_smallest_count_and_learns_online():
    table = {("a40", 2): 1.2, ("a40", 4): 0.8, ("a40", 8): 0.6}  # 1 GPU infeasible: 2 is the smallest
    model = BootstrapThroughput()
    view = running_view("A", "a40", 2)
    assert model.throughput(view, ("a40", 2), table) == pytest.approx(128 / 1.2)
    assert model.throughput(view, ("a40", 8), table) == pytest.approx(128 / 1.2 * 4)  # linear from 2
    model.observe(running_view("A", "a40", 4))
    assert model.version(JobId("A")) == 1
    assert model.throughput(view, ("a40", 4), table) == pytest.approx(128 / 0.8)  # observed: exact
    assert model.throughput(view, ("a40", 8), table) == pytest.approx(128 / 0.8 * 2)  # linear from 4


def test_reallocation_factor():
    policy = Sia()
    for age, restarts, factor in (
        (0.0, 0, 0.0),
        (3000.0, 0, 3000 / 3600),
        (10_000.0, 1, 2400 / 3600),
        (10_000.0, 5, 0.0),
    ):
        view = running_view("A", "a40", 2, reconfigurations=restarts)
        assert policy.reallocation_factor(view, age) == pytest.approx(factor)


def test_non_preemptive_dp_feasible_bounded_migrations_and_deterministic():
    # GPT is DP-infeasible on 1 GPU (30 GB x 1.2 > 0.8 x 24 / 48 GB on a10 / a40): never given 1 GPU.
    base = uniform_model(counts=(1, 2, 4))
    perf = MeasuredPerfModel(base.table, DpMemoryTable({("gpt", "1.3B", 128, 1): 35.0}), ARTIFACT_GPU_MEMORY_GB)
    records = check_random_traces(Sia, seeds=3, perf=perf, config=FREE)
    for seed, record in enumerate(records):
        assert not any(e.kind is EventKind.PREEMPT for e in record.events)
        gpt = {j.job_id for j in random_workload(seed) if j.model == GPT}
        allocs = [e for e in record.events if e.kind is EventKind.ALLOCATE]
        assert all(e.num_gpus >= 2 for e in allocs if e.job_id in gpt)
        started: set[str] = set()
        changes = Counter()
        for e in allocs:
            if e.job_id in started:
                changes[e.time] += 1
            started.add(e.job_id)
        assert max(changes.values(), default=0) <= 3


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="fairness_p"):
        Sia(fairness_p=0.0)
    with pytest.raises(ValueError, match="max_gpus"):
        Sia(max_gpus=3)
