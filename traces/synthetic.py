"""Seeded synthetic workloads: the built-in default trace.

Job fields follow the Arena artifact's recipe (:mod:`traces.recipe`, mix ``philly`` by
default). Arrivals:

- ``poisson``: exponential inter-arrival times with mean ``3600 / rate_per_h`` seconds;
- ``bursty``: a two-state Markov-modulated Poisson process. The process alternates between
  a calm and a burst state with exponentially distributed sojourns (mean ``mean_burst_s`` in
  a burst, ``mean_burst_s x (1 - burst_fraction) / burst_fraction`` when calm, so a fraction
  ``burst_fraction`` of the time is spent bursting). In a burst jobs arrive at
  ``burst_factor x rate_per_h``; the calm rate is set so that the long-run mean stays
  ``rate_per_h`` (needs ``burst_factor x burst_fraction < 1``). The defaults (8x bursts 10%
  of the time, 30 min on average) give inter-arrival gaps with a coefficient of variation
  near 2.5 (Poisson: 1; the Philly trace: 3.2).

Iterations are log-normal, fitted to the Arena Philly trace (``arena/traces/philly.csv``,
``num_iteration / 5`` rounded up, 1,938 jobs): median 12,356 (geometric mean 9,562), mean
24,291, range 119 .. 610,746; maximum-likelihood fit of log(iterations):
mu = 9.166, sigma = 1.454 (computed with numpy from that file). Draws are clipped to
``[iter_min, iter_max]``.

The first job arrives at t = 0. One seed drives everything, through independent child
streams for arrivals, job fields and iterations (so changing the arrival process leaves the
job mix unchanged).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arena_gym.fields import Problems
from arena_gym.types import DeadlineSource, GpuType, JobId, JobSpec
from traces.options import coerce_options, format_value
from traces.recipe import (
    MAX_TRIES,
    MIXES,
    FeasibleFn,
    IterTimeFn,
    cached_iter_time,
    child_rngs,
    get_mix,
    nominal_iter_time,
    sample_fields,
)
from traces.table import MAX_EXACT_INT
from traces.trace import Trace

log = logging.getLogger(__name__)

#: Log-normal fit of the Philly trace's iterations (see the module docstring).
PHILLY_ITER_LOG_MEAN = 9.166
PHILLY_ITER_LOG_SIGMA = 1.454
#: Arrival processes (see the module docstring).
Arrival = typing.Literal["poisson", "bursty"]
#: Largest trace the generator makes (1M jobs take seconds; 10M would take minutes and GBs).
MAX_JOBS = 1_000_000
#: Arrival rates it accepts (jobs per hour).
RATE_RANGE = (1e-6, 1e9)
#: Most calm/burst cycles a bursty trace may need on average (beyond that it would crawl).
MAX_BURST_CYCLES = 1_000_000


@dataclass(frozen=True)
class SyntheticConfig:
    """Settings of the synthetic generator (see the module docstring for the processes).

    ``gpu_types`` restricts the requested types to a cluster's (e.g. ``("a40", "a10")``);
    ``max_gpus`` caps the requested count; ``deadline_factor`` (None = no deadlines) sets
    deadline = submit + factor x iterations x iter_time of the request, a DERIVED deadline
    (:class:`arena_gym.types.DeadlineSource`).
    """

    n_jobs: int = 200
    arrival: Arrival = "poisson"
    rate_per_h: float = 4.1  # the Philly trace's average
    seed: int = 0
    mix: str = "philly"
    gpu_types: tuple[str, ...] | None = None
    max_gpus: int | None = None
    iter_log_mean: float = PHILLY_ITER_LOG_MEAN
    iter_log_sigma: float = PHILLY_ITER_LOG_SIGMA
    iter_min: int = 100
    iter_max: int = 1_000_000
    burst_factor: float = 8.0
    burst_fraction: float = 0.1
    mean_burst_s: float = 1800.0
    deadline_factor: float | None = None
    max_tries: int = 1000
    name: str | None = None

    def __post_init__(self) -> None:
        problems = Problems()
        problems.require(1 <= self.n_jobs <= MAX_JOBS, f"n_jobs must be in 1..{MAX_JOBS}, got {self.n_jobs}")
        problems.check(self.arrival, Arrival, "arrival")
        problems.require(
            RATE_RANGE[0] <= self.rate_per_h <= RATE_RANGE[1],
            f"rate_per_h must be in {RATE_RANGE[0]:g}..{RATE_RANGE[1]:g}, got {self.rate_per_h}",
        )
        problems.require(self.mix in MIXES, f"mix must be one of {', '.join(MIXES)}, got {self.mix!r}")
        problems.require(self.gpu_types is None or bool(self.gpu_types), "gpu_types must name at least one type")
        problems.require(self.max_gpus is None or self.max_gpus >= 1, f"max_gpus must be >= 1, got {self.max_gpus}")
        problems.require(
            1 <= self.iter_min <= self.iter_max <= MAX_EXACT_INT,
            f"need 1 <= iter_min <= iter_max <= {MAX_EXACT_INT}, got {self.iter_min}, {self.iter_max}",
        )
        problems.require(
            0 <= self.iter_log_sigma <= 100 and abs(self.iter_log_mean) <= 100,
            "need 0 <= iter_log_sigma <= 100 and -100 <= iter_log_mean <= 100",
        )
        if self.arrival == "bursty":
            if not (
                1 <= self.burst_factor < math.inf and 0 < self.burst_fraction < 1 and 0 < self.mean_burst_s < math.inf
            ):
                problems.add("bursty needs burst_factor >= 1, 0 < burst_fraction < 1, mean_burst_s > 0 (finite)")
            elif self.burst_factor * self.burst_fraction >= 1:
                problems.add(
                    f"burst_factor x burst_fraction must be < 1 (got {self.burst_factor * self.burst_fraction:g})"
                )
            elif self.n_jobs / (self.rate_per_h / 3600 * self.mean_burst_s / self.burst_fraction) > MAX_BURST_CYCLES:
                problems.add(
                    f"bursty: n_jobs={self.n_jobs} at rate_per_h={self.rate_per_h:g} needs more than "
                    f"{MAX_BURST_CYCLES} calm/burst cycles of mean_burst_s={self.mean_burst_s:g}; "
                    "raise mean_burst_s or rate_per_h"
                )
        problems.require(
            self.deadline_factor is None or 0 < self.deadline_factor < math.inf,
            f"deadline_factor must be > 0 (finite) or None, got {self.deadline_factor}",
        )
        problems.require(1 <= self.max_tries <= MAX_TRIES, f"max_tries must be in 1..{MAX_TRIES}, got {self.max_tries}")
        problems.raise_if_any("SyntheticConfig")
        if self.gpu_types is not None:
            object.__setattr__(self, "gpu_types", tuple(t.strip().lower() for t in self.gpu_types))


def spec_of(config: SyntheticConfig) -> str:
    """The ``synthetic:key=value,...`` spec that regenerates ``config`` (non-defaults and seed)."""
    items = [
        f"{f.name}={format_value(getattr(config, f.name))}"
        for f in dataclasses.fields(config)
        if f.name == "seed" or getattr(config, f.name) != f.default
    ]
    return "synthetic:" + ",".join(items)


def poisson_arrivals(rng: np.random.Generator, n: int, rate_per_h: float) -> np.ndarray:
    """``n`` Poisson arrival times (s), the first at 0."""
    gaps = rng.exponential(3600.0 / rate_per_h, size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def bursty_arrivals(
    rng: np.random.Generator,
    n: int,
    rate_per_h: float,
    burst_factor: float,
    burst_fraction: float,
    mean_burst_s: float,
) -> np.ndarray:
    """``n`` arrival times (s) of a two-state Markov-modulated Poisson process, the first at 0.

    The long-run mean rate is ``rate_per_h``; the state at t = 0 is drawn from the stationary
    distribution.
    """
    rate = rate_per_h / 3600.0
    burst_rate = burst_factor * rate
    calm_rate = rate * (1 - burst_factor * burst_fraction) / (1 - burst_fraction)
    mean_calm_s = mean_burst_s * (1 - burst_fraction) / burst_fraction
    times: list[np.ndarray] = []
    got, t = 0, 0.0
    bursting = bool(rng.random() < burst_fraction)
    while got < n:
        stay = rng.exponential(mean_burst_s if bursting else mean_calm_s)
        k = int(rng.poisson((burst_rate if bursting else calm_rate) * stay))
        if k:
            times.append(np.sort(rng.uniform(t, t + stay, size=k)))
            got += k
        t += stay
        bursting = not bursting
    out = np.concatenate(times)[:n]
    return out - out[0]


def synthetic(
    config: SyntheticConfig | None = None,
    *,
    feasible: FeasibleFn | None = None,
    iter_time: IterTimeFn | None = None,
    **overrides: object,
) -> Trace:
    """Generate a seeded synthetic trace from ``config`` with keyword overrides.

    ``synthetic(n_jobs=500, arrival="bursty", rate_per_h=20, seed=1, gpu_types=("a40", "a10"))``.
    ``feasible`` filters sampled jobs (default :func:`traces.recipe.default_feasible`);
    ``iter_time`` is only used for deadlines (default :func:`traces.recipe.nominal_iter_time`).
    Unknown keys raise ValueError listing the valid ones.
    """
    cfg = config or SyntheticConfig()
    if overrides:
        valid = [f.name for f in dataclasses.fields(SyntheticConfig)]
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise ValueError(f"unknown synthetic setting(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
        cfg = dataclasses.replace(cfg, **overrides)  # type: ignore[arg-type]

    arrival_rng, fields_rng, iter_rng = child_rngs(cfg.seed, 3)
    if cfg.arrival == "poisson":
        times = poisson_arrivals(arrival_rng, cfg.n_jobs, cfg.rate_per_h)
    else:
        times = bursty_arrivals(
            arrival_rng, cfg.n_jobs, cfg.rate_per_h, cfg.burst_factor, cfg.burst_fraction, cfg.mean_burst_s
        )
    times = np.round(times, 3)
    fields = sample_fields(
        fields_rng,
        cfg.n_jobs,
        get_mix(cfg.mix),
        feasible=feasible,
        gpu_types=cfg.gpu_types,
        max_gpus=cfg.max_gpus,
        max_tries=cfg.max_tries,
    )
    iters = np.clip(
        np.rint(iter_rng.lognormal(cfg.iter_log_mean, cfg.iter_log_sigma, size=cfg.n_jobs)), cfg.iter_min, cfg.iter_max
    ).astype(np.int64)

    timer = cached_iter_time(iter_time or nominal_iter_time)
    width = len(str(cfg.n_jobs - 1))
    jobs = []
    for k in range(cfg.n_jobs):
        model, batch, gtype, count = fields.models[k], fields.batches[k], fields.gpu_types[k], fields.num_gpus[k]
        deadline = None
        if cfg.deadline_factor is not None:
            deadline = float(times[k]) + cfg.deadline_factor * int(iters[k]) * timer(model, batch, gtype, count)
        jobs.append(
            JobSpec(
                job_id=JobId(f"syn-{k:0{width}d}"),
                model=model,
                global_batch=batch,
                iterations=int(iters[k]),
                submit_time=float(times[k]),
                requested_gpu_type=GpuType(gtype),
                requested_gpus=count,
                deadline=deadline,
                deadline_source=DeadlineSource.DECLARED if deadline is None else DeadlineSource.DERIVED,
            )
        )
    name = cfg.name or f"synthetic-{cfg.arrival}-{cfg.n_jobs}-s{cfg.seed}"
    trace = Trace(name, tuple(jobs), spec_of(cfg), 0.0)
    log.debug("generated %d synthetic jobs (%s, %.2f/h, seed %d)", len(trace), cfg.arrival, cfg.rate_per_h, cfg.seed)
    return trace


def synthetic_from_options(
    options: Mapping[str, str],
    *,
    seed: int = 0,
    feasible: FeasibleFn | None = None,
    iter_time: IterTimeFn | None = None,
    context: str = "synthetic",
    also_valid: Sequence[str] = (),
) -> Trace:
    """The ``synthetic:key=value,...`` generator: text options typed by :class:`SyntheticConfig`.

    ``seed`` applies unless the options set one. ValueError (one line) names a bad key or value.
    """
    hints = typing.get_type_hints(SyntheticConfig)
    values = coerce_options(options, hints, context, also_valid)
    values.setdefault("seed", seed)
    try:
        config = SyntheticConfig(**values)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"{context}: {exc}") from None
    return synthetic(config, feasible=feasible, iter_time=iter_time)
