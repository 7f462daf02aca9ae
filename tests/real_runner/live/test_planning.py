"""The plan a generation runs: the allocation's, the belief's, or an even uniform plan, always executable."""

from __future__ import annotations

import pytest

from arena_gym.types import Allocation, GpuType, Grid, ModelRef, PipeSchedule, Placement, Plan, ResourceShape, StagePlan
from estimator import default_perf_model
from real_runner.live.planning import even_stages, executable_plan, uniform_plans
from real_runner.plans import model_spec
from real_runner.testbed import load_testbed

TINY = ModelRef.parse("gpt__tiny")
CPU = GpuType("cpu")


def alloc(n_nodes: int, per_node: int, stages: int, plan: Plan | None = None) -> Allocation:
    shape = ResourceShape(CPU, n_nodes, per_node)
    return Allocation(Grid(shape, stages), Placement(CPU, tuple(range(n_nodes)), per_node), plan)


def test_even_stages_tile_the_layer_table() -> None:
    assert [(s.layer_start, s.layer_end) for s in even_stages(6, 4, 1, 1)] == [(0, 2), (2, 4), (4, 5), (5, 6)]
    plans = list(uniform_plans(model_spec("gpt__tiny"), 16, 4, 2))
    assert [(p.stages[0].dp, p.stages[0].tp, p.micro_batches) for p in plans] == [(2, 1, 4), (1, 2, 4)]
    assert all(p.schedule is PipeSchedule.ONE_F_ONE_B for p in plans)


def test_the_allocations_plan_comes_first_and_is_mapped_to_an_executable_one() -> None:
    belief = default_perf_model(load_testbed("cpu-4").cluster())
    mixed = Plan((StagePlan(0, 3, 2, 1), StagePlan(3, 6, 1, 2)), 8, PipeSchedule.ONE_F_ONE_B)
    executed = executable_plan(TINY, 16, alloc(2, 2, 2, mixed), belief)
    assert executed.requested == mixed and executed.world_size == 4 and executed.pp == 2
    assert any("nearest uniform mesh" in note for note in executed.notes)


def test_without_a_plan_the_belief_names_the_grids_best() -> None:
    belief = default_perf_model(load_testbed("cpu-4").cluster())
    a = alloc(1, 2, 2)
    executed = executable_plan(TINY, 16, a, belief)
    assert executed.requested == belief.grid_plan(TINY, 16, a.grid) and executed.pp == 2 and not executed.notes


def test_an_unexecutable_plan_falls_back_to_an_even_uniform_one_and_says_so() -> None:
    belief = default_perf_model(load_testbed("cpu-4").cluster())
    bad = Plan((StagePlan(0, 6, 1, 2),), 3)  # 3 micro-batches do not divide the batch of 16
    executed = executable_plan(TINY, 16, alloc(1, 2, 1, bad), belief)
    assert executed.world_size == 2 and "allocation: plan" in executed.notes[-1]
    # 32 ranks, batch 1, 4 heads, 6 layers: no split of pp x dp x tp fits
    with pytest.raises(ValueError, match="no executable plan of gpt__tiny with global batch 1 on 32"):
        executable_plan(TINY, 1, Allocation(Grid(ResourceShape(CPU, 1, 32), 1), Placement(CPU, (0,), 32)), belief)
