"""The memory need of one data-parallel replica, as an SP-aware scheduler believes it.

Baselines that only know data parallelism decide feasibility from a profiled per-GPU memory need
and the artifact's rule ``need * 1.2 <= 0.8 * GPU memory``. The artifact's profile
(``dp_memory_gb.csv``) is 1.4-1.6x the cost model's own memory count for GPT and Wide-ResNet:
it was taken under other settings than Alpa's searched runs (it calls MoE-690M at batch 512 out
of memory on one GPU, which the measured table ran on one V100). So the DP view models that
profile separately. The need of a replica on ``n`` GPUs is, in GiB (Alpa's unit)::

    need = 3 * dtype_bytes * P        weights, gradients and the gradient-accumulation buffer
         + s * P / n                  optimizer state, sharded over the replicas
         + f * A(batch / B / n)       activations of one micro-batch (B micro-batches)

``P`` counts every parameter (pure data parallelism replicates the experts too). ``A`` is the
cost model's activation count: layer inputs plus the largest layer when the model
rematerialises, every saved activation otherwise. ``s`` and ``f`` are per model kind.
Without calibration they are the optimizer's bytes and 1. ``fit_dp_memory`` fits them to a
profiled table by non-negative least squares (``arena-gym estimate calibrate --dp-memory``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from arena_gym.types import ModelRef
from estimator.costmodel import GIB
from estimator.params import DpMemoryParams, EstimatorParams
from estimator.zoo import ModelArch, get_model

log = logging.getLogger(__name__)

#: Copies of the weights held by every replica: weights, gradients, gradient-accumulation buffer.
REPLICATED_COPIES = 3
#: The artifact's DP memory rule: infeasible when ``need * 1.2 > 0.8 * GPU memory``.
DP_RULE_NEED_FACTOR = 1.2
DP_RULE_MEMORY_FRACTION = 0.8


def dp_rule_fits(need_gb, gpu_memory_gb):
    """The artifact's DP memory rule (scalars or arrays): ``need * 1.2 <= 0.8 * memory``."""
    return np.asarray(need_gb) * DP_RULE_NEED_FACTOR <= DP_RULE_MEMORY_FRACTION * np.asarray(gpu_memory_gb)


def activation_bytes_per_sample(arch: ModelArch) -> float:
    """Activation memory of one sample through the whole model (the cost model's count)."""
    lay = arch.layers
    if arch.remat:
        return float(lay.act_in.sum() + lay.act_saved.max())
    return float(lay.act_saved.sum())


def _terms(arch: ModelArch, batch: int, num_gpus, micro_batches: int) -> tuple[float, np.ndarray, np.ndarray]:
    """(replicated bytes, parameters per replica share, activation bytes of one micro-batch per GPU)."""
    n = np.asarray(num_gpus, dtype=np.float64)
    params = arch.param_count
    per_gpu_samples = batch / max(1, min(micro_batches, batch)) / n
    return (
        REPLICATED_COPIES * arch.dtype_bytes * params,
        params / n,
        activation_bytes_per_sample(arch) * per_gpu_samples,
    )


def coefficients(arch: ModelArch, params: EstimatorParams) -> DpMemoryParams:
    """The calibrated coefficients of the model's kind, else the physical defaults."""
    fitted = params.dp_memory.get(arch.kind)
    return fitted if fitted is not None else DpMemoryParams(float(arch.state_bytes_per_param[2]), 1.0)


def dp_need_gib(arch: ModelArch, batch: int, num_gpus, params: EstimatorParams, micro_batches: int = 16):
    """Per-GPU memory need (GiB) of data parallelism over ``num_gpus`` (scalar or array)."""
    c = coefficients(arch, params)
    rep, shard, act = _terms(arch, batch, num_gpus, micro_batches)
    return (rep + c.sharded_bytes * shard + c.act_factor * act) / GIB


def fit_dp_memory(
    need_gib: Mapping[tuple[str, str, int, int], float],
    models: Mapping[str, ModelArch] | None = None,
    micro_batches: int = 16,
) -> dict[str, DpMemoryParams]:
    """Per-kind coefficients fitted to the finite rows of a profiled DP-memory table
    (``DpMemoryTable.need_gb``: (family, size, batch, GPUs) -> GiB, inf where out of memory)."""
    from scipy.optimize import nnls

    rows: dict[str, tuple[list[list[float]], list[float]]] = {}
    for (family, size, batch, n), need in sorted(need_gib.items()):
        if not np.isfinite(need):
            continue
        arch = get_model(ModelRef(family, size), models)
        rep, shard, act = _terms(arch, batch, n, micro_batches)
        x, y = rows.setdefault(arch.kind, ([], []))
        x.append([float(shard), float(act)])
        y.append(need * GIB - rep)
    fitted = {}
    for kind, (x, y) in rows.items():
        a, b = np.array(x), np.array(y)
        coef, _ = nnls(a / GIB, b / GIB)
        rmse = float(np.sqrt(np.mean((a @ coef - b) ** 2)) / GIB)
        log.info(
            "DP memory of %s: %.2f B/parameter sharded, activations x%.2f, rmse %.2f GiB over %d rows",
            kind,
            coef[0],
            coef[1],
            rmse,
            len(b),
        )
        if coef[1] <= 0:
            raise ValueError(f"DP memory table: the {kind} rows leave no activation memory to fit")
        fitted[kind] = DpMemoryParams(float(coef[0]), float(coef[1]))
    return fitted


@dataclass(frozen=True)
class DpMemoryValidation:
    """How a DP memory model matches a profiled table."""

    mape: float  # percent, over the profiled (finite) rows
    rows: int
    agree: int  # (row, GPU memory) points where the rule decides alike on both needs
    points: int


def validate_dp_memory(
    need_gib: Mapping[tuple[str, str, int, int], float],
    params: EstimatorParams,
    gpu_memory_gb: Iterable[float],
    models: Mapping[str, ModelArch] | None = None,
    micro_batches: int = 16,
) -> DpMemoryValidation:
    """Predict every row of a profiled table (``DpMemoryTable.need_gb``) and compare."""
    memories = np.array(list(gpu_memory_gb), dtype=np.float64)
    errors, agree, points = [], 0, 0
    for (family, size, batch, n), measured in sorted(need_gib.items()):
        need = float(dp_need_gib(get_model(ModelRef(family, size), models), batch, n, params, micro_batches))
        if math.isfinite(measured):
            errors.append(abs(need - measured) / measured)
        agree += int(np.sum(dp_rule_fits(measured, memories) == dp_rule_fits(need, memories)))
        points += len(memories)
    return DpMemoryValidation(100 * float(np.mean(errors)) if errors else math.nan, len(errors), agree, points)
