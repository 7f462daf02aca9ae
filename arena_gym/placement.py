"""Placement helpers shared by policies: find nodes for a shape, pick a grid, build allocations."""

from __future__ import annotations

import functools
import math

import numpy as np

from arena_gym.protocols import PerfModel
from arena_gym.types import (
    Allocation,
    GpuType,
    Grid,
    JobSpec,
    Placement,
    ResourceShape,
    Snapshot,
    localities,
)


def find_nodes(free: np.ndarray, n_nodes: int, per_node: int) -> tuple[int, ...] | None:
    """Best-fit choice of ``n_nodes`` nodes with at least ``per_node`` free GPUs (fullest first).

    Packing onto the fullest nodes that still fit keeps whole nodes free for large jobs; ties
    break by node index, so the choice is deterministic.
    """
    if n_nodes == 1:
        masked = np.where(free >= per_node, free, _int_max(free.dtype))
        best = int(masked.argmin())
        return (best,) if free[best] >= per_node else None
    fits = np.flatnonzero(free >= per_node)
    if len(fits) < n_nodes:
        return None
    order = np.argsort(free[fits], kind="stable")[:n_nodes]
    return tuple(sorted(int(i) for i in fits[order]))


@functools.lru_cache(maxsize=16)
def _int_max(dtype: np.dtype) -> int:
    """The largest value of an integer dtype (``np.iinfo`` is slow to build per call)."""
    return int(np.iinfo(dtype).max)


def place_shape(free: np.ndarray, shape: ResourceShape) -> Placement | None:
    """A placement of exactly ``shape`` on the free-GPU array of its type, or None."""
    nodes = find_nodes(free, shape.n_nodes, shape.gpus_per_node)
    return None if nodes is None else Placement(shape.gpu_type, nodes, shape.gpus_per_node)


def place(free: np.ndarray, capacity: int, gpu_type: str, num_gpus: int, relax: bool = False) -> Placement | None:
    """Place ``num_gpus`` GPUs at best locality, or (``relax``) at the most packed locality that fits."""
    if num_gpus > len(free) * capacity or int(free.sum()) < num_gpus:
        return None
    shapes = localities(gpu_type, num_gpus, capacity)
    for shape in shapes if relax else shapes[:1]:
        placement = place_shape(free, shape)
        if placement is not None:
            return placement
    return None


def best_grid(perf: PerfModel, spec: JobSpec, shape: ResourceShape) -> Grid:
    """The grid of ``shape`` whose stage count the model's proxy plan uses (1 stage if unknown)."""
    plan = perf.proxy_plan(spec.model, spec.global_batch, shape)
    if plan is not None:
        return Grid(shape, plan.n_stages)
    best, best_t = Grid(shape, 1), math.inf
    stages = 1
    while stages <= shape.num_gpus:
        grid = Grid(shape, stages)
        t = perf.grid_iter_time(spec.model, spec.global_batch, grid)
        if t < best_t:
            best, best_t = grid, t
        stages *= 2
    return best


def allocation(perf: PerfModel, spec: JobSpec, placement: Placement) -> Allocation:
    """An allocation on ``placement`` with the proxy plan's grid and plan."""
    shape = placement.shape
    plan = perf.proxy_plan(spec.model, spec.global_batch, shape)
    if plan is not None:
        return Allocation(Grid(shape, plan.n_stages), placement, plan)
    return Allocation(best_grid(perf, spec, shape), placement, None)


def node_capacity(snapshot: Snapshot, gpu_type: str) -> int:
    """GPUs per node of a type in the snapshot's cluster."""
    return snapshot.cluster.group(GpuType(gpu_type)).gpus_per_node
