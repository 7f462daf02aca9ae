"""Property tests (hypothesis) of the cost model and the planner."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena_gym.types import ModelRef, PipeSchedule, Plan, ResourceShape, StagePlan
from estimator.costmodel import estimate_plan, rates_for
from estimator.hardware import get_gpu, node_links
from estimator.params import default_params
from estimator.perfmodel import EstimatorPerfModel
from estimator.zoo import get_model

MODELS = ("gpt__760M", "gpt__2.6B", "moe__1.3B", "moe__10B", "wide_resnet__500M", "wide_resnet__2B")
TYPES = ("a100", "v100", "a40", "a10", "h100")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def plans(draw):
    """A random valid plan: model, batch, GPU type, stage count, per-stage meshes, locality."""
    model = draw(st.sampled_from(MODELS))
    arch = get_model(model)
    n_stages = draw(st.sampled_from([1, 2, 4]))
    per_stage = draw(st.sampled_from([1, 2, 4]))
    meshes = [
        (per_stage // t, t)
        for t in (draw(st.sampled_from([x for x in (1, 2, 4) if x <= per_stage])) for _ in range(n_stages))
    ]
    n = n_stages * per_stage
    per_node = draw(st.sampled_from([x for x in (1, 2, 4, 8, 16) if x <= n]))
    n_layers = len(arch.layers)
    cuts = sorted(
        draw(st.lists(st.integers(1, n_layers - 1), min_size=n_stages - 1, max_size=n_stages - 1, unique=True))
    )
    bounds = [0, *cuts, n_layers]
    plan = Plan(
        tuple(StagePlan(bounds[i], bounds[i + 1], d, t) for i, (d, t) in enumerate(meshes)),
        draw(st.sampled_from([1, 4, 16])),
        draw(st.sampled_from(list(PipeSchedule))),
    )
    batch = draw(st.sampled_from([64, 128, 512]))
    gpu = draw(st.sampled_from(TYPES))
    return arch, batch, ResourceShape(gpu, n // per_node, per_node), plan


def base_rates(arch, shape):
    g = get_gpu(shape.gpu_type)
    return rates_for(arch, g, node_links(g), default_params())


@SETTINGS
@given(plans(), st.lists(st.floats(1.0, 8.0), min_size=4, max_size=4))
def test_faster_gpus_are_never_slower(case, factors):
    arch, batch, shape, plan = case
    r = base_rates(arch, shape)
    fast = r._replace(
        flops=r.flops * factors[0],
        mem_bw=r.mem_bw * factors[1],
        intra_bw=r.intra_bw * factors[2],
        inter_bw=r.inter_bw * factors[3],
        weight_s=r.weight_s / min(factors[0], factors[1]),
    )
    slow_t = estimate_plan(arch, batch, shape, plan, r).total_s
    fast_t = estimate_plan(arch, batch, shape, plan, fast).total_s
    assert fast_t <= slow_t * (1 + 1e-9)


@SETTINGS
@given(plans())
def test_times_are_finite_and_non_negative(case):
    arch, batch, shape, plan = case
    est = estimate_plan(arch, batch, shape, plan, base_rates(arch, shape))
    parts = [
        est.total_s,
        est.compute_s,
        est.intra_stage_comm_s,
        est.inter_stage_comm_s,
        est.bubble_s,
        est.memory_per_gpu_gb,
    ]
    assert all(math.isfinite(x) and x >= 0 for x in parts)
    assert est.compute_s > 0


@SETTINGS
@given(st.sampled_from(MODELS), st.sampled_from([128, 512]), st.sampled_from(TYPES), st.sampled_from([2, 4, 8]))
def test_tensor_parallel_across_nodes_is_never_faster(model, batch, gpu, tp):
    arch = get_model(model)
    n = len(arch.layers)
    plan = Plan((StagePlan(0, n, 1, tp),), 16)
    inside = ResourceShape(gpu, 1, tp)
    across = ResourceShape(gpu, 2, tp // 2)
    r = base_rates(arch, inside)
    assert estimate_plan(arch, batch, across, plan, r).total_s >= estimate_plan(arch, batch, inside, plan, r).total_s


@SETTINGS
@given(plans(), st.sampled_from(["pp", "tp"]))
def test_memory_never_rises_with_more_pp_or_tp(case, axis):
    """More stages (GPipe: every micro-batch in flight) or more tensor parallelism, same dp."""
    arch, batch, shape, plan = case
    if axis == "pp":
        plan = Plan(plan.stages, plan.micro_batches, PipeSchedule.GPIPE)
    r = base_rates(arch, shape)
    base = estimate_plan(arch, batch, shape, plan, r).memory_per_gpu_gb
    if axis == "tp":
        more = Plan(
            tuple(StagePlan(s.layer_start, s.layer_end, s.dp, s.tp * 2) for s in plan.stages),
            plan.micro_batches,
            plan.schedule,
        )
    else:  # split every stage in two along its layers (where it has two or more)
        stages = []
        for s in plan.stages:
            if s.layer_end - s.layer_start >= 2:
                mid = (s.layer_start + s.layer_end) // 2
                stages += [StagePlan(s.layer_start, mid, s.dp, s.tp), StagePlan(mid, s.layer_end, s.dp, s.tp)]
            else:
                stages += [StagePlan(s.layer_start, s.layer_end, s.dp * 2, s.tp)]
        if any(s.dp > plan.stages[0].dp for s in stages):
            return  # that adds data parallelism, not pipeline stages
        more = Plan(tuple(stages), plan.micro_batches, plan.schedule)
    bigger = ResourceShape(shape.gpu_type, shape.n_nodes * 2, shape.gpus_per_node)
    assert estimate_plan(arch, batch, bigger, more, r).memory_per_gpu_gb <= base * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from([128, 256, 512, 1024]),
    st.sampled_from([("a100", 4), ("v100", 16), ("h100", 8)]),
)
def test_more_gpus_inside_an_nvlink_node_are_never_slower(model, batch, gpu_node):
    gpu, cap = gpu_node
    perf = EstimatorPerfModel()
    ref = ModelRef.parse(model)
    times = [perf.iter_time(ref, batch, ResourceShape(gpu, 1, n)) for n in (1, 2, 4, 8, 16) if n <= cap]
    finite = [t for t in times if math.isfinite(t)]
    assert all(b <= a * (1 + 1e-9) for a, b in zip(finite, finite[1:]))
    assert np.all(np.diff(np.isfinite(times).astype(int)) >= 0)  # once feasible, stays feasible
