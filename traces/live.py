"""The built-in live trace: a dozen small jobs for a CPU testbed, so ``arena-gym deploy`` runs with defaults.

Jobs train the runner's CPU presets ``gpt__tiny`` and ``gpt__mini`` with different global
batches, iteration counts and requested device counts (1, 2 or 4), arriving over about a minute.
The jobs are a fixed menu (:data:`MENU`, twelve entries in arrival order; more jobs repeat it in
later spans), sized so a job takes roughly 10 s to a minute on one CPU core, and shaped to
exercise a scheduler: a large job takes the whole testbed first, a job that cannot start at once
follows, and smaller jobs arrive behind it (Arena backfills them and later preempts them for the
waiting job, resizes the large one, and so on). Arrival times are fixed fractions of ``span_s``
(:data:`ARRIVALS`) plus seeded jitter of up to 1% of the span; the first job arrives at 0.
``work`` scales every iteration count (0.25 gives a quick smoke run), ``max_gpus`` caps the
requests, and ``gpu_type`` names the requested device type (``cpu`` for the CPU presets, a
catalogue type such as ``a100`` on a GPU testbed).

Spec: ``live`` or ``live:n_jobs=12,span_s=60,seed=0,work=1,max_gpus=4,gpu_type=cpu``.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arena_gym.fields import Problems
from arena_gym.types import GpuType, JobId, JobSpec, ModelRef, is_power_of_two
from traces.options import coerce_options, format_value
from traces.recipe import FeasibleFn, IterTimeFn, child_rngs
from traces.trace import Trace

log = logging.getLogger(__name__)

#: (model, global batch, iterations, requested devices) of the twelve menu entries, in arrival order.
MENU: tuple[tuple[str, int, int, int], ...] = (
    ("gpt__tiny", 16, 240, 4),
    ("gpt__mini", 8, 32, 2),
    ("gpt__tiny", 8, 320, 1),
    ("gpt__mini", 16, 16, 1),
    ("gpt__mini", 16, 16, 2),
    ("gpt__tiny", 64, 80, 4),
    ("gpt__tiny", 32, 200, 1),
    ("gpt__tiny", 32, 160, 2),
    ("gpt__tiny", 16, 120, 2),
    ("gpt__tiny", 16, 240, 1),
    ("gpt__tiny", 8, 100, 1),
    ("gpt__mini", 8, 24, 1),
)
#: Arrival time of each menu entry as a fraction of the span.
ARRIVALS: tuple[float, ...] = (0.0, 0.011, 0.10, 0.105, 0.11, 0.28, 0.38, 0.385, 0.47, 0.54, 0.73, 0.85)
#: Seeded jitter of an arrival, as a fraction of the span.
JITTER = 0.01
#: Most jobs the generator makes (a live run of more would take hours).
MAX_JOBS = 1000


@dataclass(frozen=True)
class LiveTraceConfig:
    """Settings of the live trace (see the module docstring)."""

    n_jobs: int = 12
    span_s: float = 60.0
    seed: int = 0
    work: float = 1.0
    max_gpus: int = 4
    gpu_type: str = "cpu"

    def __post_init__(self) -> None:
        problems = Problems()
        problems.require(1 <= self.n_jobs <= MAX_JOBS, f"n_jobs must be in 1..{MAX_JOBS}, got {self.n_jobs}")
        problems.require(0 <= self.span_s <= 86_400, f"span_s must be in 0..86400 s, got {self.span_s}")
        problems.require(0 < self.work <= 100, f"work must be in (0, 100], got {self.work}")
        problems.require(
            is_power_of_two(self.max_gpus) and self.max_gpus <= 1024,
            f"max_gpus must be a power of two up to 1024, got {self.max_gpus}",
        )
        problems.require(
            bool(self.gpu_type.strip()) and self.gpu_type.isascii(),
            f"gpu_type must be a non-empty ASCII name, got {self.gpu_type!r}",
        )
        problems.require(self.seed >= 0, f"seed must be >= 0, got {self.seed}")
        problems.raise_if_any("LiveTraceConfig")
        object.__setattr__(self, "gpu_type", self.gpu_type.strip().lower())


def spec_of(config: LiveTraceConfig) -> str:
    """The ``live:key=value,...`` spec that regenerates ``config`` (non-defaults and seed)."""
    items = [
        f"{f.name}={format_value(getattr(config, f.name))}"
        for f in dataclasses.fields(config)
        if f.name == "seed" or getattr(config, f.name) != f.default
    ]
    return "live:" + ",".join(items)


def live_trace(config: LiveTraceConfig | None = None, *, feasible: FeasibleFn | None = None) -> Trace:
    """Generate the live trace; ``feasible`` (model, batch, type, count) halves a request until it fits.

    ValueError naming the job when not even one device can run it.
    """
    cfg = config or LiveTraceConfig()
    (rng,) = child_rngs(cfg.seed, 1)
    slots = np.arange(cfg.n_jobs)
    base = (slots // len(MENU) + np.take(ARRIVALS, slots % len(MENU))) * cfg.span_s
    times = np.maximum(base + rng.uniform(-JITTER, JITTER, size=cfg.n_jobs) * cfg.span_s, 0.0)
    times[0] = 0.0
    times = np.round(times, 3)
    width = len(str(cfg.n_jobs - 1))
    jobs = []
    for k in range(cfg.n_jobs):
        name, batch, iters, gpus = MENU[k % len(MENU)]
        model = ModelRef.parse(name)
        count = min(gpus, cfg.max_gpus)
        while feasible is not None and count >= 1 and not feasible(model, batch, cfg.gpu_type, count):
            count //= 2
        job_id = f"live-{k:0{width}d}"
        if count < 1:
            raise ValueError(f"live trace: job {job_id} ({name}, batch {batch}) fits on no {cfg.gpu_type} device count")
        jobs.append(
            JobSpec(
                JobId(job_id),
                model,
                batch,
                max(1, round(iters * cfg.work)),
                float(times[k]),
                GpuType(cfg.gpu_type),
                count,
            )
        )
    trace = Trace.from_jobs(f"live-{cfg.n_jobs}-s{cfg.seed}", jobs, spec_of(cfg))
    log.debug("generated the live trace: %d jobs over %.0f s", len(trace), trace.span_s)
    return trace


def live_from_options(
    options: Mapping[str, str],
    *,
    seed: int = 0,
    feasible: FeasibleFn | None = None,
    iter_time: IterTimeFn | None = None,
    context: str = "live",
    also_valid: Sequence[str] = (),
) -> Trace:
    """The ``live:key=value,...`` generator: text options typed by :class:`LiveTraceConfig`.

    ``seed`` applies unless the options set one; ``iter_time`` is not used (no deadlines).
    ValueError (one line) names a bad key or value.
    """
    hints = typing.get_type_hints(LiveTraceConfig)
    values = coerce_options(options, hints, context, also_valid)
    values.setdefault("seed", seed)
    try:
        config = LiveTraceConfig(**values)  # type: ignore[arg-type]
        return live_trace(config, feasible=feasible)
    except ValueError as exc:
        raise ValueError(f"{context}: {exc}") from None
