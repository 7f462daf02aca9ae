"""The AP cost model: iteration time and memory per GPU of a concrete adaptive-parallelism plan.

A plan is ``S`` pipeline stages, each a contiguous layer range on its own ``(dp, tp)`` mesh of
``dp * tp`` GPUs, run with ``B`` micro-batches of ``m = batch / B`` samples. Stages occupy
consecutive GPUs of the shape (node-major), tensor-parallel ranks are the innermost mesh axis.
Per stage ``j`` and micro-batch, on one GPU (``n = m / dp`` samples):

* compute ``c_j`` (roofline): ``n * (flops / tp / R + (op_bytes / tp + rep_bytes) / M)`` plus,
  per local weight, reading it once and the GEMM tile overhead ``2 * tile_rows / R``, plus a
  fixed cost per kernel; backward is twice the forward,
  plus one more forward when the model rematerialises activations;
* intra-stage communication ``a_j``: tensor-parallel all-reduces (``tp_bytes`` per sample) and,
  for MoE layers, expert-parallel all-to-alls (``a2a_bytes``), each on the link its group really
  uses: the intra-node link when the group sits in one node, else a hierarchical algorithm
  whose inter-node phase shares each node's network among the node's concurrent groups (and
  is never faster than the GPU links that feed the network);
* gradient synchronisation ``g_j``: an all-reduce (reduce-scatter + all-gather, optimizer
  state sharded over data parallelism) of the stage's local gradients over its dp group;
* optimizer step ``u_j`` (memory-bound) and pipeline point-to-point ``r_j`` of the boundary
  activation to stage ``j + 1`` (intra-node link, or the network when stages sit on different
  nodes).

Stages compose with the artifact's GPipe formula (docs/arena.md §4.1), no overlap::

    T = (B-1) max_j F_j + sum_j F_j + (B-1) max_j Bk_j + sum_j Bk_j
        + 2 ((B-1) max_j r_j + sum_j r_j) + sum_j g_j + max_j u_j

with ``F_j = c_j^fw + a_j^fw`` and ``Bk_j = c_j^bw + a_j^bw``. It reports ``compute`` and
``intra`` (the bottleneck stage's B micro-batches, plus optimizer step and gradient sync),
``inter`` (point-to-point) and ``bubble`` (pipeline fill and drain), which add up to ``total``.

Memory per GPU: weights and gradients of the local shard (MoE experts sharded over the
expert-parallel group: ``min(dp, experts)`` ranks of the stage's data axis, times ``tp``), the
optimizer state of the model family's training recipe (``ModelFamily.optimizer_bytes`` plus an fp32
master copy for half precision: 12 bytes per parameter for GPT's AdamW, 4 for MoE's factored
Adafactor, 8 for fp32 Wide-ResNet) sharded over dp, and activations of the micro-batches in
flight (all ``B`` for GPipe, ``min(B, S - j)`` for 1F1B, so a one-stage 1F1B plan is plain
gradient accumulation). Without rematerialisation every saved activation stays. With it, the
model follows Alpa's search mode (``coarse_grained_remat``, which the artifact runs): the model
is cut into :data:`REMAT_UNITS` load-balanced pipeline layers and each is checkpointed as a
whole, so a micro-batch in flight keeps only the inputs of the stage's units, and the backward
pass of a unit recomputes, and holds at once, every activation of that unit (all of its
transformer blocks, not one block).

A plan is feasible when every stage fits in the pool XLA allocates (:func:`usable_memory_gib`:
``memory_fraction`` of the memory free once the CUDA context is up), ``dp`` does not exceed the
micro-batch size, MoE stages see at least one expert group of tokens per GPU, tensor parallelism
splits whole attention heads (``heads % tp == 0``, as Megatron-style sharding of attention
requires) and (unless allowed) stays inside a node.

Every function here is vectorised: inputs broadcast over leading axes, the last axis is the
stage axis.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from arena_gym.types import PipeSchedule, Plan, ResourceShape, is_power_of_two
from estimator.hardware import GpuSpec, NodeLinks
from estimator.params import EstimatorParams
from estimator.zoo import ModelArch

GIB = float(2**30)
MIB = float(2**20)
#: Pipeline layers Alpa's layer construction cuts a model into, each rematerialised as a whole
#: (the artifact's ``num_pipeline_layers``; docs/arena.md §3).
REMAT_UNITS = 16
#: Memory the CUDA context (driver state, cuBLAS/cuDNN handles) holds before XLA allocates its pool:
#: the artifact's planner works with 45,487 MiB free on an A40 that reports 46,068 (docs/arena.md §4.2).
CUDA_CONTEXT_MIB = 581.0
#: A scalar, or an array of them when many configurations are evaluated at once.
Num = float | np.ndarray


class Infeasible(enum.IntEnum):
    """Why a plan cannot run (0: it can). Lower codes are reported first."""

    OK = 0
    TP_CROSS_NODE = 1
    TP_HEADS = 2
    DP_EXCEEDS_MICRO_BATCH = 3
    MOE_TOKENS = 4
    OUT_OF_MEMORY = 5

    def describe(self) -> str:
        """Human-readable reason."""
        return {
            0: "feasible",
            1: "tensor parallelism spans nodes",
            2: "tensor-parallel degree does not divide the attention heads",
            3: "data-parallel degree exceeds the micro-batch size",
            4: "fewer tokens per GPU than one MoE expert group",
            5: "out of memory",
        }[int(self)]


class Rates(NamedTuple):
    """Attainable rates of one GPU type for one model kind (SI units); floats or arrays."""

    flops: Num  # FLOP/s on matrix units
    mem_bw: Num  # bytes/s of memory traffic
    intra_bw: Num  # bytes/s per GPU on the intra-node link
    intra_lat: Num  # s per message step
    inter_bw: Num  # bytes/s per node on the network
    inter_lat: Num
    kernel_s: Num  # s per kernel launch
    mem_cap: Num  # bytes per GPU in XLA's pool (usable_memory_gib)
    weight_s: Num  # s per local parameter per pass: reading it, plus the GEMM tile overhead


def usable_memory_gib(gpu: GpuSpec, memory_fraction: float) -> float:
    """GiB per GPU that a training step can use: XLA preallocates ``memory_fraction`` of the memory
    that is free when it starts (the device memory the driver reports, ``GpuSpec.reported_memory_mib``,
    less the CUDA context, :data:`CUDA_CONTEXT_MIB`); types without a reported size use the nominal one."""
    if not gpu.reported_memory_mib:
        return memory_fraction * gpu.memory_gb
    return memory_fraction * (gpu.reported_memory_mib - CUDA_CONTEXT_MIB) * MIB / GIB


def rates_for(arch: ModelArch, gpu: GpuSpec, links: NodeLinks, params: EstimatorParams) -> Rates:
    """Rates of ``gpu`` (with ``links``) for ``arch`` under ``params``."""
    kind, typ = params.kind(arch.kind), params.gpu_type(gpu.name)
    flops = (
        kind.eta_compute
        * (typ.compute_fp32 if arch.dtype == "fp32" else typ.compute)
        * gpu.matrix_tflops(arch.dtype)
        * 1e12
    )
    mem_bw = kind.eta_memory * typ.memory * gpu.mem_bw_gbs * 1e9
    return Rates(
        flops=flops,
        mem_bw=mem_bw,
        intra_bw=params.nu_intra * kind.comm * typ.comm * links.intra_gbs * 1e9,
        intra_lat=params.latency_scale * links.intra_latency_us * 1e-6,
        inter_bw=params.nu_inter * kind.comm * typ.comm * links.inter_gbs * 1e9,
        inter_lat=params.latency_scale * links.inter_latency_us * 1e-6,
        kernel_s=params.kernel_us * typ.kernel * 1e-6,
        mem_cap=usable_memory_gib(gpu, params.memory_fraction) * GIB,
        weight_s=arch.dtype_bytes / mem_bw + 2 * kind.tile_rows / flops,
    )


class ModelConsts(NamedTuple):
    """Scalars of a model the cost model needs (floats, or arrays when models are batched)."""

    wb: Num  # weight bytes per parameter
    gb: Num  # gradient bytes
    ob: Num  # optimizer-state bytes
    remat: Num  # 1.0 when activations are rematerialised
    experts: Num
    min_tokens: Num
    sample_tokens: Num
    heads: Num  # attention heads per layer (0: no attention, no constraint on tp)


def model_consts(arch: ModelArch) -> ModelConsts:
    """The :class:`ModelConsts` of an architecture."""
    wb, gb, ob = arch.state_bytes_per_param
    return ModelConsts(
        wb=float(wb),
        gb=float(gb),
        ob=float(ob),
        remat=float(arch.remat),
        experts=float(arch.experts),
        min_tokens=float(arch.min_tokens_per_gpu),
        sample_tokens=float(arch.sample_tokens),
        heads=float(arch.config.get("heads", 0)),
    )


class StageAgg(NamedTuple):
    """Per-stage sums of the layer table (arrays over the leading axes, last axis = stages)."""

    flops: np.ndarray  # forward FLOPs per sample
    op_bytes: np.ndarray  # memory traffic per sample that tensor parallelism splits
    rep_bytes: np.ndarray  # memory traffic per sample replicated on every tensor-parallel rank
    params: np.ndarray  # parameters outside MoE experts
    expert_params: np.ndarray  # parameters of MoE experts
    act_saved: np.ndarray  # activations saved for the backward pass, per sample
    act_in: np.ndarray  # inputs of the stage's rematerialisation units (what remat keeps), per sample
    max_act_saved: np.ndarray  # the largest rematerialisation unit's saved activations, per sample
    act_out: np.ndarray  # the boundary activation sent to the next stage, per sample
    tp_bytes: np.ndarray  # tensor-parallel all-reduce bytes per sample
    a2a_bytes: np.ndarray  # MoE all-to-all bytes per sample
    kernels: np.ndarray  # kernel launches per pass
    tied_params: np.ndarray  # tied embedding parameters, held once when one stage has both ends (else 0)


@lru_cache(maxsize=256)
def pipeline_units(arch: ModelArch, n_units: int = REMAT_UNITS) -> np.ndarray:
    """Layer boundaries ``[U+1]`` of at most ``n_units`` contiguous units balanced by load."""
    lay = arch.layers
    n = len(lay)
    if n <= n_units:
        return np.arange(n + 1)
    load = lay.flops / 1e14 + (lay.op_bytes + lay.rep_bytes) / 1e12 + 1e-12
    cum = np.concatenate([[0.0], np.cumsum(load)])
    bounds = [0]
    for i in range(1, n_units):
        target = cum[-1] * i / n_units
        b = int(np.argmin(np.abs(cum - target)))
        b = min(max(b, bounds[-1] + 1), n - (n_units - i))
        bounds.append(b)
    bounds.append(n)
    return np.array(bounds)


@lru_cache(maxsize=256)
def _prefix_tables(arch: ModelArch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefix sums of the layer fields (``act_in`` counted at unit starts only), the largest
    unit-segment sum of ``act_saved`` over every layer range, and the unit-start mask."""
    lay = arch.layers
    n = len(lay)
    start = np.zeros(n, dtype=bool)
    start[pipeline_units(arch)[:-1]] = True
    fields = np.stack(
        [
            lay.flops,
            lay.op_bytes,
            lay.rep_bytes,
            lay.params,
            lay.expert_params,
            lay.act_saved,
            np.where(start, lay.act_in, 0.0),
            lay.tp_bytes,
            lay.a2a_bytes,
            lay.kernels,
        ]
    )
    cum = np.concatenate([np.zeros((fields.shape[0], 1)), np.cumsum(fields, axis=1)], axis=1)
    rmax = np.zeros((n + 1, n + 1))
    for a in range(n):
        # segments of [a, b) start at a and at every unit start after it
        seg = np.cumsum(lay.act_saved[a:])
        reset = np.maximum.accumulate(np.where(start[a:] & (np.arange(n - a) > 0), np.arange(n - a), 0))
        before = np.concatenate([[0.0], seg])[reset]
        rmax[a, a + 1 :] = np.maximum.accumulate(seg - before)
    return cum, rmax, start


def stage_aggregates(arch: ModelArch, bounds: np.ndarray) -> StageAgg:
    """Stage sums for layer boundaries ``bounds[..., S+1]`` (stage j = layers [b_j, b_{j+1}))."""
    cum, rmax, start = _prefix_tables(arch)
    lo, hi = bounds[..., :-1], bounds[..., 1:]
    sums = cum[:, hi] - cum[:, lo]
    n = len(arch.layers)
    first = np.clip(lo, 0, n - 1)
    # a stage that starts inside a unit checkpoints its own input too
    act_in = sums[6] + np.where((lo < hi) & ~start[first], arch.layers.act_in[first], 0.0)
    ao = arch.layers.act_out[np.clip(hi - 1, 0, n - 1)]
    tied = np.where((lo == 0) & (hi == n), arch.tied_params, 0.0)
    return StageAgg(
        flops=sums[0],
        op_bytes=sums[1],
        rep_bytes=sums[2],
        params=sums[3],
        expert_params=sums[4],
        act_saved=sums[5],
        act_in=act_in,
        max_act_saved=rmax[lo, hi],
        act_out=ao,
        tp_bytes=sums[7],
        a2a_bytes=sums[8],
        kernels=sums[9],
        tied_params=tied,
    )


class StageCosts(NamedTuple):
    """Per-stage, per-micro-batch times (s), gradient sync and optimizer step (s), memory (bytes)."""

    c_fw: np.ndarray
    c_bw: np.ndarray
    a_fw: np.ndarray
    a_bw: np.ndarray
    sync: np.ndarray
    upd: np.ndarray
    mem: np.ndarray
    reason: np.ndarray  # Infeasible code per stage


def _all_reduce(nbytes, p, local, nodes, concurrent, r: Rates):
    """All-reduce of ``nbytes`` per rank over ``p = local * nodes`` ranks: a ring inside a node;
    across nodes the faster of a hierarchical algorithm (intra-node reduce-scatter, inter-node
    all-reduce, intra-node all-gather) and a flat ring, ``concurrent`` groups sharing each NIC."""
    intra = np.where(local > 1, 2 * (local - 1) / local * nbytes / r.intra_bw + 2 * (local - 1) * r.intra_lat, 0.0)
    network = np.minimum(r.inter_bw, concurrent * r.intra_bw)  # the NIC is fed through the GPUs' links
    inter = 2 * (nodes - 1) / nodes * nbytes * concurrent / network + 2 * (nodes - 1) * r.inter_lat
    flat = 2 * (p - 1) / p * nbytes * concurrent / network + 2 * (p - 1) * r.inter_lat
    return np.where(p > 1, np.where(nodes > 1, np.minimum(intra + inter, flat), intra), 0.0)


def _all_to_all(nbytes, p, local, node_gpus, r: Rates):
    """All-to-all of ``nbytes`` per rank over ``p`` ranks, ``local`` of them per node."""
    intra = (local - 1) / p * nbytes / r.intra_bw + (local - 1) * r.intra_lat
    network = np.minimum(r.inter_bw, node_gpus * r.intra_bw)
    inter = np.where(p > local, (p - local) / p * nbytes * node_gpus / network + (p / local - 1) * r.inter_lat, 0.0)
    return np.where(p > 1, intra + inter, 0.0)


def stage_costs(
    agg: StageAgg,
    dp,
    tp,
    off,
    g,
    stage_idx,
    n_stages,
    B,
    m,
    gpn,
    rates: Rates,
    mc: ModelConsts,
    schedule: PipeSchedule = PipeSchedule.GPIPE,
    allow_cross_node_tp: bool = True,
) -> StageCosts:
    """Per-stage costs (see the module docstring); all arguments broadcast, last axis = stages."""
    dp = np.asarray(dp, dtype=np.float64)
    tp = np.asarray(tp, dtype=np.float64)
    n = m / dp
    k_stage = (off + g - 1) // gpn - off // gpn + 1
    l_stage = g / k_stage
    l_tp = np.minimum(tp, l_stage)
    l_dp = np.maximum(l_stage / tp, 1.0)
    ep = np.where(mc.experts > 0, np.minimum(dp, np.maximum(mc.experts, 1.0)), 1.0)
    reps = dp / ep  # replicas of each expert

    per_sample = agg.flops / tp / rates.flops + (agg.op_bytes / tp + agg.rep_bytes) / rates.mem_bw
    wloc = (agg.params - agg.tied_params) / tp
    xloc = agg.expert_params / (tp * ep)
    weights = (wloc + xloc) * rates.weight_s
    fwd = n * per_sample + weights + agg.kernels * rates.kernel_s
    c_fw = fwd
    c_bw = (2.0 + mc.remat) * fwd

    tp_comm = _all_reduce(n * agg.tp_bytes, tp, l_tp, tp / l_tp, l_stage / l_tp, rates)
    l_ep = np.minimum(ep, l_dp)
    a2a = np.where(agg.a2a_bytes > 0, _all_to_all(n * agg.a2a_bytes, ep, l_ep, l_stage, rates), 0.0)
    a_fw = tp_comm + a2a
    a_bw = a_fw * (1.0 + mc.remat)

    conc = np.minimum(tp, l_stage)
    sync = _all_reduce(wloc * mc.gb, dp, l_dp, dp / l_dp, conc, rates)
    l_rep = np.maximum(l_dp / ep, 1.0)
    sync = sync + np.where(
        agg.expert_params > 0,
        _all_reduce(xloc * mc.gb, reps, np.minimum(l_rep, reps), reps / np.minimum(l_rep, reps), conc, rates),
        0.0,
    )
    shard = wloc / dp + xloc / reps
    upd = shard * (2 * mc.ob + mc.wb + mc.gb) / rates.mem_bw

    if schedule is PipeSchedule.ONE_F_ONE_B:
        inflight = np.minimum(B, n_stages - stage_idx)
    else:  # GPipe runs every forward before any backward: all micro-batches stay in flight
        inflight = B
    acts = np.where(
        mc.remat > 0, inflight * n * agg.act_in + n * agg.max_act_saved / tp, inflight * n * agg.act_saved / tp
    )
    mem = (wloc + xloc) * (mc.wb + mc.gb) + wloc * mc.ob / dp + xloc * mc.ob / reps + acts

    reason = np.where(mem > rates.mem_cap, int(Infeasible.OUT_OF_MEMORY), 0)
    reason = np.where(
        (agg.expert_params > 0) & (n * mc.sample_tokens < mc.min_tokens - 1e-9), int(Infeasible.MOE_TOKENS), reason
    )
    reason = np.where(n < 1.0 - 1e-9, int(Infeasible.DP_EXCEEDS_MICRO_BATCH), reason)
    reason = np.where((mc.heads > 0) & (np.mod(mc.heads, tp) != 0), int(Infeasible.TP_HEADS), reason)
    if not allow_cross_node_tp:
        reason = np.where(tp > l_stage, int(Infeasible.TP_CROSS_NODE), reason)
    shape = np.broadcast_shapes(np.shape(c_fw), np.shape(mem), np.shape(a_fw), np.shape(sync), np.shape(reason))
    return StageCosts(
        c_fw=np.broadcast_to(c_fw, shape),
        c_bw=np.broadcast_to(c_bw, shape),
        a_fw=np.broadcast_to(a_fw, shape),
        a_bw=np.broadcast_to(a_bw, shape),
        sync=np.broadcast_to(sync, shape),
        upd=np.broadcast_to(upd, shape),
        mem=np.broadcast_to(mem, shape),
        reason=np.broadcast_to(reason, shape),
    )


def p2p_times(agg: StageAgg, off, g, valid, m, gpn, rates: Rates) -> np.ndarray:
    """Point-to-point time of each stage's boundary activation to the next stage (0 for the last)."""
    off = np.asarray(off)
    g = np.asarray(g)
    nbytes = m * agg.act_out
    nxt_off, nxt_g = np.roll(off, -1, axis=-1), np.roll(g, -1, axis=-1)
    has_next = np.roll(valid, -1, axis=-1) & valid
    has_next[..., -1] = False
    same_node = (off // gpn == (nxt_off + nxt_g - 1) // gpn) & ((off + g - 1) // gpn == off // gpn)
    k_here = (off + g - 1) // gpn - off // gpn + 1
    k_next = (nxt_off + nxt_g - 1) // gpn - nxt_off // gpn + 1
    intra = nbytes / np.minimum(g, nxt_g) / rates.intra_bw + rates.intra_lat
    streams = np.minimum(g, gpn)  # GPUs per node sending the boundary
    network = np.minimum(rates.inter_bw, streams * rates.intra_bw)
    inter = nbytes / np.minimum(k_here, k_next) / network + rates.inter_lat
    return np.where(has_next, np.where(same_node, intra, inter), 0.0)


class PlanTimes(NamedTuple):
    """Composed plan figures (arrays over the leading axes)."""

    total: np.ndarray
    compute: np.ndarray
    intra: np.ndarray
    inter: np.ndarray
    bubble: np.ndarray
    mem: np.ndarray
    reason: np.ndarray


def compose(sc: StageCosts, r: np.ndarray, valid: np.ndarray, B) -> PlanTimes:
    """GPipe composition of stage costs over the last axis (module docstring)."""
    ff = np.where(valid, sc.c_fw + sc.a_fw, 0.0)
    fb = np.where(valid, sc.c_bw + sc.a_bw, 0.0)
    B = np.asarray(B, dtype=np.float64)
    jf = np.argmax(ff, axis=-1)[..., None]
    jb = np.argmax(fb, axis=-1)[..., None]
    ff_max, fb_max = ff.max(axis=-1), fb.max(axis=-1)
    c_fw_b = np.take_along_axis(sc.c_fw, jf, axis=-1)[..., 0]
    c_bw_b = np.take_along_axis(sc.c_bw, jb, axis=-1)[..., 0]
    upd = np.where(valid, sc.upd, 0.0).max(axis=-1)
    compute = B * (c_fw_b + c_bw_b) + upd
    intra = B * (ff_max - c_fw_b + fb_max - c_bw_b) + np.where(valid, sc.sync, 0.0).sum(axis=-1)
    inter = 2 * ((B - 1) * r.max(axis=-1) + r.sum(axis=-1))
    bubble = (ff.sum(axis=-1) - ff_max) + (fb.sum(axis=-1) - fb_max)
    total = compute + intra + inter + bubble
    mem = np.where(valid, sc.mem, 0.0).max(axis=-1)
    codes = np.where(valid & (sc.reason > 0), sc.reason, 99)
    reason = codes.min(axis=-1)
    reason = np.where(reason == 99, 0, reason)
    return PlanTimes(total=total, compute=compute, intra=intra, inter=inter, bubble=bubble, mem=mem, reason=reason)


# ----------------------------------------------------------------------------------------------
# one concrete plan


@dataclass(frozen=True, slots=True)
class PlanEstimate:
    """Estimate of one plan: seconds per iteration split four ways, memory per GPU, feasibility."""

    plan: Plan
    total_s: float
    compute_s: float
    intra_stage_comm_s: float
    inter_stage_comm_s: float
    bubble_s: float
    memory_per_gpu_gb: float  # the most loaded GPU, GiB
    stage_memory_gb: tuple[float, ...]
    feasible: bool
    reason: str  # "feasible" or why not

    @property
    def iter_time_s(self) -> float:
        """``total_s`` when feasible, else infinity."""
        return self.total_s if self.feasible else float("inf")


def valid_meshes(num_gpus: int) -> list[tuple[int, int]]:
    """(dp, tp) pairs of powers of two whose product is ``num_gpus``."""
    out, tp = [], 1
    while tp <= num_gpus:
        out.append((num_gpus // tp, tp))
        tp *= 2
    return out


def check_plan(arch: ModelArch, shape: ResourceShape, plan: Plan) -> None:
    """ValueError (one line, naming the valid choices) when ``plan`` does not fit ``shape``/``arch``."""
    n_layers = len(arch.layers)
    if not plan.stages:
        raise ValueError("plan has no stages")
    if plan.micro_batches < 1:
        raise ValueError(f"plan {plan.describe()}: micro-batches must be >= 1")
    for i, st in enumerate(plan.stages):
        if not (is_power_of_two(st.dp) and is_power_of_two(st.tp)):
            raise ValueError(
                f"plan {plan.describe()}: stage {i} mesh dp{st.dp}tp{st.tp} is invalid; "
                "valid degrees are powers of two: 1, 2, 4, 8, ..."
            )
    if plan.num_gpus != shape.num_gpus:
        per_stage = shape.num_gpus // plan.n_stages if shape.num_gpus % plan.n_stages == 0 else 0
        choices = ", ".join(f"dp{d}tp{t}" for d, t in valid_meshes(per_stage)) if per_stage else "none"
        raise ValueError(
            f"plan {plan.describe()} uses {plan.num_gpus} GPUs but shape {shape} has {shape.num_gpus}; "
            f"valid symmetric meshes per stage for {plan.n_stages} stages: {choices}"
        )
    prev = 0
    for i, st in enumerate(plan.stages):
        if st.layer_start != prev or st.layer_end <= st.layer_start:
            raise ValueError(
                f"plan {plan.describe()}: stage {i} layers [{st.layer_start}, {st.layer_end}) do not "
                f"continue from layer {prev}; stages must tile layers 0..{n_layers} of {arch.name}"
            )
        prev = st.layer_end
    if prev != n_layers:
        raise ValueError(
            f"plan {plan.describe()}: stages end at layer {prev}, but {arch.name} has {n_layers} layers "
            f"(valid layer indices 0..{n_layers})"
        )


def estimate_plan(
    arch: ModelArch, global_batch: int, shape: ResourceShape, plan: Plan, rates: Rates, allow_cross_node_tp: bool = True
) -> PlanEstimate:
    """Estimate one concrete plan on ``shape`` (validated with :func:`check_plan`)."""
    check_plan(arch, shape, plan)
    bounds = np.array([s.layer_start for s in plan.stages] + [plan.stages[-1].layer_end])
    agg = stage_aggregates(arch, bounds)
    dp = np.array([s.dp for s in plan.stages], dtype=np.float64)
    tp = np.array([s.tp for s in plan.stages], dtype=np.float64)
    g = (dp * tp).astype(np.int64)
    off = np.concatenate([[0], np.cumsum(g)[:-1]])
    S = plan.n_stages
    valid = np.ones(S, dtype=bool)
    m = global_batch / plan.micro_batches
    sc = stage_costs(
        agg,
        dp,
        tp,
        off,
        g,
        np.arange(S),
        S,
        plan.micro_batches,
        m,
        shape.gpus_per_node,
        rates,
        model_consts(arch),
        plan.schedule,
        allow_cross_node_tp,
    )
    r = p2p_times(agg, off, g, valid, m, shape.gpus_per_node, rates)
    pt = compose(sc, r, valid, plan.micro_batches)
    code = Infeasible(int(pt.reason))
    return PlanEstimate(
        plan,
        float(pt.total),
        float(pt.compute),
        float(pt.intra),
        float(pt.inter),
        float(pt.bubble),
        float(pt.mem) / GIB,
        tuple(float(x) / GIB for x in sc.mem),
        code is Infeasible.OK,
        code.describe(),
    )
