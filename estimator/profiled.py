"""Composition of a measured :class:`~estimator.profile.Profile` into plan iteration times, and the
``profiled:PROFILE.json`` performance model.

A plan's iteration is composed the way the runner (``real_runner.executor``) executes it. Per
stage ``j`` (layers ``[a, b)`` on a ``(dp, tp)`` mesh) and micro-batch (``n = batch / B / dp``
samples per device):

* forward ``F_j`` = the profiled forward seconds of its layers at ``n`` samples (blocks at ``tp``
  local heads; embedding and head are replicated) + the wrappers' overheads (DTensor TP on
  blocks, FSDP2 on every layer, the pipeline schedule's per-micro-batch cost when ``S > 1``)
  + DTensor TP's two all-reduces of the hidden state per block + (one stage) FSDP2's all-gather
  of every unit: each block, and the root's parameters (embedding, head);
* backward ``B_j`` likewise (one autograd call per stage, not per layer), with four all-reduces
  per block (the input gradients of q, k, v and fc1) and (one stage) a second all-gather of every
  unit (FSDP2 resharded them after forward);
* in a pipeline, a stage's computation (forward and backward) scaled by ``1 + order fraction`` of
  its micro-batches in flight (all ``B`` in GPipe, at most ``S - j`` in 1F1B; profile version 4):
  a backward that runs after other micro-batches' forwards revisits displaced activations;
* per step: FSDP2's reduce-scatter of every unit (and, for pipelines, its one all-gather per unit),
  the AdamW step of the stage's local parameters, the global batch's construction, the loss
  all-reduce over all ranks and the control all-reduce the job loop makes before every step.

Where the profile has wrapped layers timed on a real group (``grouped`` curves, profile version 3)
and the plan's group is such a group (inside one node), they replace the pieces above: a
tensor-parallel block's forward and backward are the grouped ``tp`` curve (local-head computation,
DTensor's dispatch and its all-reduces, timed together), and for single-stage plans without tensor
parallelism every FSDP2 unit's forward and backward per micro-batch are the grouped ``fsdp`` curve
(computation, wrapper, gathers, timed together, no gradient synchronisation) and the step's last
micro-batch adds, per unit, the measured difference of the ``fsdp_sync`` curve (the reduce-scatter
and FSDP2's copies around it), charged in the per-step sync. The
collectives of grouped layers count as computation in the breakdown.

Stages are composed by the event simulation of the schedule's op order
(:mod:`estimator.pipeline`), with the pipeline's point-to-point times on the boundaries; the
iteration ends when the slowest stage has finished its optimizer step. The split reported:
``compute`` and ``intra`` of the bottleneck stage (computation; intra-stage collectives),
``inter`` (what the point-to-point transfers add) and ``bubble`` (the rest: fill, drain, waits).

Memory per device and feasibility come from the cost model (:func:`estimator.costmodel.stage_costs`).

The performance model searches the plans the runner executes as they are (the plan space of
:mod:`estimator.plan_space`: uniform meshes, power-of-two micro-batch counts, both schedules,
every contiguous layer partition; the most balanced partitions by profiled time when there are many).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from arena_gym.types import ClusterSpec, Grid, ModelRef, PipeSchedule, Plan, ResourceShape, StagePlan
from estimator.costmodel import (
    GIB,
    Infeasible,
    PlanEstimate,
    check_plan,
    model_consts,
    rates_for,
    stage_aggregates,
    stage_costs,
)
from estimator.hardware import canonical_gpu_name, get_gpu, node_links
from estimator.perfmodel import EstimatorPerfModel, GridPlans
from estimator.pipeline import simulate
from estimator.plan_space import executable_plans as executable_plans
from estimator.plan_space import grid_options
from estimator.plan_space import partitions as _partitions
from estimator.planner import PlannerConfig
from estimator.profile import ModelInfo, Profile, load_profile
from estimator.table import MAX_STAGES, TableRequest, TypeTable
from estimator.zoo import ModelArch

log = logging.getLogger(__name__)

#: Partitions evaluated per (stage count, mesh, micro-batches) before falling back to the most balanced ones.
MAX_PARTITIONS = 256
#: Bytes of the loss scalar and of the job loop's control flags, all-reduced every step.
LOSS_BYTES, CONTROL_BYTES = 4, 8
#: DTensor TP's all-reduces of the hidden state per block and micro-batch: the outputs of ``wo`` and
#: ``fc2`` forward; the input gradients of ``wq``, ``wk``, ``wv`` and ``fc1`` backward.
TP_ALL_REDUCES_FW, TP_ALL_REDUCES_BW = 2, 4


class Composed(NamedTuple):
    """Composed iteration times (arrays over candidates)."""

    total: np.ndarray
    compute: np.ndarray
    intra: np.ndarray
    inter: np.ndarray
    bubble: np.ndarray


@dataclass(frozen=True)
class _LayerCosts:
    """Per layer-table entry, at one (samples, dp, tp, pipelined) setting: arrays over layers."""

    fw: np.ndarray  # compute + wrapper overheads (+ the wrapper's collectives where timed on a real group)
    bw: np.ndarray
    opt: np.ndarray  # AdamW step (per step)
    block: np.ndarray  # 1.0 for blocks
    root_bytes: np.ndarray  # parameter bytes of non-block layers (FSDP's root unit)
    tp_table: np.ndarray  # 1.0 for blocks whose tensor-parallel all-reduces come from the tables
    fsdp_table: np.ndarray  # 1.0 for layers whose FSDP2 all-gathers come from the tables
    sync: np.ndarray  # per step: a grouped FSDP2 unit's measured gradient synchronisation (0 where the tables apply)


def _nodes(size: int, stride: int, gpn: int) -> int:
    """Nodes spanned by a group of ``size`` ranks ``stride`` apart, aligned on power-of-two boundaries."""
    return max(1, min(size, size * stride // gpn))


def _layer_costs(
    profile: Profile, info: ModelInfo, n: float, dp: int, tp: int, grouped_tp: bool = False, grouped_fsdp: bool = False
) -> _LayerCosts:
    """Per-layer costs; ``grouped_tp`` / ``grouped_fsdp``: use the curves timed on a real group of ``tp`` / ``dp``
    devices where the profile has them (a grouped FSDP2 unit's gradient synchronisation goes to ``sync``, per step)."""
    kinds = [info.kind(i) for i in range(info.n_layers)]
    per_kind: dict[str, tuple[float, ...]] = {}
    for kind in set(kinds):
        params = info.layers[kind]
        wrapped: dict[str, int] = {}
        tp_curve = (
            profile.grouped_curve(info.name, kind, "tp", tp) if grouped_tp and tp > 1 and kind == "block" else None
        )
        fsdp_curve = sync_curve = None
        if grouped_fsdp and dp > 1 and tp == 1:
            fsdp_curve = profile.grouped_curve(info.name, kind, "fsdp", dp)
            sync_curve = profile.grouped_curve(info.name, kind, "fsdp_sync", dp)
            if sync_curve is None:
                fsdp_curve = None
        sync = 0.0
        if fsdp_curve is not None and sync_curve is not None:  # computation and FSDP2's gathers, timed together
            fw, bw = (float(x) for x in fsdp_curve.at(n))
            sync = max(sum(float(x) for x in sync_curve.at(n)) - fw - bw, 0.0)  # the last micro-batch's synchronisation
        elif tp_curve is not None:  # local-head computation, DTensor and its all-reduces, timed together
            fw, bw = (float(x) for x in tp_curve.at(n))
        else:
            fw, bw = (float(x) for x in profile.compute_curve(info.name, kind, tp).at(n))
            if tp > 1 and kind == "block":
                ofw, obw = _overhead(profile, info.name, kind, "tp", n)
                fw, bw = fw + ofw, bw + obw
        if tp > 1 and kind == "block":
            wrapped["tp"] = params.tp_tensors
        if dp > 1:
            if fsdp_curve is None:
                ofw, obw = _overhead(profile, info.name, kind, "fsdp", n)
                fw, bw = fw + ofw, bw + obw
            wrapped["fsdp"] = params.tensors
        tensors, elements = params.local(tp if kind == "block" else 1, dp)
        opt = float(profile.optimizer.step_s(tensors, elements, wrapped))
        root = 0.0 if kind == "block" else params.local(1, 1)[1] * info.element_bytes
        per_kind[kind] = (fw, bw, opt, root, float(tp_curve is None), float(fsdp_curve is None), sync)
    arr = np.array([per_kind[k] for k in kinds])
    return _LayerCosts(
        arr[:, 0],
        arr[:, 1],
        arr[:, 2],
        np.array([k == "block" for k in kinds], dtype=float),
        arr[:, 3],
        arr[:, 4],
        arr[:, 5],
        arr[:, 6],
    )


def _overhead(profile: Profile, model: str, layer: str, wrapper: str, n: float) -> tuple[float, float]:
    curve = profile.overhead_curve(model, layer, wrapper)
    if curve is None:
        return 0.0, 0.0
    fw, bw = curve.at(n)
    return max(0.0, float(fw)), max(0.0, float(bw))


def compose(
    profile: Profile,
    info: ModelInfo,
    global_batch: int,
    bounds: np.ndarray,
    dp: int,
    tp: int,
    micro_batches: int,
    schedule: PipeSchedule,
    gpus_per_node: int,
    include_control: bool = True,
) -> Composed:
    """Iteration times of candidates sharing one uniform mesh, micro-batch count and schedule.

    ``bounds``: layer boundaries ``[C, S+1]`` (``C`` candidate partitions of ``S`` stages).
    """
    bounds = np.atleast_2d(np.asarray(bounds, dtype=np.int64))
    S = bounds.shape[1] - 1
    B = micro_batches
    n = global_batch / B / dp
    g = dp * tp
    world = S * g
    nodes_tp, nodes_dp = _nodes(tp, 1, gpus_per_node), _nodes(dp, tp, gpus_per_node)
    # wrapped layers timed on a real group replace the one-rank overheads and the tables' collectives where the
    # plan's groups are such a group: inside one node, and for FSDP2 a single stage (pipelines keep parameters
    # gathered across micro-batches) without tensor parallelism
    lc = _layer_costs(profile, info, n, dp, tp, grouped_tp=nodes_tp == 1, grouped_fsdp=S == 1 and nodes_dp == 1)

    def stage_sum(x: np.ndarray) -> np.ndarray:
        cum = np.concatenate([[0.0], np.cumsum(x)])
        return cum[bounds[:, 1:]] - cum[bounds[:, :-1]]

    comp_f, comp_b, opt, nblk, rootb, grouped_sync = (
        stage_sum(x) for x in (lc.fw, lc.bw, lc.opt, lc.block, lc.root_bytes, lc.sync)
    )
    tp_blk = stage_sum(lc.block * lc.tp_table)  # blocks whose all-reduces come from the tables
    # FSDP2 units whose collectives come from the tables: blocks, and the root's parameter bytes
    ag_units, table_rootb = stage_sum(lc.block * lc.fsdp_table), stage_sum(lc.root_bytes * lc.fsdp_table)
    # every layer's profiled backward holds one autograd call; a stage makes one call for all its layers
    comp_b = np.maximum(comp_b - (bounds[:, 1:] - bounds[:, :-1] - 1) * profile.backward_call_s, 0.0)
    if S > 1:  # micro-batches in flight on each stage: all of them in GPipe, at most S - j in 1F1B
        in_flight = [B if schedule is PipeSchedule.GPIPE else min(B, S - j) for j in range(S)]
        order = 1.0 + np.array([profile.order_fraction(info.name, n, d) for d in in_flight])
        comp_f, comp_b = comp_f * order, comp_b * order
    act = info.activation_bytes(n)
    ar = float(profile.comm_s("all_reduce", act, tp, nodes_tp)) if tp > 1 else 0.0
    blk_bytes = info.layers["block"].local(tp, 1)[1] * info.element_bytes
    ag_blk = float(profile.comm_s("all_gather", blk_bytes, dp, nodes_dp)) if dp > 1 else 0.0
    rs_blk = float(profile.comm_s("reduce_scatter", blk_bytes, dp, nodes_dp)) if dp > 1 else 0.0
    ag_root = (
        np.where(table_rootb > 0, profile.comm_s("all_gather", table_rootb, dp, nodes_dp), 0.0)
        if dp > 1
        else np.zeros_like(rootb)
    )
    rs_root = (
        np.where(table_rootb > 0, profile.comm_s("reduce_scatter", table_rootb, dp, nodes_dp), 0.0)
        if dp > 1
        else np.zeros_like(rootb)
    )
    pipe_f, pipe_b = _overhead(profile, info.name, "model", "pipeline", n) if S > 1 else (0.0, 0.0)

    if S == 1:  # FSDP2 reshards after forward: every unit is gathered in each micro-batch's forward and backward
        comm_f = tp_blk * TP_ALL_REDUCES_FW * ar + ag_units * ag_blk + ag_root
        comm_b = tp_blk * TP_ALL_REDUCES_BW * ar + ag_units * ag_blk + ag_root
        sync = ag_units * rs_blk + rs_root + grouped_sync
    else:  # parameters stay gathered across the pipeline's micro-batches: one all-gather per unit and step
        comm_f, comm_b = tp_blk * TP_ALL_REDUCES_FW * ar, tp_blk * TP_ALL_REDUCES_BW * ar
        sync = nblk * (rs_blk + ag_blk) + rs_root + ag_root
    F = comp_f + pipe_f + comm_f
    Bk = comp_b + pipe_b + comm_b
    post = sync + opt

    p2p = np.zeros(S)
    for j in range(S - 1):
        off, nxt = j * g, (j + 1) * g
        same = off // gpus_per_node == (nxt + g - 1) // gpus_per_node
        p2p[j] = float(profile.comm_s("send_recv", act, 2, 1 if same else 2))
    nodes_world = max(1, world // gpus_per_node)
    glob = profile.data_s(info.name, global_batch)
    if world > 1:
        glob += float(profile.comm_s("all_reduce", LOSS_BYTES, world, nodes_world))
        if include_control:
            glob += float(profile.comm_s("all_reduce", CONTROL_BYTES, world, nodes_world))

    end = simulate(F, Bk, p2p[None, :], B, schedule)
    total = (end + post).max(axis=-1) + glob
    end0 = simulate(F, Bk, np.zeros((1, S)), B, schedule)
    total0 = (end0 + post).max(axis=-1) + glob
    busy = B * (F + Bk) + post
    jstar = np.argmax(busy, axis=-1)[:, None]
    pick = lambda x: np.take_along_axis(np.broadcast_to(x, busy.shape), jstar, axis=-1)[:, 0]  # noqa: E731
    compute = B * (pick(comp_f + comp_b) + pipe_f + pipe_b) + pick(opt) + profile.data_s(info.name, global_batch)
    intra = B * pick(comm_f + comm_b) + pick(sync) + (glob - profile.data_s(info.name, global_batch))
    inter = total - total0
    bubble = np.maximum(total0 - compute - intra, 0.0)
    return Composed(total, compute, intra, inter, bubble)


def step_collectives(info: ModelInfo, plan: Plan) -> dict[str, int]:
    """Collective calls one rank of the first stage makes in a training step, by kind, as :func:`compose`
    counts them (the loss all-reduce included, the job loop's control all-reduce not)."""
    dp, tp = _uniform(plan)
    st = plan.stages[0]
    blocks = sum(1 for i in range(st.layer_start, st.layer_end) if info.kind(i) == "block")
    root = any(info.kind(i) != "block" for i in range(st.layer_start, st.layer_end))
    B = plan.micro_batches
    out = {
        "all_reduce": 1 + (blocks * B * (TP_ALL_REDUCES_FW + TP_ALL_REDUCES_BW) if tp > 1 else 0),
        "all_gather": 0,
        "reduce_scatter": 0,
    }
    if dp > 1:
        units = blocks + int(root)
        out["all_gather"] = 2 * units * B if plan.n_stages == 1 else units
        out["reduce_scatter"] = units
    return out


def _uniform(plan: Plan) -> tuple[int, int]:
    dp, tp = plan.stages[0].dp, plan.stages[0].tp
    if any((s.dp, s.tp) != (dp, tp) for s in plan.stages):
        raise ValueError(
            f"plan {plan.describe()}: the profiled model composes uniform meshes only (every stage on one "
            "(dp, tp)), as the runner executes them"
        )
    return dp, tp


def _memory(
    arch: ModelArch,
    rates,
    bounds: np.ndarray,
    dp: int,
    tp: int,
    B: int,
    m: float,
    gpn: int,
    schedule: PipeSchedule,
    allow_cross_node_tp: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(memory in bytes per stage ``[C, S]``, largest stage's, Infeasible code) per candidate, from the cost model."""
    S = bounds.shape[1] - 1
    agg = stage_aggregates(arch, bounds)
    g = dp * tp
    off = np.arange(S) * g
    sc = stage_costs(
        agg,
        float(dp),
        float(tp),
        off,
        g,
        np.arange(S),
        S,
        B,
        m,
        gpn,
        rates,
        model_consts(arch),
        schedule,
        allow_cross_node_tp,
    )
    reason = np.where(sc.reason > 0, sc.reason, 99).min(axis=-1)
    return sc.mem, sc.mem.max(axis=-1), np.where(reason == 99, 0, reason)


def estimate_profiled_plan(
    profile: Profile,
    arch: ModelArch,
    global_batch: int,
    shape: ResourceShape,
    plan: Plan,
    rates,
    allow_cross_node_tp: bool = True,
    include_control: bool = True,
) -> PlanEstimate:
    """Estimate one concrete plan from the profile (uniform meshes; the runner's execution)."""
    check_plan(arch, shape, plan)
    info = profile.model(arch.name)
    dp, tp = _uniform(plan)
    bounds = np.array([[s.layer_start for s in plan.stages] + [plan.stages[-1].layer_end]])
    schedule = plan.schedule if plan.n_stages > 1 else PipeSchedule.GPIPE
    c = compose(
        profile, info, global_batch, bounds, dp, tp, plan.micro_batches, schedule, shape.gpus_per_node, include_control
    )
    per_stage, mem, reason = _memory(
        arch,
        rates,
        bounds,
        dp,
        tp,
        plan.micro_batches,
        global_batch / plan.micro_batches,
        shape.gpus_per_node,
        schedule,
        allow_cross_node_tp,
    )
    code = Infeasible(int(reason[0]))
    return PlanEstimate(
        plan,
        float(c.total[0]),
        float(c.compute[0]),
        float(c.intra[0]),
        float(c.inter[0]),
        float(c.bubble[0]),
        float(mem[0]) / GIB,
        tuple(float(x) / GIB for x in per_stage[0]),
        code is Infeasible.OK,
        code.describe(),
    )


# ----------------------------------------------------------------------------------------------
# plan search over what the runner executes


class _Best(NamedTuple):
    time: float
    parts: tuple[float, float, float, float]
    mem: float
    reason: int
    bounds: tuple[int, ...]
    dp: int
    tp: int
    micro: int
    schedule: PipeSchedule


def _balanced(bounds: np.ndarray, load: np.ndarray, k: int) -> np.ndarray:
    if len(bounds) <= k:
        return bounds
    cum = np.concatenate([[0.0], np.cumsum(load)])
    loads = cum[bounds[:, 1:]] - cum[bounds[:, :-1]]
    order = np.lexsort(((loads**2).sum(axis=1), loads.max(axis=1)))[:k]
    return bounds[order]


def search_grid(
    profile: Profile,
    arch: ModelArch,
    batch: int,
    shape: ResourceShape,
    n_stages: int,
    rates,
    cfg: PlannerConfig,
    dp_only: bool = False,
) -> _Best | None:
    """The fastest feasible executable plan of a grid (None when the grid has no candidate; ``time = inf``
    and the most advanced failure code when no candidate is feasible)."""
    info = profile.model(arch.name)
    if n_stages > info.n_layers:
        return None
    options = grid_options(info.heads, batch, shape, n_stages, cfg, dp_only)
    all_bounds = _partitions(arch, n_stages, max(cfg.n_units, n_stages))
    if not options or len(all_bounds) == 0:
        return None
    best: _Best | None = None
    worst_reason = 0
    for dp, tp, B, schedule in options:
        bounds = all_bounds
        if len(bounds) > MAX_PARTITIONS:
            lc = _layer_costs(profile, info, batch / B / dp, dp, tp)
            bounds = _balanced(bounds, lc.fw + lc.bw, max(cfg.partitions, 1) * 4)
        _, mem, reason = _memory(
            arch, rates, bounds, dp, tp, B, batch / B, shape.gpus_per_node, schedule, cfg.allow_cross_node_tp
        )
        c = compose(profile, info, batch, bounds, dp, tp, B, schedule, shape.gpus_per_node)
        t = np.where(reason == 0, c.total, np.inf)
        i = int(np.argmin(t))
        worst_reason = max(worst_reason, int(reason.max()))
        if math.isfinite(t[i]) and (best is None or t[i] < best.time):
            best = _Best(
                float(t[i]),
                (float(c.compute[i]), float(c.intra[i]), float(c.inter[i]), float(c.bubble[i])),
                float(mem[i]),
                0,
                tuple(int(x) for x in bounds[i]),
                dp,
                tp,
                B,
                schedule,
            )
    if best is None:
        return _Best(
            math.inf,
            (0.0, 0.0, 0.0, 0.0),
            0.0,
            worst_reason or int(Infeasible.OUT_OF_MEMORY),
            (),
            0,
            0,
            0,
            PipeSchedule.GPIPE,
        )
    return best


def build_profiled_table(profile: Profile, req: TableRequest, rates, cfg: PlannerConfig) -> TypeTable:
    """The performance table of one request from the profile (same layout as :mod:`estimator.table`)."""
    R, C = len(req.shapes), len(cfg.stage_counts)
    time = np.full((R, C), np.inf)
    reason = np.zeros((R, C), dtype=np.int8)
    parts = {k: np.zeros((R, C)) for k in ("compute", "intra", "inter", "bubble", "mem_gb")}
    micro = np.zeros((R, C), dtype=np.int32)
    bounds = np.full((R, C, MAX_STAGES + 1), -1, dtype=np.int32)
    dp = np.zeros((R, C, MAX_STAGES), dtype=np.int32)
    tp = np.zeros((R, C, MAX_STAGES), dtype=np.int32)
    dp_time = np.full(R, np.inf)
    dp_mem = np.zeros(R)
    schedules: dict[tuple[int, int], PipeSchedule] = {}
    for r, shape in enumerate(req.shapes):
        for c, S in enumerate(cfg.stage_counts):
            best = search_grid(profile, req.arch, req.batch, shape, S, rates, cfg)
            if best is None:
                continue
            reason[r, c] = best.reason
            if not math.isfinite(best.time):
                continue
            time[r, c] = best.time
            for k, v in zip(("compute", "intra", "inter", "bubble"), best.parts):
                parts[k][r, c] = v
            parts["mem_gb"][r, c] = best.mem / GIB
            micro[r, c] = best.micro
            bounds[r, c, : S + 1] = best.bounds
            dp[r, c, :S], tp[r, c, :S] = best.dp, best.tp
            schedules[(r, c)] = best.schedule
        dp_best = search_grid(profile, req.arch, req.batch, shape, 1, rates, cfg, dp_only=True)
        if dp_best is not None and math.isfinite(dp_best.time):
            dp_time[r], dp_mem[r] = dp_best.time, dp_best.mem / GIB
    table = TypeTable(
        req.arch.name,
        req.batch,
        req.gpu_type,
        req.shapes,
        cfg.stage_counts,
        time,
        reason,
        parts["compute"],
        parts["intra"],
        parts["inter"],
        parts["bubble"],
        parts["mem_gb"],
        micro,
        bounds,
        dp,
        tp,
        dp_time,
        dp_mem,
    )
    return _ScheduledTable.wrap(table, schedules)


class _ScheduledTable(TypeTable):
    """A :class:`TypeTable` whose plans carry the schedule chosen per grid (the profiled search picks it)."""

    schedules: Mapping[tuple[int, int], PipeSchedule]

    @staticmethod
    def wrap(table: TypeTable, schedules: Mapping[tuple[int, int], PipeSchedule]) -> _ScheduledTable:
        out = _ScheduledTable(**{f.name: getattr(table, f.name) for f in dataclasses.fields(TypeTable) if f.init})
        object.__setattr__(out, "schedules", dict(schedules))
        return out

    def plan(self, row: int, col: int, cfg: PlannerConfig) -> Plan | None:
        """The plan of one grid with its chosen schedule (None when infeasible)."""
        if not math.isfinite(self.time[row, col]):
            return None
        S = self.stage_counts[col]
        b = self.bounds[row, col]
        stages = tuple(
            StagePlan(int(b[j]), int(b[j + 1]), int(self.dp[row, col, j]), int(self.tp[row, col, j])) for j in range(S)
        )
        return Plan(stages, int(self.micro_batches[row, col]), self.schedules.get((row, col), PipeSchedule.GPIPE))


# ----------------------------------------------------------------------------------------------
# the performance model


class ProfiledPerfModel(EstimatorPerfModel):
    """The estimator with a measured profile in place of the roofline and alpha-beta models.

    (model, device type) pairs that the profile covers are planned and estimated from the profile
    over the plans the runner executes; everything else falls back to the calibrated estimator. The
    profile's measured (re)start costs, where it has them, are what the simulator charges.
    """

    name = "profiled"

    def __init__(
        self,
        profile: Profile,
        cluster: ClusterSpec | None = None,
        config: PlannerConfig | None = None,
        source: str = "",
    ) -> None:
        super().__init__(cluster, config=config, restarts=profile.restart_table())
        self.profile = profile
        self.source = source
        get_gpu(profile.device.device_type)  # the profile must describe a catalogue type

    def _covers(self, model: ModelRef | str, gpu_type: str) -> bool:
        name = model.name if isinstance(model, ModelRef) else str(model)
        return self.profile.covers(name, canonical_gpu_name(gpu_type))

    def _build_tables(self, requests: list[TableRequest]) -> list[TypeTable]:
        out: list[TypeTable | None] = [None] * len(requests)
        rest = [i for i, r in enumerate(requests) if not self._covers(r.arch.name, r.gpu_type)]
        for i, r in enumerate(requests):
            if i not in rest:
                out[i] = build_profiled_table(
                    self.profile, r, rates_for(r.arch, r.gpu, r.links, self.params), self.config
                )
        if rest:
            for i, t in zip(rest, super()._build_tables([requests[i] for i in rest])):
                out[i] = t
        return [t for t in out if t is not None]

    def estimate(self, model: ModelRef, global_batch: int, shape: ResourceShape, plan: Plan) -> PlanEstimate:
        """Cost breakdown of a concrete plan (from the profile when it covers the model and type)."""
        if not self._covers(model, shape.gpu_type):
            return super().estimate(model, global_batch, shape, plan)
        self._check(model, global_batch, shape)
        arch = self.arch(model)
        gpu, group = self._gpu(shape.gpu_type)
        return estimate_profiled_plan(
            self.profile, arch, global_batch, shape, plan, rates_for(arch, gpu, node_links(gpu, group), self.params)
        )

    def dp_estimate(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> PlanEstimate:
        """The data-parallel-only plan's estimate (profiled: the best micro-batch count)."""
        if not self._covers(model, shape.gpu_type):
            return super().dp_estimate(model, global_batch, shape)
        self._check(model, global_batch, shape)
        arch = self.arch(model)
        best = search_grid(
            self.profile, arch, global_batch, shape, 1, self._rates(arch, shape), self.config, dp_only=True
        )
        micro = best.micro if best is not None and math.isfinite(best.time) else 1
        plan = Plan((StagePlan(0, len(arch.layers), shape.num_gpus, 1),), micro, PipeSchedule.GPIPE)
        return self.estimate(model, global_batch, shape, plan)

    def plan_grid(self, model: ModelRef, global_batch: int, grid: Grid) -> GridPlans:
        """Best plan of a grid; the Pareto set is that plan alone for profiled pairs."""
        if not self._covers(model, grid.shape.gpu_type):
            return super().plan_grid(model, global_batch, grid)
        plan = self.grid_plan(model, global_batch, grid)
        est = self.estimate(model, global_batch, grid.shape, plan) if plan is not None else None
        return GridPlans(grid, est, (est,) if est is not None else ())

    def _rates(self, arch: ModelArch, shape: ResourceShape):
        gpu, group = self._gpu(shape.gpu_type)
        return rates_for(arch, gpu, node_links(gpu, group), self.params)


def profiled_perf_model(path: str, cluster: ClusterSpec | None = None) -> ProfiledPerfModel:
    """The ``profiled:PROFILE.json`` performance model (the perf registry's factory)."""
    return ProfiledPerfModel(load_profile(path), cluster, source=str(Path(path)))
