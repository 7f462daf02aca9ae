"""Calibration of the estimator's efficiency parameters against measured iteration times, and
validation (mean absolute percentage error) of its predictions.

The measured format is the artifact's (``measured_iter_time.csv``): AP-optimal iteration times
per (model, batch, GPU type, nodes x GPUs per node), ``oom`` = 1 for infeasible points. The
prediction of a point is the estimator's proxy-plan time on that shape (best plan over stage
counts), exactly what :meth:`EstimatorPerfModel.iter_time` returns.

Fitting minimises a robust (soft-L1) least-squares objective on ``log(predicted / measured)``
over the feasible measured points, with scipy's trust-region reflective solver. Per-GPU-type
multipliers are pulled towards 1 by a small penalty, so the global and per-kind parameters
describe an average GPU and a type without measurements is predicted from its specs alone.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from arena_gym.types import GpuType, ModelRef, ResourceShape
from estimator.costmodel import Rates, rates_for
from estimator.hardware import canonical_gpu_name, get_gpu, node_links
from estimator.measured import MeasuredTable
from estimator.params import EstimatorParams, KindParams, kinds
from estimator.planner import PlanGroup, PlannerConfig, PreparedGroups
from estimator.zoo import ModelArch, get_model

log = logging.getLogger(__name__)

#: A type multiplier's penalty weight (per unit of log multiplier) in the fit.
TYPE_PRIOR_WEIGHT = 0.3
#: Scale of the robust loss: residuals beyond it count roughly linearly (as in MAPE).
F_SCALE = 0.02
#: Residual charged when a measured-feasible point is predicted infeasible.
INFEASIBLE_PENALTY = 1.0


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured row."""

    model: ModelRef
    batch: int
    gpu_type: str  # as written in the file
    n_nodes: int
    gpus_per_node: int
    iter_time_s: float  # math.inf when measured OOM

    @property
    def shape(self) -> ResourceShape:
        """The measured resource shape."""
        return ResourceShape(GpuType(self.gpu_type), self.n_nodes, self.gpus_per_node)

    @property
    def oom(self) -> bool:
        """Whether the measurement ran out of memory (no finite iteration time)."""
        return not math.isfinite(self.iter_time_s)


def load_points(path: str) -> list[MeasuredPoint]:
    """Rows of a measured-iteration-time CSV (validated by :class:`MeasuredTable`)."""
    table = MeasuredTable.load(path)
    return [MeasuredPoint(ModelRef(f, s), b, t, n, g, v) for (f, s, b, t, n, g), v in sorted(table.times.items())]


class Problem:
    """Measured points with their planning candidates prepared once (rate-independent)."""

    def __init__(
        self,
        points: Sequence[MeasuredPoint],
        cfg: PlannerConfig | None = None,
        models: Mapping[str, ModelArch] | None = None,
    ) -> None:
        self.points = tuple(points)
        self.cfg = cfg or PlannerConfig()
        keys: dict[tuple[str, int, str], list[ResourceShape]] = {}
        for p in self.points:
            get_model(p.model, models)
            canonical_gpu_name(p.gpu_type)
            shapes = keys.setdefault((p.model.name, p.batch, p.gpu_type), [])
            if p.shape not in shapes:
                shapes.append(p.shape)
        self.group_keys = list(keys)
        self.groups = [
            PlanGroup(get_model(m, models), b, get_gpu(t), tuple(keys[(m, b, t)])) for m, b, t in self.group_keys
        ]
        self.links = [node_links(g.gpu) for g in self.groups]
        index = {k: i for i, k in enumerate(self.group_keys)}
        self.point_group = np.array([index[(p.model.name, p.batch, p.gpu_type)] for p in self.points])
        self.point_shape = np.array(
            [self.groups[g].shapes.index(p.shape) for g, p in zip(self.point_group, self.points)]
        )
        self.prepared = PreparedGroups(self.groups, self.cfg)
        self.measured = np.array([p.iter_time_s for p in self.points])

    def rates(self, params: EstimatorParams) -> list[Rates]:
        """Rates of every group under ``params``."""
        return [rates_for(g.arch, g.gpu, links, params) for g, links in zip(self.groups, self.links)]

    def predict(self, params: EstimatorParams) -> np.ndarray:
        """Predicted proxy-plan time of every point (inf where the estimator finds no feasible plan)."""
        best = np.full((len(self.groups), max(len(g.shapes) for g in self.groups)), np.inf)
        for res in self.prepared.solve(self.rates(params)).values():
            np.minimum.at(best, (res.group, res.shape), res.times.total)
        return best[self.point_group, self.point_shape]


# ----------------------------------------------------------------------------------------------
# parameter vector


TYPE_FIELDS = ("compute", "compute_fp32", "memory", "comm")


@dataclass(frozen=True)
class _Layout:
    """Which parameters are fitted, and their order in the log-space vector."""

    kinds: tuple[str, ...]
    types: tuple[str, ...]
    type_fields: tuple[str, ...]

    @property
    def n_type(self) -> int:
        return len(self.types) * len(self.type_fields)

    @property
    def size(self) -> int:
        return 4 * len(self.kinds) + 4 + self.n_type

    def pack(self, p: EstimatorParams) -> np.ndarray:
        x = [
            v
            for k in self.kinds
            for v in (p.kind(k).eta_compute, p.kind(k).eta_memory, p.kind(k).tile_rows, p.kind(k).comm)
        ]
        x += [p.nu_intra, p.nu_inter, p.latency_scale, max(p.kernel_us, 1e-2)]
        x += [getattr(p.gpu_type(t), f) for t in self.types for f in self.type_fields]
        return np.log(np.array(x))

    def unpack(self, x: np.ndarray, base: EstimatorParams) -> EstimatorParams:
        v = np.exp(x)
        kinds = dict(base.kinds)
        for i, k in enumerate(self.kinds):
            kinds[k] = KindParams(*(float(a) for a in v[4 * i : 4 * i + 4]))
        o = 4 * len(self.kinds)
        types = dict(base.gpu_types)
        nf = len(self.type_fields)
        for i, t in enumerate(self.types):
            values = {f: float(v[o + 4 + nf * i + j]) for j, f in enumerate(self.type_fields)}
            types[t] = replace(base.gpu_type(t), **values)
        return replace(
            base,
            kinds=kinds,
            nu_intra=float(v[o]),
            nu_inter=float(v[o + 1]),
            latency_scale=float(v[o + 2]),
            kernel_us=float(v[o + 3]),
            gpu_types=types,
        )

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = [math.log(0.02), math.log(0.02), math.log(1.0), math.log(0.1)] * len(self.kinds)
        hi = [0.0, 0.0, math.log(1e4), math.log(10.0)] * len(self.kinds)
        lo += [math.log(0.02)] * 2 + [math.log(0.1), math.log(0.01)]
        hi += [0.0] * 2 + [math.log(20.0), math.log(100.0)]
        lo += [math.log(0.5)] * self.n_type
        hi += [math.log(2.0)] * self.n_type
        return np.array(lo), np.array(hi)


def fit(
    problem: Problem,
    base: EstimatorParams | None = None,
    fit_types: Sequence[str] | None = None,
    type_fields: Sequence[str] = TYPE_FIELDS,
    max_nfev: int = 30,
) -> EstimatorParams:
    """Fit kind, global and per-type parameters to the feasible measured points of ``problem``."""
    base = base or EstimatorParams()
    present = sorted({canonical_gpu_name(p.gpu_type) for p in problem.points})
    types = tuple(fit_types if fit_types is not None else present)
    fit_kinds = tuple(k for k in kinds() if any(g.arch.kind == k for g in problem.groups))
    layout = _Layout(fit_kinds, types, tuple(type_fields))
    target = problem.measured
    use = np.isfinite(target)
    n_prior = layout.n_type

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = problem.predict(layout.unpack(x, base))[use]
        r = np.where(np.isfinite(pred), np.where(np.isfinite(pred), pred, 1.0) / target[use] - 1.0, INFEASIBLE_PENALTY)
        prior = TYPE_PRIOR_WEIGHT * x[layout.size - n_prior :] if n_prior else np.zeros(0)
        return np.concatenate([r, prior])

    x0 = np.clip(layout.pack(base), *layout.bounds())
    result = least_squares(
        residuals,
        x0,
        bounds=layout.bounds(),
        loss="soft_l1",
        f_scale=F_SCALE,
        max_nfev=max_nfev,
        diff_step=1e-3,
        ftol=1e-6,
        xtol=1e-6,
    )
    log.info("calibration: %d evaluations, cost %.4f, %s", result.nfev, result.cost, result.message)
    return replace(layout.unpack(result.x, base), source="fitted")


# ----------------------------------------------------------------------------------------------
# validation


@dataclass(frozen=True)
class Validation:
    """Predictions for measured points and their errors."""

    frame: pd.DataFrame  # one row per point: input columns + predicted_iter_time_s, predicted_oom, ape

    def mape(self, by: str | None = None) -> pd.Series | float:
        """Mean absolute percentage error over points feasible in both, overall or grouped by a column."""
        ok = self.frame[self.frame["ape"].notna()]
        if by is None:
            return float(ok["ape"].mean() * 100)
        return ok.groupby(by)["ape"].mean() * 100

    def median_ape(self) -> float:
        """Median absolute percentage error."""
        return float(self.frame["ape"].dropna().median() * 100)

    def oom_agreement(self) -> tuple[int, int]:
        """(points where measured and predicted feasibility agree, points)."""
        f = self.frame
        return int((f["oom"].astype(int) == f["predicted_oom"]).sum()), len(f)


def validate(problem: Problem, params: EstimatorParams) -> Validation:
    """Predict every point of ``problem`` and tabulate the errors."""
    pred = problem.predict(params)
    rows = []
    for p, t in zip(problem.points, pred):
        feasible = math.isfinite(t)
        ape = abs(t - p.iter_time_s) / p.iter_time_s if feasible and not p.oom else math.nan
        rows.append(
            {
                "family": p.model.family,
                "size": p.model.size,
                "global_batch": p.batch,
                "gpu_type": p.gpu_type,
                "num_nodes": p.n_nodes,
                "gpus_per_node": p.gpus_per_node,
                "num_gpus": p.n_nodes * p.gpus_per_node,
                "iter_time_s": p.iter_time_s if not p.oom else math.nan,
                "oom": int(p.oom),
                "predicted_iter_time_s": t if feasible else math.nan,
                "predicted_oom": int(not feasible),
                "ape": ape,
            }
        )
    return Validation(pd.DataFrame(rows))
