"""The belief over a job's unknown total work: conditional samples given attained work, and a Gittins index.

A non-clairvoyant scheduler sees a job's attained iterations, never its total. The belief
holds, per group of jobs, a distribution of the total work ``S`` in a *unit*:

- ``iterations``: total iterations (what the simulator executes);
- ``request_seconds``: iterations x the job's reference iteration time, i.e. seconds of run
  time at the requested GPU type and count (the belief's estimate, best locality);
- ``request_gpu_seconds``: the same times the requested GPU count.

The packaged real-trace belief works in ``request_seconds``: on the validation split it gives
the highest held-out log-likelihood of total iterations (``docs/search.md`` has the numbers;
the fit records them in ``selection``). The synthetic belief works in ``iterations``, because
the generator draws iterations from one log-normal whatever the job.

Groups are a job's configuration (model, global batch, requested type and count), then its
model (family and size), then everything pooled: a job uses the finest group that had at
least ``min_group_jobs`` training jobs. A group's distribution of ``log S`` is a Gaussian
kernel mixture (centres, weights, one bandwidth); the real belief's kernels sit on the train
split's binned log sizes, the synthetic one is the generator's log-normal itself.

Conditioning on attained work ``a`` is exact: ``S | S > a`` reweights each kernel by its
survival at ``log a`` and truncates it there, so a sample is never below the attained. Beyond
every size seen the tail of the largest kernels extrapolates (log-normal: given ``S > a`` far
out, the expected remaining work grows like ``a h^2 / (log a - c)``).

The Gittins index for minimising mean completion time, ``G(a) = sup_D P(S - a <= D | S > a)
/ E[min(S - a, D) | S > a]``, is tabulated per group on a grid of attained values (computed on
first use) and read by interpolation, vectorised over jobs. It is returned *per second of
service at the job's reference iteration time*, so jobs of different models compare directly;
a scheduler that would run a job at iteration time ``t`` multiplies its index by
``reference / t``.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtri

from agents.search.arrivals import ArrivalModel, JobAttributes, fresh_ids
from arena_gym.outputs import atomic_write
from arena_gym.types import GpuType, JobSpec, JobView, ModelRef
from traces.table import MAX_EXACT_INT

log = logging.getLogger(__name__)

#: The ``format`` tag and version of a belief file.
FORMAT = "arena-gym-belief"
FORMAT_VERSION = 1
KINDS: tuple[str, ...] = ("real", "synthetic")
UNITS: tuple[str, ...] = ("iterations", "request_seconds", "request_gpu_seconds")
#: Group levels from finest to coarsest (the pooled group always closes the chain).
LEVELS: tuple[str, ...] = ("configuration", "model")
POOLED = "pooled"
#: Where the packaged belief files are.
DATA_DIR = Path(__file__).resolve().parent / "data"
#: The Gittins table of a group: this many log-spaced attained values, from this many
#: bandwidths below the smallest kernel to this many above the largest.
GRID_POINTS = 320
GRID_BELOW = 6.0
GRID_ABOVE = 12.0
#: Past this many bandwidths into a kernel's tail, truncated draws use its exponential limit.
TAIL_Z = 25.0

JobLike = JobAttributes | JobView | JobSpec
_TOP_KEYS = (
    "format",
    "version",
    "kind",
    "unit",
    "levels",
    "min_group_jobs",
    "provenance",
    "selection",
    "groups",
    "references",
    "arrivals",
)


def logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """``log(sum(exp(a), axis=1))`` of a 2-D real array: ``scipy.special.logsumexp(a, axis=1)`` to the last bit.

    The same arithmetic (the row's maxima taken out of the sum, then ``log1p``) without the
    array-API dispatch, which costs more than the sum on the belief's small rows.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        top = a.max(axis=1, keepdims=True)
        at_top = a == top
        count = at_top.sum(axis=1, keepdims=True, dtype=float)
        rest = np.exp(np.where(at_top, -np.inf, a) - top).sum(axis=1, keepdims=True)
        rest = np.where(rest == 0, rest, rest / count)
        out = np.log1p(rest) + np.log(count) + top
        bad = ~np.isfinite(out)
        if bad.any():  # infinite or empty rows: the direct sum, as scipy takes it
            out = np.where(bad, np.log(np.exp(a).sum(axis=1, keepdims=True)), out)
    return out[:, 0]


def _log_segments(x: np.ndarray, log_survival: np.ndarray) -> np.ndarray:
    """``log`` of the integral of ``S`` over each grid segment, ``log S`` linear on it."""
    d = np.diff(log_survival)
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where(d == 0.0, 1.0, np.expm1(d) / d)  # the segment's integral / (width x S at its start)
    return np.log(np.diff(x)) + log_survival[:-1] + np.log(phi)


def gittins_on_grid(x: np.ndarray, log_survival: np.ndarray) -> np.ndarray:
    """The Gittins index at each point of a grid of attained work, from the survival ``P(S > x)`` there.

    ``G(x_k) = max_{j > k} (S(x_k) - S(x_j)) / integral_{x_k}^{x_j} S``, with ``log S`` linear
    between grid points (exact for an exponential). ``x`` must increase from >= 0 and
    ``log_survival`` be finite; the last point repeats the index before it.
    """
    x = np.asarray(x, dtype=float)
    ls = np.asarray(log_survival, dtype=float)
    if x.ndim != 1 or x.shape != ls.shape or len(x) < 3:
        raise ValueError(f"gittins_on_grid: need two 1-D arrays of one length >= 3, got {x.shape} and {ls.shape}")
    if x[0] < 0 or not (np.diff(x) > 0).all() or not np.isfinite(ls).all():
        raise ValueError("gittins_on_grid: x must increase from >= 0 and log_survival be finite")
    log_seg = _log_segments(x, ls)
    k = np.arange(len(x))[:, None]
    m = np.arange(len(x) - 1)[None, :]
    ahead = m >= k  # segment m starts at or after point k
    den = np.cumsum(np.exp(np.where(ahead, log_seg[None, :] - ls[:, None], -np.inf)), axis=1)
    num = -np.expm1(ls[None, 1:] - ls[:, None])  # P(x_k < S <= x_{m+1}) / S(x_k)
    ratio = np.full(den.shape, -np.inf)
    np.divide(num, den, out=ratio, where=ahead & (den > 0))
    index = ratio.max(axis=1)
    index[-1] = index[-2]
    return index


@dataclass(frozen=True, slots=True)
class GittinsTable:
    """A group's Gittins index (per unit of work) on a grid of attained work ``x``, read by interpolation.

    Below the grid (where ``S`` is 1 to within 1e-9) the index is exact: ``max_j gain_j /
    (x_0 - a + cost_j)``, with ``gain_j = P(S <= x_j | S > x_0)`` and ``cost_j`` the expected
    service from ``x_0`` up to ``x_j``; beyond the grid it stays at its last value.
    """

    x: np.ndarray
    index: np.ndarray
    gain: np.ndarray
    cost: np.ndarray

    @staticmethod
    def build(x: np.ndarray, log_survival: np.ndarray) -> GittinsTable:
        """The table of a survival function given on a grid (see :func:`gittins_on_grid`)."""
        index = gittins_on_grid(x, log_survival)
        gain = -np.expm1(log_survival - log_survival[0])
        cost = np.concatenate([[0.0], np.cumsum(np.exp(_log_segments(x, log_survival) - log_survival[0]))])
        for a in (x, index, gain, cost):
            a.flags.writeable = False
        return GittinsTable(x, index, gain, cost)

    def at(self, attained: np.ndarray) -> np.ndarray:
        """The index at each attained amount of work."""
        a = np.asarray(attained, dtype=float)
        out = np.interp(a, self.x, self.index)
        low = a < self.x[0]
        if low.any():
            out[low] = (self.gain[None, :] / (self.x[0] - a[low, None] + self.cost[None, :])).max(axis=1)
        return out


@dataclass(frozen=True, slots=True)
class WorkGroup:
    """One group's distribution of log total work (in the belief's unit): a Gaussian kernel mixture.

    ``level`` is ``configuration``, ``model`` or ``pooled``; ``key`` names the group
    (``(model, batch, type, count)``, ``(model,)`` or ``()``); ``jobs`` how many training jobs
    it was fitted on.
    """

    level: str
    key: tuple[str | int, ...]
    jobs: int
    bandwidth: float
    centres: tuple[float, ...]
    weights: tuple[float, ...]
    _c: np.ndarray = field(init=False, repr=False, compare=False)
    _logw: np.ndarray = field(init=False, repr=False, compare=False)
    _memo: dict[str, GittinsTable] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        arity = {"configuration": 4, "model": 1, POOLED: 0}
        if self.level not in arity or len(self.key) != arity[self.level]:
            raise ValueError(f"group {self.level!r} {self.key}: unknown level or key of the wrong length")
        c = np.asarray(self.centres, dtype=float)
        w = np.asarray(self.weights, dtype=float)
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"group {self.name}: bandwidth must be a positive finite number, got {self.bandwidth}")
        if c.size == 0 or c.shape != w.shape or not np.isfinite(c).all() or not (np.isfinite(w) & (w > 0)).all():
            raise ValueError(f"group {self.name}: needs as many finite centres as positive weights (>= 1)")
        if self.jobs < 1:
            raise ValueError(f"group {self.name}: jobs must be >= 1, got {self.jobs}")
        logw = np.log(w / w.sum())
        for a in (c, logw):
            a.flags.writeable = False
        object.__setattr__(self, "_c", c)
        object.__setattr__(self, "_logw", logw)
        object.__setattr__(self, "_memo", {})

    @property
    def name(self) -> str:
        """The group as text, e.g. ``configuration gpt__1.3B/128/a40/4``."""
        return f"{self.level} {'/'.join(map(str, self.key))}".rstrip()

    def log_survival(self, u: np.ndarray) -> np.ndarray:
        """``log P(log S > u)`` at each ``u``."""
        z = (self._c[None, :] - np.asarray(u, dtype=float)[:, None]) / self.bandwidth
        return logsumexp_rows(self._logw + log_ndtr(z))

    def log_pdf(self, u: np.ndarray) -> np.ndarray:
        """The log density of ``log S`` at each ``u``."""
        z = (np.asarray(u, dtype=float)[:, None] - self._c[None, :]) / self.bandwidth
        return logsumexp_rows(self._logw - 0.5 * z * z) - math.log(self.bandwidth * math.sqrt(2 * math.pi))

    def sample_above(self, lower: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws of ``log S`` per row, given ``log S > lower[row]`` (``-inf``: no condition)."""
        lower = np.asarray(lower, dtype=float)
        rows, width = len(lower), len(self._c)
        cut = (lower[:, None] - self._c[None, :]) / self.bandwidth
        post = self._logw + log_ndtr(-cut)
        p = np.exp(post - post.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        offset = np.arange(rows)[:, None]
        pos = np.searchsorted((cdf + offset).ravel(), (rng.random((rows, n)) + offset).ravel(), side="right")
        atom = np.minimum(pos.reshape(rows, n) - offset * width, width - 1)
        zc = np.take_along_axis(cut, atom, axis=1)
        exact = -ndtri(np.exp(np.log1p(-rng.random((rows, n))) + log_ndtr(-zc)))
        tail = zc + rng.exponential(size=(rows, n)) / np.maximum(zc, TAIL_Z)
        return self._c[atom] + self.bandwidth * np.where(zc > TAIL_Z, tail, exact)

    def gittins_table(self) -> GittinsTable:
        """The group's Gittins table, on a log grid from below its smallest kernel to past its largest (built once)."""
        table = self._memo.get("gittins")
        if table is None:
            h = self.bandwidth
            u = np.linspace(self._c.min() - GRID_BELOW * h, self._c.max() + GRID_ABOVE * h, GRID_POINTS)
            table = self._memo.setdefault("gittins", GittinsTable.build(np.exp(u), self.log_survival(u)))
        return table


@dataclass(frozen=True, slots=True)
class ReferenceTable:
    """Reference iteration times: seconds per iteration of each known configuration at its requested shape.

    ``entries`` carry a GPU type, a count and ``reference_s`` each.
    """

    entries: tuple[JobAttributes, ...]
    _times: dict[tuple[ModelRef, int, GpuType | None, int | None], float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        times = {}
        for r in self.entries:
            if r.reference_s is None or r.gpu_type is None or r.num_gpus is None:
                raise ValueError(f"reference {r.model}/{r.global_batch}: needs a GPU type, count and reference_s")
            times[r.config] = r.reference_s
        if len(times) != len(self.entries):
            raise ValueError("two references have the same configuration")
        object.__setattr__(self, "_times", times)

    def time(self, job: JobLike) -> float:
        """The job's reference iteration time (s): its own ``reference_s``, else the table's.

        A job without a requested type or count takes the fastest entry that matches what it
        did request. ValueError when the table has none.
        """
        a = JobAttributes.of(job)
        if a.reference_s is not None:
            return a.reference_s
        found = self._times.get(a.config)
        if found is None and (a.gpu_type is None or a.num_gpus is None):
            matches = [
                s
                for (m, b, t, n), s in self._times.items()
                if m == a.model and b == a.global_batch and a.gpu_type in (None, t) and a.num_gpus in (None, n)
            ]
            found = min(matches, default=None)
        if found is None:
            raise ValueError(
                f"no reference iteration time for {a.model} batch {a.global_batch} on {a.gpu_type} x{a.num_gpus}; "
                "pass JobAttributes(..., reference_s=seconds per iteration at the requested shape)"
            )
        return found


def unit_scale(unit: str, reference_s: float, num_gpus: int | None) -> float:
    """Units of work per iteration of a job: 1, its reference time, or that times its GPU count."""
    if unit == "iterations":
        return 1.0
    return reference_s if unit == "request_seconds" else reference_s * (num_gpus or 1)


@dataclass(frozen=True, slots=True)
class Provenance:
    """What a belief was fitted on: env config, traces, split, cluster, perf model, job count, how, code version."""

    env: str
    traces: tuple[str, ...]
    split: str
    cluster: str
    perf: str
    jobs: int
    source: str
    code_version: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A (unit, levels) choice scored on held-out jobs.

    ``loglik``: mean log-likelihood of the jobs' total iterations (nats per job); ``se``: the
    standard error of its per-job difference to the chosen candidate (0 for the chosen one).
    """

    unit: str
    levels: tuple[str, ...]
    loglik: float
    se: float
    jobs: int


def _attributes_of(jobs: JobLike | Sequence[JobLike]) -> tuple[list[JobAttributes], bool]:
    single = isinstance(jobs, (JobAttributes, JobView, JobSpec))
    items: Sequence[JobLike] = [jobs] if single else jobs  # type: ignore[list-item,assignment]
    return [JobAttributes.of(j) for j in items], single


@dataclass(frozen=True, slots=True)
class WorkBelief:
    """Distributions of jobs' total work per group, a reference-time table, and an arrival model.

    See the module docstring for the model. ``groups`` end with the pooled group; ``references``
    hold each known configuration's reference iteration time (``reference_s``); ``selection``
    the held-out scores of the candidates the fit chose from.
    """

    kind: str
    unit: str
    levels: tuple[str, ...]
    min_group_jobs: int
    groups: tuple[WorkGroup, ...]
    references: ReferenceTable
    arrivals: ArrivalModel
    provenance: Provenance
    selection: tuple[Candidate, ...] = ()
    _by_key: dict[tuple[str | int, ...], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if len(set(self.levels)) != len(self.levels) or [v for v in LEVELS if v in self.levels] != list(self.levels):
            raise ValueError(f"levels must be distinct, in the order {', '.join(LEVELS)}; got {list(self.levels)}")
        if not self.groups or self.groups[-1].level != POOLED or any(g.level == POOLED for g in self.groups[:-1]):
            raise ValueError("groups must end with the one pooled group")
        if any(g.level not in self.levels for g in self.groups[:-1]):
            raise ValueError(f"a group's level is not one of the belief's levels {list(self.levels)}")
        by_key = {(g.level, *g.key): i for i, g in enumerate(self.groups)}
        if len(by_key) != len(self.groups):
            raise ValueError("two groups have the same key")
        object.__setattr__(self, "_by_key", by_key)

    # ------------------------------------------------------------------ lookups
    def group(self, job: JobLike) -> WorkGroup:
        """The group whose distribution a job's total work follows (the finest level that has one)."""
        return self.groups[self._group_index(JobAttributes.of(job))]

    def _group_index(self, a: JobAttributes) -> int:
        keys = {
            "configuration": ("configuration", a.model.name, a.global_batch, a.gpu_type, a.num_gpus),
            "model": ("model", a.model.name),
        }
        for level in self.levels:
            i = self._by_key.get(keys[level])  # type: ignore[arg-type]
            if i is not None:
                return i
        return len(self.groups) - 1

    def reference_time(self, job: JobLike) -> float:
        """The job's reference iteration time (s): see :meth:`ReferenceTable.time`."""
        return self.references.time(job)

    def _scale(self, a: JobAttributes) -> float:
        """Units of work per iteration."""
        return 1.0 if self.unit == "iterations" else unit_scale(self.unit, self.reference_time(a), a.num_gpus)

    def _prepare(
        self, jobs: JobLike | Sequence[JobLike], values: float | Sequence[float] | np.ndarray, what: str
    ) -> tuple[list[JobAttributes], bool, np.ndarray, np.ndarray, np.ndarray]:
        attrs, single = _attributes_of(jobs)
        v = np.broadcast_to(np.asarray(values, dtype=float), (len(attrs),))
        if not (np.isfinite(v).all() and (v >= 0).all()):
            raise ValueError(f"{what} must be finite and >= 0")
        groups = np.fromiter((self._group_index(a) for a in attrs), dtype=np.int64, count=len(attrs))
        scales = np.fromiter((self._scale(a) for a in attrs), dtype=float, count=len(attrs))
        return attrs, single, groups, scales, v

    # ------------------------------------------------------------------ the distribution
    def scale_log_likelihood(
        self,
        jobs: Sequence[JobLike],
        work: Sequence[float] | np.ndarray,
        finished: Sequence[bool] | np.ndarray,
        log_scales: np.ndarray,
    ) -> np.ndarray:
        """The log-likelihood of each log scale: every job's work ``exp(log_scale)`` times the belief's.

        A finished job contributes the density of its total ``work`` (iterations), an unfinished
        one the probability of exceeding the ``work`` it has attained (censored). Shape of
        ``log_scales``.
        """
        grid = np.asarray(log_scales, dtype=float)
        groups, rows = self.scale_likelihood_rows(jobs, work, finished, grid.ravel())
        return sum_likelihood_rows(groups, finished, rows, grid.size).reshape(grid.shape)

    def scale_likelihood_rows(
        self,
        jobs: Sequence[JobLike],
        work: Sequence[float] | np.ndarray,
        finished: Sequence[bool] | np.ndarray,
        grid: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each job's group and its log-likelihood at every log scale of the 1-D ``grid`` (one row per job).

        A row depends on nothing but the job's group, work and whether it finished, so rows
        computed apart sum (:func:`sum_likelihood_rows`) to :meth:`scale_log_likelihood`.
        """
        _, _, groups, scales, v = self._prepare(list(jobs), work, "work")
        done = np.asarray(finished, dtype=bool)
        rows = np.empty((len(v), grid.size))
        with np.errstate(divide="ignore"):
            u = np.log(v * scales)
        for g, ended, mask in likelihood_blocks(groups, done):
            read = self.groups[g].log_pdf if ended else self.groups[g].log_survival
            shifted = (u[mask][:, None] - grid[None, :]).ravel()
            rows[mask] = read(np.maximum(shifted, -700.0)).reshape(-1, grid.size)
        return groups, rows

    def log_density(self, jobs: JobLike | Sequence[JobLike], iterations: float | Sequence[float]) -> np.ndarray:
        """The log density of each job's total iterations at ``iterations`` (a held-out log-likelihood)."""
        _, single, groups, scales, v = self._prepare(jobs, iterations, "iterations")
        if (v <= 0).any():
            raise ValueError("iterations must be > 0")
        out = np.empty(len(v))
        for g in np.unique(groups):
            rows = groups == g
            out[rows] = self.groups[g].log_pdf(np.log(v[rows] * scales[rows])) - np.log(v[rows])
        return out[0] if single else out

    def sample_total(
        self,
        jobs: JobLike | Sequence[JobLike],
        attained: float | Sequence[float] | np.ndarray,
        rng: np.random.Generator,
        n: int = 1,
        log_scale: float = 0.0,
    ) -> np.ndarray:
        """``n`` draws of each job's total iterations given the iterations it has attained.

        Every draw is an integer above the attained (at least ``floor(attained) + 1``, at most
        ``MAX_EXACT_INT``). One job: shape ``(n,)``; a sequence of jobs: ``(jobs, n)``. With
        ``log_scale`` the work is ``exp(log_scale)`` times the belief's (an episode's scale,
        :mod:`agents.search.adaptive`).
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        _, single, groups, scales, a = self._prepare(jobs, attained, "attained")
        out = np.empty((len(a), n), dtype=np.int64)
        with np.errstate(divide="ignore"):
            lower = np.log(a * scales) - log_scale
        for g in np.unique(groups):
            rows = groups == g
            draws = np.exp(self.groups[g].sample_above(lower[rows], rng, n) + log_scale) / scales[rows, None]
            floor = np.floor(a[rows])[:, None] + 1.0
            out[rows] = np.minimum(np.maximum(np.ceil(draws), floor), MAX_EXACT_INT)
        return out[0] if single else out

    def gittins_index(
        self, jobs: JobLike | Sequence[JobLike], attained: float | Sequence[float] | np.ndarray
    ) -> np.ndarray | float:
        """Each job's Gittins index at its attained iterations, per second of service at its reference iteration time.

        Higher is served first (it minimises mean completion time among indices of one unit).
        One job: a float; a sequence: an array.
        """
        attrs, single, groups, scales, a = self._prepare(jobs, attained, "attained")
        per_unit = np.empty(len(a))
        for g in np.unique(groups):
            rows = groups == g
            per_unit[rows] = self.groups[g].gittins_table().at(a[rows] * scales[rows])
        refs = scales if self.unit == "request_seconds" else np.array([self.reference_time(j) for j in attrs])
        out = per_unit * scales / refs
        return float(out[0]) if single else out

    def future_jobs(
        self,
        now: float,
        arrivals: Sequence[float],
        horizon_s: float,
        rng: np.random.Generator,
        taken: Collection[str] = (),
        max_jobs: int | None = None,
    ) -> tuple[JobSpec, ...]:
        """Jobs arriving in ``(now, now + horizon_s]`` of a sampled world, given the arrival times seen up to now.

        Times from :meth:`ArrivalModel.draw_times`, attributes from the train split's mix, total
        iterations from this belief; ids never equal one in ``taken``.
        """
        times = self.arrivals.draw_times(now, arrivals, horizon_s, rng, max_jobs)
        attrs = self.arrivals.draw_mix(len(times), rng)
        if not attrs:
            return ()
        totals = self.sample_total(attrs, 0.0, rng)[:, 0]
        ids = fresh_ids(len(attrs), taken)
        return tuple(
            JobSpec(job_id, a.model, a.global_batch, int(total), float(t), a.gpu_type, a.num_gpus)
            for job_id, a, total, t in zip(ids, attrs, totals, times)
        )

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict[str, Any]:
        """The belief as the JSON object of its file."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "unit": self.unit,
            "levels": list(self.levels),
            "min_group_jobs": self.min_group_jobs,
            "provenance": {**_fields(self.provenance), "traces": list(self.provenance.traces)},
            "selection": [{**_fields(c), "levels": list(c.levels)} for c in self.selection],
            "groups": [_group_dict(g) for g in self.groups],
            "references": [[*_config_list(r), r.reference_s] for r in self.references.entries],
            "arrivals": {
                "rate_shape": self.arrivals.rate_shape,
                "rate_s": self.arrivals.rate_s,
                "windows": self.arrivals.windows,
                "mix": [[*_config_list(a), w] for a, w in zip(self.arrivals.mix, self.arrivals.weights)],
            },
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the belief to a JSON file (atomically)."""
        text = _dumps(self.to_dict()) + "\n"
        return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    @staticmethod
    def from_dict(data: Any) -> WorkBelief:
        """A belief from the JSON object of its file; one-line ValueError naming the problem."""
        top = _Obj(data, "belief")
        if top.get("format", str) != FORMAT:
            raise ValueError(f"format must be {FORMAT!r}, got {top.data.get('format')!r}")
        if top.get("version", int) != FORMAT_VERSION:
            raise ValueError(f"version must be {FORMAT_VERSION}, got {top.data.get('version')!r}")
        unknown = sorted(set(top.data) - set(_TOP_KEYS))
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(_TOP_KEYS)}")
        prov = top.obj("provenance")
        arrivals = top.obj("arrivals")
        mix = [_config_entry(e, f"arrivals.mix[{i}]", False) for i, e in enumerate(arrivals.get("mix", list))]
        return WorkBelief(
            kind=top.get("kind", str),
            unit=top.get("unit", str),
            levels=tuple(top.strings("levels")),
            min_group_jobs=top.get("min_group_jobs", int),
            groups=tuple(_group_of(g) for g in top.objs("groups")),
            references=ReferenceTable(
                tuple(_config_entry(e, f"references[{i}]", True)[0] for i, e in enumerate(top.get("references", list)))
            ),
            arrivals=ArrivalModel(
                rate_shape=arrivals.get("rate_shape", float),
                rate_s=arrivals.get("rate_s", float),
                windows=arrivals.get("windows", int),
                mix=tuple(a for a, _ in mix),
                weights=tuple(w for _, w in mix),
            ),
            provenance=Provenance(
                env=prov.get("env", str),
                traces=tuple(prov.strings("traces")),
                split=prov.get("split", str),
                cluster=prov.get("cluster", str),
                perf=prov.get("perf", str),
                jobs=prov.get("jobs", int),
                source=prov.get("source", str),
                code_version=prov.get("code_version", str),
            ),
            selection=tuple(
                Candidate(
                    c.get("unit", str),
                    tuple(c.strings("levels")),
                    c.get("loglik", float),
                    c.get("se", float),
                    c.get("jobs", int),
                )
                for c in top.objs("selection")
            ),
        )

    @staticmethod
    def load(path: str | os.PathLike[str]) -> WorkBelief:
        """Read a belief file; a malformed one raises a one-line ValueError naming the file and the problem."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"belief file {os.fspath(path)}: cannot read it ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise ValueError(f"belief file {os.fspath(path)}: not JSON ({exc})") from None
        try:
            belief = WorkBelief.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"belief file {os.fspath(path)}: {str(exc).splitlines()[0]}") from None
        log.debug("loaded a %s belief (%d groups) from %s", belief.kind, len(belief.groups), os.fspath(path))
        return belief


@lru_cache(maxsize=len(KINDS))
def default_belief(kind: str = "real") -> WorkBelief:
    """The packaged belief of a kind: ``real`` (train split of Testbed64Real-v1's five traces) or ``synthetic``."""
    if kind not in KINDS:
        raise ValueError(f"unknown belief kind {kind!r}; valid: {', '.join(KINDS)}")
    return WorkBelief.load(DATA_DIR / f"belief-{kind}.json")


def sum_likelihood_rows(
    groups: np.ndarray, finished: Sequence[bool] | np.ndarray, rows: np.ndarray, width: int
) -> np.ndarray:
    """The sum of per-job likelihood rows, added group by group, finished jobs first, in the jobs' order.

    The order is :meth:`WorkBelief.scale_log_likelihood`'s, so the sum is the same to the last bit.
    """
    total = np.zeros(width)
    for _, _, mask in likelihood_blocks(groups, np.asarray(finished, dtype=bool)):
        total += rows[mask].sum(axis=0)
    return total


def likelihood_blocks(groups: np.ndarray, done: np.ndarray) -> Iterator[tuple[int, bool, np.ndarray]]:
    """(group, finished, row mask) of each non-empty block of jobs: group by group, the finished ones first."""
    for g in np.unique(groups):
        for ended, mask in (True, (groups == g) & done), (False, (groups == g) & ~done):
            if mask.any():
                yield int(g), ended, mask


def load_belief(spec: str) -> WorkBelief:
    """A packaged belief by kind (:data:`KINDS`), else the belief file at path ``spec``."""
    return default_belief(spec) if spec in KINDS else WorkBelief.load(spec)


# ---------------------------------------------------------------------- file helpers
def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__ if not name.startswith("_")}


def _config_list(a: JobAttributes) -> list[Any]:
    return [a.model.name, a.global_batch, a.gpu_type, a.num_gpus]


def _group_dict(g: WorkGroup) -> dict[str, Any]:
    names = {"configuration": ("model", "global_batch", "gpu_type", "num_gpus"), "model": ("model",), POOLED: ()}
    return {
        "level": g.level,
        **dict(zip(names[g.level], g.key)),
        "jobs": g.jobs,
        "bandwidth": g.bandwidth,
        "centres": list(g.centres),
        "weights": list(g.weights),
    }


def _group_of(o: _Obj) -> WorkGroup:
    level = o.get("level", str)
    if level == "configuration":
        key: tuple[str | int, ...] = (
            o.get("model", str),
            o.get("global_batch", int),
            o.get("gpu_type", str),
            o.get("num_gpus", int),
        )
    elif level == "model":
        key = (o.get("model", str),)
    else:
        key = ()
    return WorkGroup(
        level, key, o.get("jobs", int), o.get("bandwidth", float), o.numbers("centres"), o.numbers("weights")
    )


def _config_entry(entry: Any, where: str, reference: bool) -> tuple[JobAttributes, float]:
    """``[model, batch, type, count, value]`` as attributes (with ``reference_s = value`` for a reference) and value."""
    ok = isinstance(entry, list) and len(entry) == 5
    if ok:
        model, batch, gpu_type, count, value = entry
        ok = (
            isinstance(model, str)
            and _is_int(batch)
            and (gpu_type is None or isinstance(gpu_type, str))
            and (count is None or _is_int(count))
            and _is_number(value)
        )
    if not ok:
        raise ValueError(f"{where}: expected [model, global batch, GPU type, GPU count, number], got {_short(entry)}")
    try:
        ref = float(value) if reference else None
        return JobAttributes(ModelRef.parse(model), batch, GpuType(gpu_type) if gpu_type else None, count, ref), float(
            value
        )
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Obj:
    """A JSON object read with type checks; errors name the field's path."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a JSON object, got {_short(data)}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def get(self, name: str, kind: type) -> Any:
        """The field ``name``, which must be of ``kind`` (int, float, str, list, dict)."""
        if name not in self.data:
            raise ValueError(f"{self.where}: missing {name!r}")
        value = self.data[name]
        ok = {int: _is_int, float: _is_number}.get(kind, lambda v: isinstance(v, kind))(value)
        if not ok:
            raise ValueError(f"{self.where}.{name}: expected {kind.__name__}, got {_short(value)}")
        return float(value) if kind is float else value

    def obj(self, name: str) -> _Obj:
        """The field ``name`` as an object."""
        return _Obj(self.get(name, dict), f"{self.where}.{name}")

    def objs(self, name: str) -> list[_Obj]:
        """The field ``name`` as a list of objects."""
        return [_Obj(v, f"{self.where}.{name}[{i}]") for i, v in enumerate(self.get(name, list))]

    def strings(self, name: str) -> list[str]:
        """The field ``name`` as a list of strings."""
        values = self.get(name, list)
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"{self.where}.{name}: expected a list of strings, got {_short(values)}")
        return values

    def numbers(self, name: str) -> tuple[float, ...]:
        """The field ``name`` as a tuple of numbers."""
        values = self.get(name, list)
        if not all(_is_number(v) for v in values):
            raise ValueError(f"{self.where}.{name}: expected a list of numbers, got {_short(values)}")
        return tuple(float(v) for v in values)


def _dumps(value: Any, depth: int = 0) -> str:
    """JSON with objects and lists of containers indented, flat lists on one line."""
    pad, end = "  " * (depth + 1), "  " * depth
    if isinstance(value, dict) and value:
        body = ",\n".join(f"{pad}{json.dumps(k)}: {_dumps(v, depth + 1)}" for k, v in value.items())
        return "{\n" + body + "\n" + end + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(pad + _dumps(v, depth + 1) for v in value) + "\n" + end + "]"
    return json.dumps(value, allow_nan=False)
