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

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from agents.belief.arrivals import ArrivalModel, JobAttributes, fresh_ids
from agents.belief.kernels import LEVELS, POOLED, GittinsTables, SurvivalTables, WorkGroup
from agents.belief.references import JobLike, ReferenceTable, unit_scale
from arena_gym.types import JobSpec, JobView
from traces.table import MAX_EXACT_INT

KINDS: tuple[str, ...] = ("real", "synthetic")
T = TypeVar("T")
#: At most this many attribute objects keep their group and scale (the memo starts afresh beyond).
KEYED_MAX = 1 << 16
UNITS: tuple[str, ...] = ("iterations", "request_seconds", "request_gpu_seconds")


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
    _tables: dict[str, Any] = field(init=False, repr=False, compare=False)
    _keyed: dict[int, tuple[JobAttributes, int, float]] = field(init=False, repr=False, compare=False)

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
        object.__setattr__(self, "_tables", {})
        object.__setattr__(self, "_keyed", {})

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
        v = _checked(np.broadcast_to(np.asarray(values, dtype=float), (len(attrs),)), what)
        return attrs, single, *self._slots(attrs), v

    def slots(self, jobs: Sequence[JobLike]) -> tuple[np.ndarray, np.ndarray]:
        """Each job's group (its index in ``groups``) and units of work per iteration: what the ``*_at`` readers take.

        A caller that reads the same jobs again and again keeps them instead of the jobs' attributes.
        """
        return self._slots(_attributes_of(list(jobs))[0])

    def _slots(self, attrs: list[JobAttributes]) -> tuple[np.ndarray, np.ndarray]:
        keyed = [self._key(a) for a in attrs]
        groups = np.fromiter((g for _, g, _ in keyed), dtype=np.int64, count=len(attrs))
        scales = np.fromiter((s for _, _, s in keyed), dtype=float, count=len(attrs))
        return groups, scales

    def _key(self, a: JobAttributes) -> tuple[JobAttributes, int, float]:
        """(``a``, its group, its units of work per iteration), kept per attributes object (a policy keeps one per job)."""
        found = self._keyed.get(id(a))
        if found is None or found[0] is not a:
            if len(self._keyed) >= KEYED_MAX:
                self._keyed.clear()
            found = self._keyed[id(a)] = (a, self._group_index(a), self._scale(a))
        return found

    # ------------------------------------------------------------------ the distribution
    def scale_likelihood_rows(
        self,
        jobs: Sequence[JobLike],
        work: Sequence[float] | np.ndarray,
        finished: Sequence[bool] | np.ndarray,
        grid: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each job's group and its log-likelihood at every log scale of the 1-D ``grid`` (one row per job).

        The likelihood of a log scale is that of every job's work ``exp(log_scale)`` times the
        belief's: a finished job contributes the density of its total ``work`` (iterations), an
        unfinished one the probability of exceeding the ``work`` it has attained (censored; read from the
        group's interpolation table, within 3e-9 of the exact sum). A row depends on nothing but the
        job's group, work and whether it finished: rows computed apart are the same to the last bit.
        """
        _, _, groups, scales, v = self._prepare(list(jobs), work, "work")
        return groups, self.scale_likelihood_rows_at(groups, scales, v, finished, grid)

    def scale_likelihood_rows_at(
        self,
        groups: np.ndarray,
        scales: np.ndarray,
        work: Sequence[float] | np.ndarray,
        finished: Sequence[bool] | np.ndarray,
        grid: np.ndarray,
    ) -> np.ndarray:
        """The rows of :meth:`scale_likelihood_rows` for jobs given by their :meth:`slots` (the same to the last bit)."""
        v = _checked(np.asarray(work, dtype=float), "work")
        done = np.asarray(finished, dtype=bool)
        with np.errstate(divide="ignore"):
            u = np.log(v * scales)
        shifted = np.maximum(u[:, None] - grid[None, :], -700.0)
        if not done.any():  # running jobs only (every decision's case): no copy
            return self._log_survival(groups, shifted)
        rows = np.empty((len(v), grid.size))
        if not done.all():
            rows[~done] = self._log_survival(groups[~done], shifted[~done])
        for g in np.unique(groups[done]):
            mask = done & (groups == g)
            rows[mask] = self.groups[g].log_pdf(shifted[mask].ravel()).reshape(-1, grid.size)
        return rows

    def _log_survival(self, groups: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``log P(log S > u[r, c])`` in group ``groups[r]``: interpolated, exact past the end of the group's table."""
        tables, rows = self._tables_for("survival", groups, SurvivalTables.of)
        out, inside = tables.at(rows, u)
        if not inside.all():
            for r in np.flatnonzero(~inside.all(axis=1)):
                past = ~inside[r]
                out[r, past] = self.groups[groups[r]].log_survival(u[r, past])
        return out

    def _tables_for(
        self, kind: str, groups: np.ndarray, build: Callable[[tuple[WorkGroup, ...]], T]
    ) -> tuple[T, np.ndarray]:
        """The ``kind`` tables (made by ``build``) of every group read so far and of ``groups``; each row's table."""
        slot = self._tables.get(kind + " slots")
        if slot is None or (slot[groups] < 0).any():
            have = np.flatnonzero(slot >= 0) if slot is not None else np.zeros(0, dtype=np.int64)
            keep = np.union1d(have, groups)
            slot = np.full(len(self.groups), -1, dtype=np.int64)
            slot[keep] = np.arange(len(keep))
            self._tables[kind] = build(tuple(self.groups[g] for g in keep))
            self._tables[kind + " slots"] = slot
        return self._tables[kind], slot[groups]  # type: ignore[return-value]

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
        :mod:`agents.belief.adaptive`).
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
        refs = scales if self.unit == "request_seconds" else np.array([self.reference_time(j) for j in attrs])
        out = self._gittins_at(groups, scales, refs, a)
        return float(out[0]) if single else out

    def gittins_index_at(
        self, groups: np.ndarray, scales: np.ndarray, references: np.ndarray, attained: Sequence[float] | np.ndarray
    ) -> np.ndarray:
        """:meth:`gittins_index` of jobs given by their :meth:`slots` and reference times (the same to the last bit)."""
        a = _checked(np.asarray(attained, dtype=float), "attained")
        return self._gittins_at(groups, scales, scales if self.unit == "request_seconds" else references, a)

    def _gittins_at(self, groups: np.ndarray, scales: np.ndarray, refs: np.ndarray, a: np.ndarray) -> np.ndarray:
        tables, rows = self._tables_for("gittins", groups, _gittins_tables)
        return tables.at(rows, a * scales) * scales / refs

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


def _checked(values: np.ndarray, what: str) -> np.ndarray:
    if not (np.isfinite(values).all() and (values >= 0).all()):
        raise ValueError(f"{what} must be finite and >= 0")
    return values


def _gittins_tables(groups: tuple[WorkGroup, ...]) -> GittinsTables:
    return GittinsTables.of(tuple(g.gittins_table() for g in groups))
