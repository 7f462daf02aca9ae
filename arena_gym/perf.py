"""PerfModel helpers: a base model scaled per point, a deliberately noisy belief (misestimation experiments)
and the hooks trace samplers use."""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

from arena_gym.protocols import PerfModel
from arena_gym.types import ClusterSpec, Grid, ModelRef, Plan, ResourceShape, best_locality

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
    """``base`` with a fixed multiplicative log-normal error per (model, batch, shape).

    The error for a point is a pure function of (seed, model, batch, shape), so every query
    of the same point sees the same misestimate and runs are reproducible. Feasibility is not
    changed: infeasible stays infeasible.
    """

    base: PerfModel
    sigma: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.sigma <= MAX_SIGMA:
            raise ValueError(f"noise sigma must be in 0..{MAX_SIGMA:g}, got {self.sigma}")

    @property
    def name(self) -> str:
        """The base model's name with the noise level."""
        return f"noisy({self.base.name},{self.sigma})"

    def _factor(self, model: ModelRef, batch: int, shape: ResourceShape) -> float:
        key = f"{self.seed}|{model.name}|{batch}|{shape}".encode()
        u1, u2 = struct.unpack("<II", hashlib.blake2b(key, digest_size=8).digest())
        # Box-Muller from two uniform draws in (0, 1)
        a, b = (u1 + 0.5) / 2**32, (u2 + 0.5) / 2**32
        return math.exp(self.sigma * math.sqrt(-2.0 * math.log(a)) * math.cos(2 * math.pi * b))


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
