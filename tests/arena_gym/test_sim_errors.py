"""Decisions that break invariants are rejected whole, with a message naming the problem."""

from __future__ import annotations

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.protocols import InvalidDecision
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Allocation, Decision, GpuType, Grid, JobId, Placement, ResourceShape
from tests.helpers import GPT, fingerprint, job, table_model

PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a40", 1, 1): 3.0})


def alloc(gpu_type="a40", nodes=(0,), per_node=2, stages=1):
    shape = ResourceShape(GpuType(gpu_type), len(nodes), per_node)
    return Allocation(Grid(shape, stages), Placement(GpuType(gpu_type), nodes, per_node))


@pytest.fixture
def backend():
    b = SimBackend(PRESETS["tiny"], PERF)
    b.reset([job("A", 0, 10, "a40", 2), job("B", 0, 10, "a40", 2), job("F", 100, 10, "a40", 2)])
    return b


@pytest.mark.parametrize(
    "decision, message",
    [
        (Decision(((JobId("A"), alloc()), (JobId("B"), alloc()))), "too few free GPUs"),
        (Decision(((JobId("A"), alloc(nodes=(7,))),)), "bad node list"),
        (Decision(((JobId("A"), alloc("h100")),)), "unknown GPU type 'h100'"),
        (Decision(((JobId("A"), alloc("a10")),)), "no feasible plan"),
        (Decision(((JobId("F"), alloc()),)), "not yet submitted"),
        (Decision(((JobId("zzz"), alloc()),)), "not in the cluster"),
        (Decision(((JobId("A"), alloc()), (JobId("A"), alloc(nodes=(1,))))), "appears twice"),
        (Decision(preemptions=(JobId("A"),)), "holds no GPUs"),
    ],
)
def test_rejected_whole(backend, decision, message):
    before = fingerprint(backend.state)
    with pytest.raises(InvalidDecision, match=message):
        backend.apply(decision)
    assert fingerprint(backend.state) == before


def test_swap_within_one_decision_is_valid(backend):
    backend.apply(Decision(((JobId("A"), alloc(nodes=(0,))), (JobId("B"), alloc(nodes=(1,))))))
    backend.apply(Decision(((JobId("A"), alloc(nodes=(1,))), (JobId("B"), alloc(nodes=(0,))))))
    backend.check_invariants()


def test_impossible_plan_types_fail_at_construction():
    with pytest.raises(ValueError, match="4 stages impossible on 2 GPUs"):
        Grid(ResourceShape(GpuType("a40"), 1, 2), 4)
    with pytest.raises(ValueError, match="powers of two"):
        ResourceShape(GpuType("a40"), 3, 2)
    with pytest.raises(ValueError, match="does not match grid shape"):
        Allocation(Grid(ResourceShape(GpuType("a40"), 1, 2), 1), Placement(GpuType("a40"), (0, 1), 1))


def test_bad_sim_config():
    with pytest.raises(ValueError, match="round_s must be set"):
        SimConfig(event_decisions=False)
    with pytest.raises(ValueError, match="unknown overhead class 'magic'; valid: pruned, full, none"):
        SimConfig(overhead_class="magic")
    with pytest.raises(ValueError, match=r"round_s must be finite and >= 1 s, got 0.01"):
        SimConfig(round_s=0.01)
