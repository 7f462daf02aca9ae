"""Calibration of one GPU type from a profile of the runner on it (``estimate calibrate --profile``).

The profile composes the step time of every plan the runner executes (``estimator.profiled``). For
the one-GPU plans a job of each profiled model runs (:func:`one_gpu_points`: at the profiled
micro-batch sizes as global batches, the proxy plans of the profiled planner and of the estimator),
this module fits the type's multipliers of the estimator's parameters
(:class:`~estimator.params.TypeParams`: the matrix rate of the models' dtypes, the memory bandwidth
and the fixed cost per kernel launch) so that the estimator's time of the *same* plan matches the
profile's. Every other parameter, and every other type, keeps its value: the result is the base
parameters with this one type's multipliers replaced, a file that ``--perf calibrated:FILE`` and
``estimate query --params FILE`` read.

The fit minimises the squared ``log(estimated / profiled)`` over the points, plus a weak pull of each
log multiplier towards its base value (:data:`PRIOR_WEIGHT`), with scipy's bounded trust-region
solver; multipliers stay within :data:`MULTIPLIER_RANGE`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from arena_gym.types import ClusterSpec, GpuType, ModelRef, NodeGroup, PipeSchedule, Plan, ResourceShape
from estimator.hardware import canonical_gpu_name
from estimator.params import EstimatorParams
from estimator.perfmodel import EstimatorPerfModel
from estimator.planner import PlannerConfig
from estimator.profile import Profile
from estimator.profiled import ProfiledPerfModel

#: Bounds of a fitted multiplier (a nominal type such as ``cpu`` can be far from its starting figures).
MULTIPLIER_RANGE = (1e-3, 1e3)
#: Weight of the pull of each log multiplier towards its base value (picks one fit where several fit alike).
PRIOR_WEIGHT = 0.01
#: Global batches used when the profile does not list its micro-batch sizes.
DEFAULT_BATCHES = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class PlanPoint:
    """One one-GPU plan of a profiled model and the step time the profile composes for it."""

    model: ModelRef
    batch: int
    shape: ResourceShape
    plan: Plan
    profiled_s: float


@dataclass(frozen=True)
class TypeCalibration:
    """The calibrated parameters of one GPU type and the estimator's errors before and after."""

    gpu_type: str
    params: EstimatorParams
    points: tuple[PlanPoint, ...]
    before_s: tuple[float, ...]  # the base estimator's time of each point
    after_s: tuple[float, ...]  # the calibrated estimator's time of each point

    @staticmethod
    def _errors(times: Sequence[float], points: Sequence[PlanPoint]) -> np.ndarray:
        return np.array([t / p.profiled_s - 1.0 for t, p in zip(times, points)])

    def errors_before(self) -> np.ndarray:
        """Relative error of the base estimator per point (estimated / profiled - 1)."""
        return self._errors(self.before_s, self.points)

    def errors_after(self) -> np.ndarray:
        """Relative error of the calibrated estimator per point."""
        return self._errors(self.after_s, self.points)


def one_gpu_points(
    profile: Profile,
    base: EstimatorParams,
    config: PlannerConfig | None = None,
    models: Sequence[str] | None = None,
) -> list[PlanPoint]:
    """The one-GPU plans a job of each profiled model runs at the profiled sizes (global batches), with the
    profile's step time: the proxy plan of the profiled planner and that of the estimator under ``base``
    (the estimator plans a fixed number of micro-batches, so a runner driven by it runs those), as GPipe (one
    stage: GPipe and 1F1B are the same loop). ``models``: a subset of the profiled models (default: all)."""
    cfg = config or PlannerConfig()
    gpu_type = GpuType(canonical_gpu_name(profile.device.device_type))
    shape = ResourceShape(gpu_type, 1, 1)
    testbed = ClusterSpec(
        profile.device.testbed, (NodeGroup(gpu_type, profile.device.nodes, profile.device.devices_per_node),)
    )
    profiled = ProfiledPerfModel(profile, testbed, config=cfg)  # plans only the shapes the profile measured
    estimator = EstimatorPerfModel(testbed, params=base, config=cfg)
    planners = (profiled, estimator)
    batches = tuple(int(b) for b in profile.settings.get("samples", DEFAULT_BATCHES))
    points = []
    names = list(models) if models is not None else list(profile.models)
    missing = [m for m in names if m not in profile.models]
    if missing:
        raise ValueError(f"models not in the profile: {', '.join(missing)}; profiled: {', '.join(profile.models)}")
    for name in names:
        model = ModelRef.parse(name)
        for batch in batches:
            found = (p.proxy_plan(model, batch, shape) for p in planners)
            plans = {replace(plan, schedule=PipeSchedule.GPIPE) for plan in found if plan is not None}
            for plan in sorted(plans, key=lambda p: p.micro_batches):
                t = profiled.estimate(model, batch, shape, plan).total_s
                if math.isfinite(t) and math.isfinite(estimator.estimate(model, batch, shape, plan).total_s):
                    points.append(PlanPoint(model, batch, shape, plan, t))
    if not points:
        raise ValueError(f"the profile of {profile.device.testbed} has no feasible one-GPU plan to calibrate against")
    return points


def _fields(points: Sequence[PlanPoint], perf: EstimatorPerfModel) -> tuple[str, ...]:
    """The multipliers the points depend on: the matrix rate of each dtype present, memory and kernels."""
    dtypes = {perf.arch(p.model).dtype for p in points}
    rates = (("compute_fp32",) if "fp32" in dtypes else ()) + (("compute",) if dtypes - {"fp32"} else ())
    return (*rates, "memory", "kernel")


def estimated_times(
    points: Sequence[PlanPoint], params: EstimatorParams, config: PlannerConfig | None = None
) -> list[float]:
    """The estimator's step time of each point's plan under ``params``."""
    perf = EstimatorPerfModel(params=params, config=config)
    return [perf.estimate(p.model, p.batch, p.shape, p.plan).total_s for p in points]


def calibrate_type(
    points: Sequence[PlanPoint],
    base: EstimatorParams,
    config: PlannerConfig | None = None,
    max_nfev: int = 60,
) -> TypeCalibration:
    """Fit the multipliers of the points' GPU type (one type) so that the estimator's times match theirs."""
    types = {p.shape.gpu_type for p in points}
    if len(types) != 1:
        raise ValueError(f"calibrate one GPU type at a time, got {', '.join(sorted(types)) or 'no points'}")
    gpu_type = canonical_gpu_name(next(iter(types)))
    fields = _fields(points, EstimatorPerfModel(params=base, config=config))
    start = base.gpu_type(gpu_type)
    target = np.log([p.profiled_s for p in points])

    def params_of(x: np.ndarray) -> EstimatorParams:
        values = {f: float(getattr(start, f) * math.exp(v)) for f, v in zip(fields, x)}
        return replace(base, gpu_types={**base.gpu_types, gpu_type: replace(start, **values)})

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.concatenate([np.log(estimated_times(points, params_of(x), config)) - target, PRIOR_WEIGHT * x])

    lo = [math.log(MULTIPLIER_RANGE[0] / getattr(start, f)) for f in fields]
    hi = [math.log(MULTIPLIER_RANGE[1] / getattr(start, f)) for f in fields]
    result = least_squares(residuals, np.zeros(len(fields)), bounds=(lo, hi), max_nfev=max_nfev)
    fitted = replace(params_of(result.x), source=f"calibrated {gpu_type} from a profile")
    return TypeCalibration(
        gpu_type,
        fitted,
        tuple(points),
        tuple(estimated_times(points, base, config)),
        tuple(estimated_times(points, fitted, config)),
    )
