"""The per-plan cost model."""

from __future__ import annotations

import math

import pytest

from arena_gym.types import PipeSchedule, Plan, ResourceShape, StagePlan
from estimator.costmodel import estimate_plan, rates_for
from estimator.hardware import get_gpu, node_links
from estimator.params import default_params
from estimator.zoo import get_model


def rates(model: str, gpu: str):
    arch, g = get_model(model), get_gpu(gpu)
    return arch, rates_for(arch, g, node_links(g), default_params())


def plan_of(arch, meshes, micro=16, schedule=PipeSchedule.ONE_F_ONE_B):
    n, S = len(arch.layers), len(meshes)
    cuts = [round(i * n / S) for i in range(S + 1)]
    return Plan(tuple(StagePlan(cuts[i], cuts[i + 1], d, t) for i, (d, t) in enumerate(meshes)), micro, schedule)


def test_breakdown_adds_up_and_single_stage_has_no_pipeline_terms():
    arch, r = rates("gpt__1.3B", "a100")
    est = estimate_plan(arch, 128, ResourceShape("a100", 1, 4), plan_of(arch, [(4, 1)]), r)
    assert est.feasible and est.reason == "feasible"
    assert est.inter_stage_comm_s == 0 and est.bubble_s == 0
    parts = est.compute_s + est.intra_stage_comm_s + est.inter_stage_comm_s + est.bubble_s
    assert parts == pytest.approx(est.total_s)
    assert 0 < est.memory_per_gpu_gb < 40


def test_pipeline_has_bubble_and_p2p():
    arch, r = rates("gpt__2.6B", "a40")
    est = estimate_plan(arch, 256, ResourceShape("a40", 2, 2), plan_of(arch, [(2, 1), (2, 1)]), r)
    assert est.bubble_s > 0 and est.inter_stage_comm_s > 0
    assert len(est.stage_memory_gb) == 2


def test_infeasible_reasons():
    arch, r = rates("gpt__6.7B", "a10")
    est = estimate_plan(arch, 128, ResourceShape("a10", 1, 1), plan_of(arch, [(1, 1)]), r)
    assert not est.feasible and est.reason == "out of memory" and est.iter_time_s == math.inf
    arch, r = rates("gpt__760M", "v100")
    est = estimate_plan(arch, 128, ResourceShape("v100", 1, 16), plan_of(arch, [(16, 1)]), r)
    assert est.reason == "data-parallel degree exceeds the micro-batch size"  # 8 samples per micro-batch
    arch, r = rates("moe__690M", "v100")
    est = estimate_plan(arch, 256, ResourceShape("v100", 1, 16), plan_of(arch, [(16, 1)]), r)
    assert est.reason == "fewer tokens per GPU than one MoE expert group"


def test_gpipe_holds_more_activations_than_1f1b():
    arch, r = rates("gpt__2.6B", "a100")
    shape = ResourceShape("a100", 1, 4)
    gpipe = estimate_plan(arch, 512, shape, plan_of(arch, [(1, 1)] * 4, schedule=PipeSchedule.GPIPE), r)
    one_f = estimate_plan(arch, 512, shape, plan_of(arch, [(1, 1)] * 4), r)
    assert gpipe.memory_per_gpu_gb > one_f.memory_per_gpu_gb
    assert gpipe.total_s == pytest.approx(one_f.total_s)


@pytest.mark.parametrize(
    "plan,needle",
    [
        (Plan((StagePlan(0, 26, 2, 1),), 16), "uses 2 GPUs but shape a100:1x4 has 4"),
        (Plan((StagePlan(0, 26, 3, 1),), 16), "powers of two"),
        (Plan((StagePlan(0, 10, 2, 1), StagePlan(12, 26, 2, 1)), 16), "do not continue"),
        (Plan((StagePlan(0, 20, 4, 1),), 16), "has 26 layers"),
    ],
)
def test_bad_plans_fail_with_one_line(plan, needle):
    arch, r = rates("gpt__1.3B", "a100")
    with pytest.raises(ValueError) as err:
        estimate_plan(arch, 128, ResourceShape("a100", 1, 4), plan, r)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_mismatch_lists_valid_meshes():
    arch, r = rates("gpt__1.3B", "a100")
    with pytest.raises(ValueError, match=r"valid symmetric meshes per stage for 1 stages: dp4tp1, dp2tp2, dp1tp4"):
        estimate_plan(arch, 128, ResourceShape("a100", 1, 4), Plan((StagePlan(0, 26, 2, 1),), 16), r)
