"""JobQueue: the waiting jobs in submission order, indexed by requested GPU type and by configuration."""

from __future__ import annotations

from sortedcontainers import SortedList

from arena_gym.types import JobSpec, ModelRef

#: A job configuration: the (model, global batch) pair performance models are keyed by.
Config = tuple[ModelRef, int]


class JobQueue:
    """Keys ``(submit time, job id)`` of waiting jobs: FIFO order, ties by job id.

    The same order is kept per requested GPU type (None: no type requested) and per
    configuration, so a policy can read one type's or one configuration's queue without
    walking the others. Every operation is O(log n).
    """

    def __init__(self) -> None:
        self.keys = SortedList()
        self.by_type: dict[str | None, SortedList] = {}
        self.by_config: dict[Config, SortedList] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def copy(self) -> JobQueue:
        """An independent copy of the queue and its indexes."""
        new = JobQueue.__new__(JobQueue)
        new.keys = self.keys.copy()
        new.by_type = {t: keys.copy() for t, keys in self.by_type.items()}
        new.by_config = {c: keys.copy() for c, keys in self.by_config.items()}
        return new

    def __contains__(self, spec: JobSpec) -> bool:
        return (spec.submit_time, spec.job_id) in self.keys

    def add(self, spec: JobSpec) -> None:
        """Queue a job."""
        key = (spec.submit_time, spec.job_id)
        self.keys.add(key)
        self.by_type.setdefault(spec.requested_gpu_type, SortedList()).add(key)
        self.by_config.setdefault((spec.model, spec.global_batch), SortedList()).add(key)

    def remove(self, spec: JobSpec) -> None:
        """Take a queued job out (ValueError if it is not queued)."""
        key = (spec.submit_time, spec.job_id)
        self.keys.remove(key)
        self.by_type[spec.requested_gpu_type].remove(key)
        self.by_config[(spec.model, spec.global_batch)].remove(key)

    def check(self) -> None:
        """AssertionError unless every index holds exactly the queue's keys."""
        for index in (self.by_type, self.by_config):
            assert sorted(k for keys in index.values() for k in keys) == list(self.keys), "queue indexes disagree"
