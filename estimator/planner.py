"""AP planner: pruned plan search per grid, Pareto sets, proxy plans, the data-parallel view and
an exhaustive search for reference.

Search space of a grid (resource shape x stage count ``S``), following the artifact's planner
(docs/arena.md §2, §6):

* layers are first coarsened into at most ``n_units`` (16) contiguous pipeline units balanced by
  roofline load (the artifact's 16 pipeline layers);
* stage GPU quotas are powers of two; the pruned planner gives every stage ``N / S`` GPUs;
* layer partitions: the ``partitions`` contiguous unit partitions with the most balanced
  per-stage load on that GPU type (FLOPs over the datasheet peak plus bytes over the
  datasheet bandwidth: Arena's "computation load");
* per-stage meshes ``(dp, tp)`` with ``dp * tp`` = stage GPUs, ``dp`` at most the micro-batch
  size, tensor parallelism inside a node unless ``allow_cross_node_tp``; candidates are every
  uniform mesh plus a per-stage greedy choice (each stage its fastest feasible mesh);
* micro-batch counts from ``micro_batches`` (16 by default, as the artifact profiles).

Candidates failing the memory check are dropped. The best feasible candidate of a grid is its
plan; the best grid of a shape is the shape's proxy plan. :func:`exhaustive_best` searches the
same space without pruning: every contiguous unit partition, every ordered power-of-two quota
vector and every combination of per-stage meshes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dataclasses_replace
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from arena_gym.types import PipeSchedule, Plan, ResourceShape, StagePlan
from estimator.costmodel import (
    Infeasible,
    ModelConsts,
    PlanEstimate,
    PlanTimes,
    Rates,
    StageAgg,
    StageCosts,
    compose,
    estimate_plan,
    model_consts,
    p2p_times,
    pipeline_units,
    stage_aggregates,
    stage_costs,
    valid_meshes,
)
from estimator.dpmemory import dp_need_gib, dp_rule_fits
from estimator.hardware import GpuSpec
from estimator.params import EstimatorParams
from estimator.zoo import ModelArch


@dataclass(frozen=True)
class PlannerConfig:
    """Knobs of the plan search (see the module docstring)."""

    n_units: int = 16
    micro_batches: tuple[int, ...] = (16,)
    schedule: PipeSchedule = PipeSchedule.ONE_F_ONE_B
    allow_cross_node_tp: bool = False
    partitions: int = 3
    pareto_size: int = 8
    stage_counts: tuple[int, ...] = field(default=(1, 2, 4, 8, 16))

    def micro_batch_options(self, batch: int) -> tuple[int, ...]:
        """Micro-batch counts tried for a global batch (never more than the batch)."""
        return tuple(sorted({max(1, min(b, batch)) for b in self.micro_batches}))

    def key(self) -> str:
        """Stable text for cache keys."""
        return (
            f"u{self.n_units}-b{','.join(map(str, self.micro_batches))}-{self.schedule.value}-"
            f"x{int(self.allow_cross_node_tp)}-p{self.partitions}-s{','.join(map(str, self.stage_counts))}"
        )


# ----------------------------------------------------------------------------------------------
# layer units and partitions


@lru_cache(maxsize=64)
def all_partitions(n_units: int, n_stages: int) -> np.ndarray:
    """Every contiguous partition of ``n_units`` units into ``n_stages`` stages: ``[P, S+1]`` bounds."""
    if n_stages > n_units or n_stages < 1:
        return np.zeros((0, n_stages + 1), dtype=np.int64)
    combos = list(itertools.combinations(range(1, n_units), n_stages - 1))
    cuts = np.array(combos, dtype=np.int64).reshape(len(combos), n_stages - 1)
    out = np.empty((len(combos), n_stages + 1), dtype=np.int64)
    out[:, 0], out[:, -1] = 0, n_units
    out[:, 1:-1] = cuts
    return out


def unit_loads(arch: ModelArch, gpu: GpuSpec, units: np.ndarray) -> np.ndarray:
    """Roofline load (s per sample, datasheet rates) of each unit on ``gpu``."""
    lay = arch.layers
    per_layer = (3.0 + arch.remat) * (
        lay.flops / (gpu.matrix_tflops(arch.dtype) * 1e12) + (lay.op_bytes + lay.rep_bytes) / (gpu.mem_bw_gbs * 1e9)
    )
    cum = np.concatenate([[0.0], np.cumsum(per_layer)])
    return cum[units[1:]] - cum[units[:-1]]


@lru_cache(maxsize=4096)
def balanced_partitions(arch: ModelArch, gpu: GpuSpec, n_stages: int, k: int, n_units: int = 16) -> np.ndarray:
    """Layer bounds ``[<=k, S+1]`` of the ``k`` unit partitions with the smallest maximum stage load."""
    units = pipeline_units(arch, n_units)
    parts = all_partitions(len(units) - 1, n_stages)
    if len(parts) == 0:
        return np.zeros((0, n_stages + 1), dtype=np.int64)
    cum = np.concatenate([[0.0], np.cumsum(unit_loads(arch, gpu, units))])
    loads = cum[parts[:, 1:]] - cum[parts[:, :-1]]
    order = np.lexsort(((loads**2).sum(axis=1), loads.max(axis=1)))[:k]
    out = units[parts[order]]
    out.setflags(write=False)
    return out


def quota_vectors(num_gpus: int, n_stages: int) -> np.ndarray:
    """Every ordered vector of ``n_stages`` powers of two summing to ``num_gpus``: ``[Q, S]``."""
    powers = [1 << i for i in range(num_gpus.bit_length()) if (1 << i) <= num_gpus]
    out = [q for q in itertools.product(powers, repeat=n_stages) if sum(q) == num_gpus]
    return np.array(out, dtype=np.int64).reshape(-1, n_stages)


# ----------------------------------------------------------------------------------------------
# batched evaluation of symmetric-quota candidates


@dataclass(frozen=True)
class PlanGroup:
    """One (model, batch, GPU type) with the shapes to plan for."""

    arch: ModelArch
    batch: int
    gpu: GpuSpec
    shapes: tuple[ResourceShape, ...]


class GridResults(NamedTuple):
    """Best plan of every planned grid (arrays over grids)."""

    group: np.ndarray  # index into the groups
    shape: np.ndarray  # index into the group's shapes
    n_stages: int
    times: PlanTimes  # of the best feasible candidate (reason = the most advanced failure otherwise)
    bounds: np.ndarray  # [G, S+1] layer bounds
    dp: np.ndarray  # [G, S]
    tp: np.ndarray  # [G, S]
    micro_batches: np.ndarray  # [G]


def _per_block(rows: Sequence[NamedTuple], cls: type[Any], index: np.ndarray) -> Any:
    """Stack one NamedTuple per group into arrays ``[NB, 1, 1]`` indexed by each block's group."""
    return cls(
        **{f: np.array([getattr(r, f) for r in rows], dtype=np.float64)[index][:, None, None] for f in cls._fields}
    )


class _Blocks(NamedTuple):
    """Symmetric-quota candidates of one stage count: blocks x uniform meshes x stages."""

    group: np.ndarray  # [NB]
    shape: np.ndarray  # [NB]
    bounds: np.ndarray  # [NB, S+1]
    B: np.ndarray  # [NB]
    agg: StageAgg  # [NB, 1, S]
    dp: np.ndarray  # [NB, M, S]
    tp: np.ndarray
    mesh_ok: np.ndarray  # [NB, M]
    off: np.ndarray  # [NB, 1, S]
    g: np.ndarray  # [NB, 1, 1]
    m: np.ndarray  # [NB, 1, 1]
    gpn: np.ndarray  # [NB, 1, 1]
    mc: ModelConsts  # [NB, 1, 1]


def _build_blocks(groups: Sequence[PlanGroup], S: int, cfg: PlannerConfig) -> _Blocks | None:
    """One block per (group, shape with N % S == 0, balanced partition, micro-batch count)."""
    pieces = []
    for gi, grp in enumerate(groups):
        sel = [i for i, sh in enumerate(grp.shapes) if sh.num_gpus % S == 0]
        bounds = balanced_partitions(grp.arch, grp.gpu, S, cfg.partitions, cfg.n_units)
        if not sel or len(bounds) == 0:
            continue
        bopts = np.array(cfg.micro_batch_options(grp.batch), dtype=np.float64)
        si, ki, bi = (a.ravel() for a in np.indices((len(sel), len(bounds), len(bopts))))
        agg = stage_aggregates(grp.arch, bounds)
        pieces.append(
            (
                np.full(len(si), gi),
                np.array(sel)[si],
                bounds[ki],
                bopts[bi],
                np.array([grp.shapes[i].num_gpus for i in sel])[si],
                np.array([grp.shapes[i].gpus_per_node for i in sel])[si],
                StageAgg._make(x[ki] for x in agg),
            )
        )
    if not pieces:
        return None
    group, shape, bounds, B, n, gpn = (np.concatenate([p[i] for p in pieces]) for i in range(6))
    agg = StageAgg(**{f: np.concatenate([getattr(p[6], f) for p in pieces])[:, None, :] for f in StageAgg._fields})
    g = n // S
    tp = np.broadcast_to(1 << np.arange(int(g.max()).bit_length()), (len(g), int(g.max()).bit_length()))
    mesh_ok = tp <= g[:, None]
    tp = np.where(mesh_ok, tp, 1)
    dp = np.where(mesh_ok, g[:, None] // tp, 1)
    batch = np.array([grp.batch for grp in groups], dtype=np.float64)[group]
    return _Blocks(
        group,
        shape,
        bounds,
        B,
        agg,
        np.repeat(dp[:, :, None], S, axis=2).astype(np.float64),
        np.repeat(tp[:, :, None], S, axis=2).astype(np.float64),
        mesh_ok,
        (np.arange(S)[None, :] * g[:, None])[:, None, :],
        g[:, None, None],
        (batch / B)[:, None, None],
        gpn[:, None, None],
        _per_block([model_consts(grp.arch) for grp in groups], ModelConsts, group),
    )


class _Evaluated(NamedTuple):
    """Every candidate of a block set: ``M`` uniform meshes plus the greedy per-stage one."""

    times: PlanTimes  # [NB, M+1]
    feasible: np.ndarray  # [NB, M+1]
    dp: np.ndarray  # [NB, M+1, S]
    tp: np.ndarray  # [NB, M+1, S]


def _evaluate_blocks(bl: _Blocks, rates: Rates, S: int, cfg: PlannerConfig) -> _Evaluated:
    valid = np.ones((1, 1, S), dtype=bool)
    B3 = bl.B[:, None, None]
    sc = stage_costs(
        bl.agg,
        bl.dp,
        bl.tp,
        bl.off,
        bl.g,
        np.arange(S),
        S,
        B3,
        bl.m,
        bl.gpn,
        rates,
        bl.mc,
        cfg.schedule,
        cfg.allow_cross_node_tp,
    )
    r = p2p_times(bl.agg, bl.off, bl.g, valid, bl.m, bl.gpn, rates)
    sym = compose(sc, r, valid, bl.B[:, None])
    sym_ok = bl.mesh_ok & (sym.reason == 0)
    # greedy: each stage takes its fastest feasible mesh
    score = B3 * (sc.c_fw + sc.a_fw + sc.c_bw + sc.a_bw) + sc.sync + sc.upd
    score = np.where(bl.mesh_ok[:, :, None] & (sc.reason == 0), score, np.inf)
    choice = np.argmin(score, axis=1)[:, None, :]
    picked = StageCosts._make(np.take_along_axis(np.broadcast_to(x, sc.mem.shape), choice, axis=1) for x in sc)
    greedy = compose(picked, r, valid, bl.B[:, None])
    greedy_ok = np.isfinite(np.take_along_axis(score, choice, axis=1)).all(axis=-1)
    nb, m = bl.mesh_ok.shape
    times = PlanTimes._make(
        np.concatenate([np.broadcast_to(a, (nb, m)), np.broadcast_to(b, (nb, 1))], axis=1) for a, b in zip(sym, greedy)
    )
    feasible = np.concatenate([sym_ok, greedy_ok], axis=1)
    dp = np.concatenate([bl.dp, np.take_along_axis(bl.dp, choice, axis=1)], axis=1)
    tp = np.concatenate([bl.tp, np.take_along_axis(bl.tp, choice, axis=1)], axis=1)
    return _Evaluated(times, feasible, dp, tp)


class PreparedGroups:
    """The rate-independent part of planning many groups: candidate blocks per stage count.

    :meth:`solve` then plans every grid for one set of rates (one :class:`Rates` per group);
    calibration re-solves the same prepared candidates with new parameters.
    """

    def __init__(self, groups: Sequence[PlanGroup], cfg: PlannerConfig) -> None:
        self.groups = tuple(groups)
        self.cfg = cfg
        self.blocks = {S: bl for S in cfg.stage_counts if (bl := _build_blocks(self.groups, S, cfg)) is not None}

    def solve(self, rates: Sequence[Rates]) -> dict[int, GridResults]:
        """Best plan of every grid, by stage count."""
        if len(rates) != len(self.groups):
            raise ValueError(f"need one Rates per group: {len(rates)} for {len(self.groups)} groups")
        return {
            S: _select(bl, _evaluate_blocks(bl, _per_block(rates, Rates, bl.group), S, self.cfg), S)
            for S, bl in self.blocks.items()
        }


def _select(bl: _Blocks, ev: _Evaluated, S: int) -> GridResults:
    total = np.where(ev.feasible, ev.times.total, np.inf)
    best_c = np.argmin(total, axis=1)
    block_time = total[np.arange(len(best_c)), best_c]
    # blocks of one grid are contiguous: (group, shape) pairs in order
    grid_key = bl.group * 1_000_000 + bl.shape
    starts = np.flatnonzero(np.r_[True, grid_key[1:] != grid_key[:-1]])
    seg_id = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(block_time)]))
    order = np.lexsort((block_time, seg_id))
    best_block = order[np.searchsorted(seg_id[order], np.arange(len(starts)))]
    seg_min = block_time[best_block]
    # for infeasible grids report the most advanced failure among candidates
    worst = np.where(bl.mesh_ok, ev.times.reason[:, :-1], 0).max(axis=1)
    seg_reason = np.maximum.reduceat(worst, starts)
    pick = (best_block, best_c[best_block])
    times = PlanTimes._make(x[pick] for x in ev.times)
    times = times._replace(
        reason=np.where(np.isfinite(seg_min), 0, seg_reason), total=np.where(np.isfinite(seg_min), times.total, np.inf)
    )
    return GridResults(
        bl.group[starts],
        bl.shape[starts],
        S,
        times,
        bl.bounds[best_block],
        ev.dp[pick],
        ev.tp[pick],
        bl.B[best_block].astype(np.int64),
    )


def decode_plan(
    bounds: np.ndarray, dp: np.ndarray, tp: np.ndarray, micro_batches: int, schedule: PipeSchedule = PipeSchedule.GPIPE
) -> Plan:
    """A :class:`Plan` from layer bounds and per-stage meshes."""
    stages = tuple(StagePlan(int(bounds[j]), int(bounds[j + 1]), int(dp[j]), int(tp[j])) for j in range(len(dp)))
    return Plan(stages, int(micro_batches), schedule)


# ----------------------------------------------------------------------------------------------
# one grid: every candidate, the Pareto set


def grid_candidates(
    arch: ModelArch, batch: int, gpu: GpuSpec, rates: Rates, shape: ResourceShape, n_stages: int, cfg: PlannerConfig
) -> list[tuple[float, float, Plan]]:
    """Every feasible candidate of one grid as ``(seconds, bytes per GPU, plan)``, fastest first."""
    bl = _build_blocks([PlanGroup(arch, batch, gpu, (shape,))], n_stages, cfg)
    if bl is None:
        return []
    ev = _evaluate_blocks(bl, _per_block([rates], Rates, bl.group), n_stages, cfg)
    out = []
    for b, c in zip(*np.nonzero(ev.feasible)):
        plan = decode_plan(bl.bounds[b], ev.dp[b, c], ev.tp[b, c], int(bl.B[b]), cfg.schedule)
        out.append((float(ev.times.total[b, c]), float(ev.times.mem[b, c]), plan))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


def pareto_front(candidates: Sequence[tuple[float, float, Plan]], size: int) -> list[tuple[float, float, Plan]]:
    """Candidates not beaten on both time and memory (fastest first), at most ``size``, distinct plans."""
    front: list[tuple[float, float, Plan]] = []
    best_mem = math.inf
    seen: set[Plan] = set()
    for t, mem, plan in sorted(candidates, key=lambda x: (x[0], x[1])):
        if mem < best_mem and plan not in seen:
            front.append((t, mem, plan))
            seen.add(plan)
            best_mem = mem
    if len(front) > size:  # keep the fastest, the leanest, and evenly spaced ones between
        idx = np.unique(np.round(np.linspace(0, len(front) - 1, size)).astype(int))
        front = [front[i] for i in idx]
    return front


# ----------------------------------------------------------------------------------------------
# the data-parallel view


def dp_plan(arch: ModelArch, batch: int, num_gpus: int, micro_batches: int = 16) -> Plan:
    """The data-parallel-only plan: one stage, ``dp = num_gpus``, ``tp = 1`` (gradient accumulation)."""
    return Plan(
        (StagePlan(0, len(arch.layers), num_gpus, 1),), max(1, min(micro_batches, batch)), PipeSchedule.ONE_F_ONE_B
    )


def dp_estimate(
    arch: ModelArch,
    batch: int,
    shape: ResourceShape,
    gpu: GpuSpec,
    rates: Rates,
    params: EstimatorParams,
    micro_batches: int = 16,
) -> PlanEstimate:
    """What an SP-aware scheduler believes: the DP-only plan, feasible only under the artifact's
    DP memory rule (``need * 1.2 <= 0.8 * GPU memory``, need from :mod:`estimator.dpmemory`) and
    the plan's own constraints."""
    est = estimate_plan(arch, batch, shape, dp_plan(arch, batch, shape.num_gpus, micro_batches), rates)
    need = float(dp_need_gib(arch, batch, shape.num_gpus, params, micro_batches))
    rule_ok = bool(dp_rule_fits(need, gpu.memory_gb))
    structural = est.reason not in (Infeasible.OK.describe(), Infeasible.OUT_OF_MEMORY.describe())
    if structural:
        return est
    if rule_ok:
        return dataclasses_replace(est, feasible=True, reason=Infeasible.OK.describe())
    return dataclasses_replace(
        est, feasible=False, reason=f"{Infeasible.OUT_OF_MEMORY.describe()} (DP memory rule: need {need:.1f} GiB)"
    )


# ----------------------------------------------------------------------------------------------
# exhaustive reference search


def exhaustive_best(
    arch: ModelArch,
    batch: int,
    gpu: GpuSpec,
    rates: Rates,
    shape: ResourceShape,
    cfg: PlannerConfig,
    max_rows: int = 400_000,
) -> tuple[float, Plan | None]:
    """Best plan of a shape over the unpruned space: every stage count, contiguous unit partition,
    ordered power-of-two quota vector, per-stage mesh combination and micro-batch count.

    Evaluated in chunks of at most ``max_rows`` candidates.
    """
    units = pipeline_units(arch, cfg.n_units)
    N, gpn = shape.num_gpus, shape.gpus_per_node
    mc = model_consts(arch)
    best_t, best_plan = math.inf, None
    for S in cfg.stage_counts:
        if S > N or S > len(units) - 1:
            continue
        bounds = units[all_partitions(len(units) - 1, S)]  # [P, S+1]
        agg = stage_aggregates(arch, bounds)
        for q in quota_vectors(N, S):
            meshes = [valid_meshes(int(g)) for g in q]
            combos = np.array(list(itertools.product(*meshes)), dtype=np.float64)  # [C, S, 2]
            dp, tp = combos[..., 0], combos[..., 1]
            off = np.concatenate([[0], np.cumsum(q)[:-1]])
            for B in cfg.micro_batch_options(batch):
                m = batch / B
                step = max(1, max_rows // max(1, len(combos)))
                for lo in range(0, len(bounds), step):
                    a = StageAgg._make(x[lo : lo + step, None, :] for x in agg)
                    sc = stage_costs(
                        a,
                        dp[None],
                        tp[None],
                        off,
                        q,
                        np.arange(S),
                        S,
                        B,
                        m,
                        gpn,
                        rates,
                        mc,
                        cfg.schedule,
                        cfg.allow_cross_node_tp,
                    )
                    valid = np.ones(S, dtype=bool)
                    r = p2p_times(a, off, q, valid, m, gpn, rates)
                    pt = compose(sc, r, valid, B)
                    total = np.where(pt.reason == 0, pt.total, np.inf)
                    i = np.unravel_index(np.argmin(total), total.shape)
                    if total[i] < best_t:
                        best_t = float(total[i])
                        best_plan = decode_plan(bounds[lo + i[0]], dp[i[1]], tp[i[1]], B, cfg.schedule)
    return best_t, best_plan


def dp_view(
    items: Sequence[tuple[ModelArch, int, GpuSpec, Rates, Sequence[ResourceShape]]],
    params: EstimatorParams,
    micro_batches: int = 16,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Vectorised :func:`dp_estimate` for many (model, batch, GPU, rates, shapes) items at once:
    per item, (seconds or inf per shape, DP memory need in GiB per shape)."""
    counts = [len(it[4]) for it in items]
    idx = np.repeat(np.arange(len(items)), counts)
    shapes = [s for it in items for s in it[4]]
    n = np.array([s.num_gpus for s in shapes], dtype=np.float64)[:, None]
    gpn = np.array([s.gpus_per_node for s in shapes], dtype=np.float64)[:, None]
    B = np.array([max(1, min(micro_batches, it[1])) for it in items], dtype=np.float64)[idx][:, None]
    batch = np.array([it[1] for it in items], dtype=np.float64)[idx][:, None]
    aggs = [stage_aggregates(it[0], np.array([0, len(it[0].layers)])) for it in items]
    agg = StageAgg(**{f: np.array([getattr(a, f)[0] for a in aggs])[idx][:, None] for f in StageAgg._fields})
    rates = Rates(
        **{f: np.array([getattr(it[3], f) for it in items], dtype=np.float64)[idx][:, None] for f in Rates._fields}
    )
    consts = [model_consts(it[0]) for it in items]
    mc = ModelConsts(
        **{f: np.array([getattr(c, f) for c in consts], dtype=np.float64)[idx][:, None] for f in ModelConsts._fields}
    )
    valid = np.ones(1, dtype=bool)
    sc = stage_costs(agg, n, 1.0, 0, n, np.arange(1), 1, B, batch / B, gpn, rates, mc, PipeSchedule.ONE_F_ONE_B, True)
    pt = compose(sc, np.zeros((len(shapes), 1)), valid, B[:, 0])
    need = (
        np.concatenate(
            [
                np.atleast_1d(dp_need_gib(it[0], it[1], [s.num_gpus for s in it[4]], params, micro_batches))
                for it in items
                if it[4]
            ]
        )
        if shapes
        else np.zeros(0)
    )
    memory = np.array([it[2].memory_gb for it in items])[idx]
    ok = ((pt.reason == 0) | (pt.reason == int(Infeasible.OUT_OF_MEMORY))) & dp_rule_fits(need, memory)
    time = np.where(ok, pt.total, np.inf)
    cuts = np.cumsum(counts)[:-1]
    return list(zip(np.split(time, cuts), np.split(need, cuts)))
