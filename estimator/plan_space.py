"""The space of plans the live runner executes, in one place (no torch here).

The runner (``real_runner.plans``) checks and maps every plan it is given against these rules, and
the profiled performance model (``estimator.profiled``) searches exactly these plans:

* every stage on the same ``(dp, tp)`` mesh, ``dp x tp`` ranks per stage; ``tp`` divides the
  attention heads and, unless allowed, stays inside a node; ``dp`` divides the global batch
  (:func:`uniform_meshes`);
* a micro-batch count that divides the per-replica batch; the planner tries the powers of two up
  to :data:`MAX_MICRO_BATCHES` (:func:`micro_batch_options`);
* the divisibility rules themselves, which every reader applies: :func:`tp_fits`, :func:`dp_fits`,
  :func:`micro_fits` (and :func:`largest_micro_batches`, the count a runner falls back to);
* GPipe, or 1F1B when there are several stages and at least as many micro-batches as stages
  (:func:`schedules`; the runner runs a 1F1B plan with too few micro-batches as GPipe,
  :func:`executed_schedule`);
* every contiguous partition of the layer table into stages, at the cost model's pipeline units
  (:func:`executable_plans`).

The analytical planner (``estimator.planner``) searches Arena's wider space (a mesh per stage);
the runner maps such a plan to the nearest uniform mesh with :func:`uniform_meshes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from arena_gym.types import PipeSchedule, Plan, ResourceShape, StagePlan
from estimator.costmodel import pipeline_units
from estimator.planner import PlannerConfig, all_partitions
from estimator.zoo import ModelArch

#: Most micro-batches the planner tries per step.
MAX_MICRO_BATCHES = 64


def tp_fits(heads: int, tp: int) -> bool:
    """Tensor parallelism splits whole attention heads: ``tp`` is positive and divides ``heads``."""
    return tp >= 1 and heads % tp == 0


def dp_fits(batch: int, dp: int) -> bool:
    """Data parallelism splits the global batch evenly: ``dp`` is positive and divides ``batch``."""
    return dp >= 1 and batch % dp == 0


def micro_fits(per_replica: int, micro: int) -> bool:
    """Micro-batches split a replica's batch evenly: ``micro`` is positive and divides ``per_replica``."""
    return micro >= 1 and per_replica % micro == 0


def largest_micro_batches(per_replica: int, at_most: int) -> int:
    """The most micro-batches, at most ``at_most`` (and at least 1), that divide ``per_replica``."""
    return max(m for m in range(1, max(1, min(at_most, per_replica)) + 1) if micro_fits(per_replica, m))


def uniform_meshes(
    heads: int, batch: int, per_stage: int, gpus_per_node: int | None = None, allow_cross_node_tp: bool = False
) -> Iterator[tuple[int, int]]:
    """``(dp, tp)`` with ``dp x tp = per_stage`` that the runner can execute, by ascending ``tp``:
    ``tp`` divides ``heads`` (and is at most ``gpus_per_node`` when given, unless
    ``allow_cross_node_tp``), ``dp`` divides ``batch``."""
    for tp in range(1, per_stage + 1):
        if per_stage % tp or not tp_fits(heads, tp):
            continue
        dp = per_stage // tp
        if not dp_fits(batch, dp) or (gpus_per_node is not None and tp > gpus_per_node and not allow_cross_node_tp):
            continue
        yield dp, tp


def micro_batch_options(per_replica: int) -> list[int]:
    """The micro-batch counts the planner tries: powers of two up to :data:`MAX_MICRO_BATCHES` that divide ``per_replica``."""
    out, b = [], 1
    while b <= min(per_replica, MAX_MICRO_BATCHES):
        if micro_fits(per_replica, b):
            out.append(b)
        b *= 2
    return out


def schedules(n_stages: int, micro_batches: int) -> tuple[PipeSchedule, ...]:
    """The schedules a plan of ``n_stages`` stages and ``micro_batches`` micro-batches can run."""
    if n_stages == 1 or micro_batches < n_stages:
        return (PipeSchedule.GPIPE,)
    return (PipeSchedule.GPIPE, PipeSchedule.ONE_F_ONE_B)


def executed_schedule(schedule: PipeSchedule, n_stages: int, micro_batches: int) -> PipeSchedule:
    """The schedule the runner runs: 1F1B needs at least as many micro-batches as stages, else GPipe."""
    if n_stages > 1 and schedule is PipeSchedule.ONE_F_ONE_B and micro_batches < n_stages:
        return PipeSchedule.GPIPE
    return schedule


def grid_options(
    heads: int, batch: int, shape: ResourceShape, n_stages: int, cfg: PlannerConfig, dp_only: bool = False
) -> list[tuple[int, int, int, PipeSchedule]]:
    """(dp, tp, micro-batches, schedule) of every executable uniform mesh of a grid (partitions aside)."""
    if shape.num_gpus % n_stages:
        return []
    per_stage = shape.num_gpus // n_stages
    out: list[tuple[int, int, int, PipeSchedule]] = []
    for dp, tp in uniform_meshes(heads, batch, per_stage, shape.gpus_per_node, cfg.allow_cross_node_tp):
        if dp_only and tp > 1:
            continue
        for micro in micro_batch_options(batch // dp):
            out.extend((dp, tp, micro, s) for s in schedules(n_stages, micro))
    return out


@lru_cache(maxsize=256)
def partitions(arch: ModelArch, n_stages: int, n_units: int) -> np.ndarray:
    """Layer bounds ``[P, S+1]`` of every contiguous partition of the pipeline units into ``n_stages`` stages."""
    units = pipeline_units(arch, n_units)
    parts = all_partitions(len(units) - 1, n_stages)
    return units[parts] if len(parts) else np.zeros((0, n_stages + 1), dtype=np.int64)


def executable_plans(arch: ModelArch, batch: int, shape: ResourceShape, cfg: PlannerConfig) -> list[Plan]:
    """Every plan the profiled planner considers on ``shape`` (every stage count, partition, mesh, micro-batch count, schedule)."""
    out = []
    heads = int(arch.config.get("heads", 1))
    for S in cfg.stage_counts:
        if S > len(arch.layers):
            continue
        bounds = partitions(arch, S, max(cfg.n_units, S))
        for dp, tp, B, schedule in grid_options(heads, batch, shape, S, cfg):
            for b in bounds:
                out.append(Plan(tuple(StagePlan(int(b[j]), int(b[j + 1]), dp, tp) for j in range(S)), B, schedule))
    return out
