"""Lazy JobViews over the live cluster state: a snapshot costs O(1), a view is built when read.

Both classes are valid until the state next changes (its ``epoch`` moves); any later access
raises ``RuntimeError`` rather than showing a policy a mix of two moments. They read jobs
through :class:`HeldJob`: the state's own job records (the truth, for clairvoyant policies) or
an observer's records built from what a real scheduler observes
(:mod:`arena_gym.core.observed`); the views hold nothing else but the queue's keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol, overload

from sortedcontainers import SortedList

from arena_gym.core.queue import Config, JobQueue
from arena_gym.types import Allocation, JobId, JobSpec, JobView, JobViews, Placement


class HeldJob(Protocol):
    """What the views read of a job: a :class:`~arena_gym.core.job.JobState`, or its observed form."""

    @property
    def spec(self) -> JobSpec:
        """The job's spec."""

    @property
    def alloc(self) -> Allocation | None:
        """What it holds (None while queued)."""

    @property
    def queued_now(self) -> bool:
        """Whether it waits in the queue."""

    def frozen(self) -> JobView:
        """The job's view now."""


class Epoch:
    """A counter that moves on every change of a state; views hold it, not the state itself."""

    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        self.value = value


class _LiveViews(JobViews):
    """Common part: the staleness check against the state's epoch."""

    __slots__ = ("_epoch_of", "_epoch")

    def __init__(self, epoch_of: Epoch) -> None:
        super().__init__()
        self._epoch_of = epoch_of
        self._epoch = epoch_of.value

    def _check(self) -> None:
        if self._epoch_of.value != self._epoch:
            raise RuntimeError(
                "stale snapshot: the backend has changed since this snapshot was taken "
                "(copy its job views with tuple(...) to keep them)"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} jobs)"


class QueueViews(_LiveViews):
    """Waiting jobs in submission order (ties by job id), over sorted ``(submit time, job id)`` keys.

    With the whole :class:`JobQueue` as ``index``, :meth:`requesting` and :meth:`by_config`
    answer from its per-type and per-configuration orders.
    """

    __slots__ = ("_keys", "_jobs", "_index", "_of_type")

    def __init__(
        self,
        epoch_of: Epoch,
        keys: SortedList,
        jobs: Mapping[JobId, HeldJob],
        index: JobQueue | None = None,
    ) -> None:
        super().__init__(epoch_of)
        self._keys = keys
        self._jobs = jobs
        self._index = index
        self._of_type: dict[str | None, QueueViews] = {}

    def __len__(self) -> int:
        self._check()
        return len(self._keys)

    @overload
    def __getitem__(self, index: int) -> JobView: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[JobView, ...]: ...

    def __getitem__(self, index: int | slice) -> JobView | tuple[JobView, ...]:
        self._check()
        jobs = self._jobs
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._keys))
            keys = self._keys.islice(start, stop) if step == 1 else self._keys[index]
            return tuple(jobs[k[1]].frozen() for k in keys)
        return jobs[self._keys[index][1]].frozen()

    def __iter__(self) -> Iterator[JobView]:
        self._check()
        jobs = self._jobs
        for key in self._keys:
            self._check()
            yield jobs[key[1]].frozen()

    def __reversed__(self) -> Iterator[JobView]:
        self._check()
        jobs = self._jobs
        for key in reversed(self._keys):
            self._check()
            yield jobs[key[1]].frozen()

    def get(self, job_id: str) -> JobView | None:
        """The view of ``job_id`` if it is in this queue, else None."""
        self._check()
        job = self._jobs.get(JobId(job_id))
        if job is None or not job.queued_now or (job.spec.submit_time, job.spec.job_id) not in self._keys:
            return None
        return job.frozen()

    def placements(self) -> dict[JobId, Placement]:
        """Queued jobs hold no GPUs: an empty dict, without reading the queue."""
        self._check()
        return {}

    def requesting(self, gpu_type: str | None) -> Sequence[JobView]:
        """The queued jobs that requested ``gpu_type`` (None: no type), in queue order, read lazily."""
        self._check()
        if self._index is None:
            return super().requesting(gpu_type)
        views = self._of_type.get(gpu_type)
        if views is None:
            keys = self._index.by_type.get(gpu_type)
            views = self._of_type[gpu_type] = QueueViews(
                self._epoch_of, keys if keys is not None else SortedList(), self._jobs
            )
        return views

    def by_config(self) -> Mapping[Config, Sequence[JobView]]:
        """The queued jobs grouped by (model, global batch), each group in queue order, read lazily."""
        self._check()
        if self._index is None:
            return super().by_config()
        return {
            config: QueueViews(self._epoch_of, keys, self._jobs)
            for config, keys in self._index.by_config.items()
            if keys
        }


class ActiveViews(_LiveViews):
    """Jobs holding GPUs (reconfiguring or running), in the order they took their allocation."""

    __slots__ = ("_active", "_ids")

    def __init__(self, epoch_of: Epoch, active: Mapping[JobId, HeldJob]) -> None:
        super().__init__(epoch_of)
        self._active = active
        self._ids: tuple[JobId, ...] | None = None

    def __len__(self) -> int:
        self._check()
        return len(self._active)

    @overload
    def __getitem__(self, index: int) -> JobView: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[JobView, ...]: ...

    def __getitem__(self, index: int | slice) -> JobView | tuple[JobView, ...]:
        self._check()
        if self._ids is None:
            self._ids = tuple(self._active)
        active = self._active
        if isinstance(index, slice):
            return tuple(active[j].frozen() for j in self._ids[index])
        return active[self._ids[index]].frozen()

    def __iter__(self) -> Iterator[JobView]:
        self._check()
        for job in self._active.values():
            yield job.frozen()

    def placements(self) -> dict[JobId, Placement]:
        """Job id -> placement of every job holding GPUs, in this order, read from the jobs' state (no views built)."""
        self._check()
        return {j: job.alloc.placement for j, job in self._active.items() if job.alloc is not None}

    def get(self, job_id: str) -> JobView | None:
        """The view of ``job_id`` if it holds GPUs, else None."""
        self._check()
        job = self._active.get(JobId(job_id))
        return job.frozen() if job is not None else None
