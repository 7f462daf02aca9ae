"""PerfModel helpers: a base model scaled per point, a deliberately noisy belief (misestimation experiments)
and the hooks trace samplers use."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

from arena_gym.protocols import PerfModel
from arena_gym.restarts import RestartCost, RestartCosts
from arena_gym.types import ClusterSpec, Grid, JobSpec, ModelRef, Plan, ResourceShape, best_locality, localities

#: Largest noise level: a factor of e^(10 x 6.8) already spans every sensible misestimate,
#: and larger ones overflow a float.
MAX_SIGMA = 10.0


class ScaledPerfModel:
    """A ``base`` model whose times are multiplied by ``_factor(model, batch, shape)``; plans and feasibility are
    the base's (infeasible stays infeasible). Subclasses set ``base`` and define ``_factor``."""

    base: PerfModel

    def _factor(self, model: ModelRef, batch: int, shape: ResourceShape) -> float:
        raise NotImplementedError

    def iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """The base estimate times the point's factor."""
        return self.base.iter_time(model, global_batch, shape) * self._factor(model, global_batch, shape)

    def grid_iter_time(self, model: ModelRef, global_batch: int, grid: Grid) -> float:
        """The base grid estimate times the shape's factor."""
        return self.base.grid_iter_time(model, global_batch, grid) * self._factor(model, global_batch, grid.shape)

    def dp_iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """The base DP-only estimate times the shape's factor."""
        return self.base.dp_iter_time(model, global_batch, shape) * self._factor(model, global_batch, shape)

    def proxy_plan(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> Plan | None:
        """The base model's plan."""
        return self.base.proxy_plan(model, global_batch, shape)


@dataclass(frozen=True)
class NoisyPerfModel(ScaledPerfModel):
    """``base`` with a fixed multiplicative log-normal error per (model, batch, shape), of std ``sigma``.

    The error for a point is a pure function of (seed, model, batch, shape), so every query
    of the same point sees the same misestimate and runs are reproducible. Feasibility is not
    changed: infeasible stays infeasible. A base's measured (re)start costs are kept; with
    ``start_sigma`` > 0 each model's process start (``start_s`` and its ``held_s`` part) on a GPU type
    carries a fixed log-normal error of that std too, a pure function of (seed, model, GPU type).
    """

    base: PerfModel
    sigma: float
    seed: int = 0
    start_sigma: float = 0.0

    def __post_init__(self) -> None:
        for what, value in (("noise sigma", self.sigma), ("start noise sigma", self.start_sigma)):
            if not 0 <= value <= MAX_SIGMA:
                raise ValueError(f"{what} must be in 0..{MAX_SIGMA:g}, got {value}")

    @property
    def name(self) -> str:
        """The base model's name with the noise levels."""
        starts = f",starts {self.start_sigma}" if self.start_sigma else ""
        return f"noisy({self.base.name},{self.sigma}{starts})"

    def restart_cost(self, model: ModelRef, gpu_type: str) -> RestartCost | None:
        """The base model's measured restart costs, if it has them, each start off by its fixed error."""
        cost = self.base.restart_cost(model, gpu_type) if isinstance(self.base, RestartCosts) else None
        if cost is None or not self.start_sigma:
            return cost
        factor = _lognormal(f"{self.seed}|start|{model.name}|{gpu_type}", self.start_sigma)
        return dataclasses.replace(cost, start_s=cost.start_s * factor, held_s=cost.held_s * factor)

    def _factor(self, model: ModelRef, batch: int, shape: ResourceShape) -> float:
        return _lognormal(f"{self.seed}|{model.name}|{batch}|{shape}", self.sigma)


def _lognormal(key: str, sigma: float) -> float:
    """``exp(sigma * z)``, ``z`` a standard normal drawn from ``key`` alone (Box-Muller from its hash)."""
    u1, u2 = struct.unpack("<II", hashlib.blake2b(key.encode(), digest_size=8).digest())
    a, b = (u1 + 0.5) / 2**32, (u2 + 0.5) / 2**32  # two uniform draws in (0, 1)
    return math.exp(sigma * math.sqrt(-2.0 * math.log(a)) * math.cos(2 * math.pi * b))


def noisy_perf_model(path: str, base: PerfModel | None, seed: int = 0) -> NoisyPerfModel:
    """``noisy:SIGMA`` spec: wrap the run's ground truth with log-normal error of std ``SIGMA``."""
    if base is None:
        raise ValueError("noisy:SIGMA is a belief model: it needs a ground-truth model to perturb")
    try:
        sigma = float(path)
    except ValueError:
        raise ValueError(f"noisy:SIGMA needs a number, got {path!r}") from None
    if not 0 <= sigma <= MAX_SIGMA:
        raise ValueError(f"noisy:SIGMA needs 0 <= SIGMA <= {MAX_SIGMA:g}, got {path!r}")
    return NoisyPerfModel(base, sigma, seed)


def trace_hooks(perf: PerfModel, cluster: ClusterSpec) -> tuple[Callable[..., bool], Callable[..., float]]:
    """Feasibility and iteration-time callables that trace samplers use (best locality on ``cluster``)."""
    capacity: dict[str, int] = {g.gpu_type: g.gpus_per_node for g in cluster.groups}

    def iter_time(model: ModelRef, batch: int, gpu_type: str, num_gpus: int) -> float:
        cap = capacity.get(gpu_type)
        if cap is None or num_gpus > cap * cluster.group(gpu_type).nodes:
            return math.inf
        return perf.iter_time(model, batch, best_locality(gpu_type, num_gpus, cap))

    def feasible(model: ModelRef, batch: int, gpu_type: str, num_gpus: int) -> bool:
        return math.isfinite(iter_time(model, batch, gpu_type, num_gpus))

    return feasible, iter_time


def unschedulable_reason(job: JobSpec, perf: PerfModel, cluster: ClusterSpec) -> str | None:
    """Why ``job`` can never run on ``cluster`` (its requested GPU type is absent, it requests more GPUs
    than the cluster has of the types it may use, or it is infeasible, out of memory, on every shape the
    cluster has), or None when some shape can run it."""
    wanted = job.requested_gpu_type
    if wanted is not None and wanted not in {g.gpu_type for g in cluster.groups}:
        return f"requests GPU type {wanted}, which cluster {cluster.name} lacks"
    groups = [g for g in cluster.groups if wanted is None or g.gpu_type == wanted]
    most = max(g.nodes * g.gpus_per_node for g in groups)
    if job.requested_gpus is not None and job.requested_gpus > most:
        kinds = "+".join(g.gpu_type for g in groups)
        return f"requests {job.requested_gpus} GPUs, more than cluster {cluster.name} has of {kinds} ({most})"
    for group in groups:
        count = 1
        while count <= group.nodes * group.gpus_per_node:
            for shape in localities(group.gpu_type, count, group.gpus_per_node):
                if math.isfinite(perf.iter_time(job.model, job.global_batch, shape)):
                    return None
            count *= 2
    kinds = "+".join(g.gpu_type for g in groups)
    return (
        f"{job.model.name} at batch {job.global_batch} is infeasible (out of memory) on every shape of "
        f"cluster {cluster.name} ({kinds}, up to {most} GPUs)"
    )


def describe_unschedulable(reasons: dict[str, str], limit: int = 5) -> str:
    """``j7: REASON; j9: REASON; and 3 more`` for a job id -> reason mapping."""
    shown = "; ".join(f"{job}: {why}" for job, why in list(reasons.items())[:limit])
    return shown + (f"; and {len(reasons) - limit} more" if len(reasons) > limit else "")
