"""Reference iteration times: the seconds per iteration of each known job configuration at its requested shape."""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.belief.arrivals import JobAttributes
from arena_gym.types import GpuType, JobSpec, JobView, ModelRef

JobLike = JobAttributes | JobView | JobSpec


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

    def knows(self, job: JobLike) -> bool:
        """Whether :meth:`time` has a reference iteration time for ``job``."""
        try:
            self.time(job)
        except ValueError:
            return False
        return True

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
