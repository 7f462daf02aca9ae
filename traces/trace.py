"""The canonical in-memory trace: a validated, time-ordered tuple of :class:`JobSpec`.

Time origin: every loader and generator rebases times so that the first job arrives at
``t = 0``; the amount subtracted is kept in :attr:`Trace.time_offset_s` (add it back to get
the source file's own clock). :meth:`Trace.window` and :meth:`Trace.head` keep times as they
are; call :meth:`Trace.shift_to_zero` to rebase a sub-trace.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from arena_gym.types import JobSpec


def _sort_key(job: JobSpec) -> tuple[float, str]:
    return (job.submit_time, str(job.job_id))


@dataclass(frozen=True)
class Trace:
    """A workload: jobs sorted by (submit time, job id), job ids unique.

    ``source`` says where the jobs came from (format and file, or generator and settings);
    ``time_offset_s`` is what was subtracted from the source's clock when rebasing. Each job's
    ``deadline_source`` says where its deadline comes from; every transform keeps it.
    """

    name: str
    jobs: tuple[JobSpec, ...]
    source: str
    time_offset_s: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.jobs, tuple):
            object.__setattr__(self, "jobs", tuple(self.jobs))
        if not math.isfinite(self.time_offset_s):
            raise ValueError(f"trace {self.name!r}: time offset must be finite, got {self.time_offset_s}")
        seen: set[str] = set()
        prev: tuple[float, str] | None = None
        for job in self.jobs:
            if not isinstance(job, JobSpec):
                raise ValueError(f"trace {self.name!r}: jobs must be JobSpec, got {type(job).__name__}")
            if job.job_id in seen:
                raise ValueError(f"trace {self.name!r}: duplicate job id {job.job_id!r}")
            seen.add(job.job_id)
            key = _sort_key(job)
            if prev is not None and key < prev:
                raise ValueError(
                    f"trace {self.name!r}: jobs not sorted by (submit time, job id) at {job.job_id!r}; "
                    "use Trace.from_jobs to sort"
                )
            prev = key

    @classmethod
    def from_jobs(cls, name: str, jobs: Iterable[JobSpec], source: str, time_offset_s: float = 0.0) -> Trace:
        """Build a trace from jobs in any order (sorted here)."""
        return cls(name, tuple(sorted(jobs, key=_sort_key)), source, time_offset_s)

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[JobSpec]:
        return iter(self.jobs)

    @property
    def span_s(self) -> float:
        """Seconds between the first and the last submission (0 for < 2 jobs)."""
        return self.jobs[-1].submit_time - self.jobs[0].submit_time if self.jobs else 0.0

    @property
    def deadline_sources(self) -> str:
        """Where the deadlines come from: ``"none"`` (no job has one), ``"declared"``, ``"derived"`` or ``"mixed"``."""
        found = {j.deadline_source for j in self.jobs if j.deadline is not None}
        if not found:
            return "none"
        return "mixed" if len(found) > 1 else found.pop().value

    # -- sub-traces and transforms -------------------------------------------------------

    def window(self, start_s: float, end_s: float = math.inf) -> Trace:
        """Jobs submitted in ``[start_s, end_s)``, times unchanged."""
        if math.isnan(start_s) or math.isnan(end_s) or end_s < start_s:
            raise ValueError(f"window [{start_s}, {end_s}) is empty or invalid: need start <= end")
        jobs = tuple(j for j in self.jobs if start_s <= j.submit_time < end_s)
        return dataclasses.replace(self, name=f"{self.name}[{start_s:g}:{end_s:g}]", jobs=jobs)

    def head(self, n: int) -> Trace:
        """The first ``n`` jobs."""
        if n < 0:
            raise ValueError(f"head(n) needs n >= 0, got {n}")
        return dataclasses.replace(self, name=f"{self.name}[:{n}]", jobs=self.jobs[:n])

    def scale_load(self, factor: float) -> Trace:
        """Compress inter-arrival times by ``factor`` (2 = twice the arrival rate).

        The first submission stays where it is; each deadline moves with its job, so the
        time budget ``deadline - submit`` is unchanged.
        """
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"scale_load factor must be finite and > 0, got {factor}")
        if not self.jobs:
            return self
        t0 = self.jobs[0].submit_time
        jobs = []
        for job in self.jobs:
            new = t0 + (job.submit_time - t0) / factor
            deadline = None if job.deadline is None else job.deadline + (new - job.submit_time)
            jobs.append(dataclasses.replace(job, submit_time=new, deadline=deadline))
        # re-sorted: rounding may turn two close submit times into a tie, which the job id then orders
        return dataclasses.replace(self, name=f"{self.name}x{factor:g}", jobs=tuple(sorted(jobs, key=_sort_key)))

    def shift_to_zero(self) -> Trace:
        """Subtract the first submit time from every time (and add it to ``time_offset_s``)."""
        if not self.jobs or self.jobs[0].submit_time == 0:
            return self
        t0 = self.jobs[0].submit_time
        jobs = tuple(
            dataclasses.replace(
                j, submit_time=j.submit_time - t0, deadline=None if j.deadline is None else j.deadline - t0
            )
            for j in self.jobs
        )
        # re-sorted: the subtraction may round two close submit times into a tie
        return dataclasses.replace(self, jobs=tuple(sorted(jobs, key=_sort_key)), time_offset_s=self.time_offset_s + t0)

    # -- description ---------------------------------------------------------------------

    def summary(self) -> dict:
        """Plain-data description: size, span, arrival rate, request and model mixes, deadlines, iterations."""
        jobs = self.jobs
        iters = np.array([j.iterations for j in jobs], dtype=float)
        quantiles = (0.05, 0.25, 0.5, 0.75, 0.95)
        span = self.span_s
        return {
            "name": self.name,
            "source": self.source,
            "jobs": len(jobs),
            "time_offset_s": self.time_offset_s,
            "first_submit_s": jobs[0].submit_time if jobs else None,
            "span_s": span,
            "span_h": span / 3600.0,
            "arrivals_per_h": (len(jobs) - 1) / (span / 3600.0) if span > 0 else None,
            "families": _mix(j.model.family for j in jobs),
            "models": _mix(j.model.name for j in jobs),
            "global_batches": _mix(j.global_batch for j in jobs),
            "gpu_types": _mix(j.requested_gpu_type or "any" for j in jobs),
            "gpu_counts": _mix(j.requested_gpus or 0 for j in jobs),
            "total_requested_gpus": int(sum(j.requested_gpus or 0 for j in jobs)),
            "with_deadline": sum(j.deadline is not None for j in jobs),
            "deadline_sources": self.deadline_sources,
            "iterations": {
                "mean": float(iters.mean()) if len(iters) else None,
                "min": float(iters.min()) if len(iters) else None,
                "max": float(iters.max()) if len(iters) else None,
                **{f"p{int(q * 100)}": (float(np.quantile(iters, q)) if len(iters) else None) for q in quantiles},
            },
        }


def _mix(values: Iterable) -> dict:
    """Counts per value, most common first (ties in value order)."""
    counts = Counter(values)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))))
