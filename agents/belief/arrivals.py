"""What arrives in a sampled world: job attributes, the train split's job mix and an arrival rate.

A non-clairvoyant planner cannot read the trace's future. It sees arrival times up to now and
estimates a Poisson rate from them: the rate's prior is a Gamma distribution fitted (maximum
likelihood) to the rates of the training windows, and its posterior after ``k`` arrivals in an
exposure of ``T`` seconds is ``Gamma(shape + k, rate + T)``. The first arrival of an episode
only fixes its origin, so ``k`` counts the arrivals after it and ``T`` runs from it to now.
Future jobs take their attributes (model, global batch, requested GPU type and count) from the
train split's empirical mix.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from arena_gym.types import GpuType, JobId, JobSpec, JobView, ModelRef

#: Prefix of the ids of generated jobs (a counter follows; ids already taken are skipped).
SAMPLED_PREFIX = "~sampled-"


@dataclass(frozen=True, slots=True)
class JobAttributes:
    """What a scheduler knows of a job's request: model, global batch, requested GPU type and count.

    ``reference_s`` is the job's reference iteration time (seconds per iteration at its
    requested shape); None takes it from the belief's table.
    """

    model: ModelRef
    global_batch: int
    gpu_type: GpuType | None = None
    num_gpus: int | None = None
    reference_s: float | None = None

    def __post_init__(self) -> None:
        if self.global_batch < 1:
            raise ValueError(f"JobAttributes: global batch must be >= 1, got {self.global_batch}")
        if self.num_gpus is not None and self.num_gpus < 1:
            raise ValueError(f"JobAttributes: GPU count must be >= 1 or None, got {self.num_gpus}")
        if self.reference_s is not None and not (math.isfinite(self.reference_s) and self.reference_s > 0):
            raise ValueError(f"JobAttributes: reference_s must be a positive finite number, got {self.reference_s}")

    @staticmethod
    def of(job: JobAttributes | JobView | JobSpec) -> JobAttributes:
        """The attributes of a job view or spec (attributes are returned as they are)."""
        if isinstance(job, JobAttributes):
            return job
        spec = job.spec if isinstance(job, JobView) else job
        return JobAttributes(spec.model, spec.global_batch, spec.requested_gpu_type, spec.requested_gpus)

    @property
    def config(self) -> tuple[ModelRef, int, GpuType | None, int | None]:
        """(model, global batch, requested GPU type, requested GPU count)."""
        return self.model, self.global_batch, self.gpu_type, self.num_gpus


def fresh_ids(n: int, taken: Collection[str] = ()) -> tuple[JobId, ...]:
    """``n`` distinct job ids ``~sampled-0``, ``~sampled-1``, ... skipping every id in ``taken``."""
    out: list[JobId] = []
    k = 0
    while len(out) < n:
        job_id = f"{SAMPLED_PREFIX}{k}"
        if job_id not in taken:
            out.append(JobId(job_id))
        k += 1
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ArrivalModel:
    """A Poisson arrival rate with a Gamma prior, and the mix of job attributes arrivals draw from.

    ``rate_shape`` and ``rate_s`` are the prior's shape and rate (seconds: the prior mean is
    ``rate_shape / rate_s`` arrivals per second); ``windows`` is how many training windows it
    was fitted on. ``mix`` holds the attributes seen in training and ``weights`` how often.
    """

    rate_shape: float
    rate_s: float
    windows: int
    mix: tuple[JobAttributes, ...]
    weights: tuple[float, ...]
    _cdf: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_shape) and self.rate_shape > 0):
            raise ValueError(f"ArrivalModel: rate_shape must be a positive finite number, got {self.rate_shape}")
        if not (math.isfinite(self.rate_s) and self.rate_s > 0):
            raise ValueError(f"ArrivalModel: rate_s must be a positive finite number, got {self.rate_s}")
        if not self.mix or len(self.mix) != len(self.weights):
            raise ValueError(f"ArrivalModel: {len(self.mix)} mix entries for {len(self.weights)} weights (need >= 1)")
        w = np.asarray(self.weights, dtype=float)
        if not (np.isfinite(w).all() and (w > 0).all()):
            raise ValueError("ArrivalModel: mix weights must be positive finite numbers")
        cdf = np.cumsum(w) / w.sum()
        cdf.flags.writeable = False
        object.__setattr__(self, "_cdf", cdf)

    def posterior(self, now: float, arrivals: Sequence[float]) -> tuple[float, float]:
        """The Gamma posterior (shape, rate in seconds) of the arrival rate given arrival times up to ``now``.

        ValueError when an arrival time lies after ``now`` (a policy cannot have seen it).
        """
        times = np.asarray(arrivals, dtype=float)
        if times.size == 0:
            return self.rate_shape, self.rate_s
        if not np.isfinite(times).all() or times.max() > now:
            raise ValueError(f"arrival times must be finite and <= now ({now:g}); got up to {times.max():g}")
        return self.rate_shape + times.size - 1, self.rate_s + (now - float(times.min()))

    def rate(self, now: float, arrivals: Sequence[float]) -> float:
        """The posterior mean arrival rate (jobs per second) given arrival times up to ``now``."""
        shape, rate = self.posterior(now, arrivals)
        return shape / rate

    def draw_times(
        self,
        now: float,
        arrivals: Sequence[float],
        horizon_s: float,
        rng: np.random.Generator,
        max_jobs: int | None = None,
    ) -> np.ndarray:
        """Arrival times in ``(now, now + horizon_s]``: a rate drawn from the posterior, then a Poisson process.

        At most ``max_jobs`` (the earliest) when given.
        """
        if not (math.isfinite(horizon_s) and horizon_s >= 0):
            raise ValueError(f"horizon_s must be finite and >= 0, got {horizon_s}")
        shape, rate = self.posterior(now, arrivals)
        count = int(rng.poisson(rng.gamma(shape, 1.0 / rate) * horizon_s))
        times = np.sort(now + horizon_s * (1.0 - rng.random(count)))
        return times if max_jobs is None else times[: max(0, max_jobs)]

    def draw_mix(self, n: int, rng: np.random.Generator) -> tuple[JobAttributes, ...]:
        """``n`` job attributes drawn from the mix by weight."""
        picks = np.minimum(np.searchsorted(self._cdf, rng.random(n), side="right"), len(self.mix) - 1)
        return tuple(self.mix[int(i)] for i in picks)
