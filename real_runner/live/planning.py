"""The plan a generation executes: the allocation's plan, else the belief's, made executable (no torch).

A policy's allocation may carry a concrete plan; otherwise the belief names one (the best plan of
the allocation's grid, or the proxy plan of its shape). :func:`executable_plan` takes the first
candidate that :func:`real_runner.plans.resolve_plan` accepts for the model, global batch and world
size (micro-batches dividing the per-replica batch, tp dividing the heads, uniform meshes), and
falls back to evenly split uniform plans of the grid's stage count (then of other stage counts)
when none does, saying so in the notes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from arena_gym.fields import Problems
from arena_gym.types import Allocation, ModelRef, PerfModel, Plan, StagePlan
from estimator.plan_space import largest_micro_batches, schedules, uniform_meshes
from estimator.zoo import TransformerSpec
from real_runner.plans import ExecutedPlan, model_spec, resolve_plan

log = logging.getLogger(__name__)


def even_stages(n_layers: int, n_stages: int, dp: int, tp: int) -> tuple[StagePlan, ...]:
    """``n_stages`` contiguous layer ranges over ``n_layers`` table entries, sizes differing by at most one."""
    base, extra = divmod(n_layers, n_stages)
    out, start = [], 0
    for i in range(n_stages):
        end = start + base + (1 if i < extra else 0)
        out.append(StagePlan(start, end, dp, tp))
        start = end
    return tuple(out)


def uniform_plans(spec: TransformerSpec, global_batch: int, world: int, n_stages: int) -> Iterator[Plan]:
    """Uniform plans of ``n_stages`` stages on ``world`` ranks, data parallelism first, then tensor parallelism;
    the most micro-batches up to ``2 x n_stages``, 1F1B where the plan space allows it."""
    n_layers = spec.layers + 2
    if world % n_stages or n_stages > n_layers:
        return
    for dp, tp in uniform_meshes(spec.heads, global_batch, world // n_stages):
        micro = largest_micro_batches(global_batch // dp, 2 * n_stages)
        yield Plan(even_stages(n_layers, n_stages, dp, tp), micro, schedules(n_stages, micro)[-1])


def candidate_plans(
    model: ModelRef, global_batch: int, alloc: Allocation, belief: PerfModel
) -> Iterator[tuple[str, Plan]]:
    """(source, plan) candidates for an allocation, best first."""
    if alloc.plan is not None:
        yield "allocation", alloc.plan
    grid_plan = getattr(belief, "grid_plan", None)  # the estimator's models can name the best plan of a grid
    if grid_plan is not None:
        plan = grid_plan(model, global_batch, alloc.grid)
        if plan is not None:
            yield "belief grid plan", plan
    proxy = belief.proxy_plan(model, global_batch, alloc.shape)
    if proxy is not None:
        yield "belief proxy plan", proxy
    spec = model_spec(model.name)
    world = alloc.num_gpus
    stage_counts = [alloc.grid.n_stages] + [s for s in (1, 2, 4, 8, 16) if s != alloc.grid.n_stages and s <= world]
    for stages in stage_counts:
        for plan in uniform_plans(spec, global_batch, world, stages):
            yield f"uniform {stages}-stage plan", plan


def executable_plan(model: ModelRef, global_batch: int, alloc: Allocation, belief: PerfModel) -> ExecutedPlan:
    """The first candidate the runner can execute on the allocation's devices; ValueError when none can."""
    spec = model_spec(model.name)
    failed = Problems()  # the candidates that could not run, and why
    for source, plan in candidate_plans(model, global_batch, alloc, belief):
        try:
            executed = resolve_plan(spec, plan, global_batch, alloc.num_gpus)
        except ValueError as exc:
            failed.add(f"{source}: {exc}")
            continue
        if failed:
            executed = ExecutedPlan(executed.requested, executed.plan, (*executed.notes, f"{source} used; {failed}"))
        return executed
    raise ValueError(
        f"no executable plan of {model.name} with global batch {global_batch} on "
        f"{alloc.num_gpus} device(s): {failed or 'no candidate'}"
    )
