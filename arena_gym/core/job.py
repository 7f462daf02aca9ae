"""JobState: the mutable record of one job inside the cluster core (policies see frozen JobViews)."""

from __future__ import annotations

from arena_gym.types import Allocation, JobSpec, JobStatus, JobView


class JobState:
    """One job's lifecycle state, progress marks and counters.

    Progress is linear between marks: ``settle(t)`` credits iterations (running) or queueing
    time (pending) up to ``t`` and moves the mark there. ``version`` changes whenever an
    expected future of the job (its start of progress, its completion) becomes void, so a
    backend can recognise outdated scheduled events.
    """

    __slots__ = (
        "spec",
        "status",
        "submitted",
        "alloc",
        "done",
        "mark",
        "rate",
        "samples",
        "run_start",
        "version",
        "first_start",
        "attained",
        "queued",
        "reconfigs",
        "preempts",
        "failures",
        "finish",
        "view",
    )

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.status = JobStatus.PENDING
        self.submitted = False
        self.alloc: Allocation | None = None
        self.done = 0.0
        self.mark = spec.submit_time
        self.rate = 0.0  # iterations per second of the current allocation
        self.samples = 0.0  # samples per second of the current allocation
        self.run_start: float | None = None
        self.version = 0
        self.first_start: float | None = None
        self.attained = 0.0
        self.queued = 0.0
        self.reconfigs = 0
        self.preempts = 0
        self.failures = 0
        self.finish: float | None = None
        self.view: JobView | None = None

    def copy(self) -> JobState:
        """An independent copy (the spec and the allocation are frozen and shared)."""
        new = JobState.__new__(JobState)
        for name in JobState.__slots__:
            setattr(new, name, getattr(self, name))
        return new

    @property
    def queued_now(self) -> bool:
        """Whether the job waits in the queue (submitted, holding no GPUs, not finished)."""
        return self.submitted and self.status is JobStatus.PENDING

    def iterations_at(self, t: float) -> float:
        """Iterations completed by ``t`` without moving the mark."""
        if self.status is JobStatus.RUNNING:
            start = max(self.mark, self.run_start if self.run_start is not None else self.mark)
            return min(float(self.spec.iterations), self.done + self.rate * max(0.0, t - start))
        return self.done

    def settle(self, t: float) -> None:
        """Credit progress (or queueing) up to time ``t`` and move the mark there."""
        if self.status is JobStatus.RUNNING:
            dt = t - max(self.mark, self.run_start if self.run_start is not None else self.mark)
            if dt > 0:
                self.done = min(float(self.spec.iterations), self.done + self.rate * dt)
                self.attained += self.alloc.num_gpus * dt  # type: ignore[union-attr]
        elif self.status is JobStatus.PENDING:
            self.queued += t - self.mark
        self.mark = t
        self.view = None

    def frozen(self) -> JobView:
        """The job's frozen view (cached until the job next changes)."""
        if self.view is None:
            self.view = JobView(
                spec=self.spec,
                status=self.status,
                allocation=self.alloc,
                done_at_mark=self.done,
                mark_time=self.mark,
                rate=self.rate if self.status is JobStatus.RUNNING else 0.0,
                run_start=self.run_start,
                first_start=self.first_start,
                attained_gpu_s=self.attained,
                queued_s_at_mark=self.queued,
                reconfigurations=self.reconfigs,
                preemptions=self.preempts,
            )
        return self.view
