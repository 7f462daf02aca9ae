"""What a non-clairvoyant policy observes of the cluster: job records computed for it from what a real scheduler sees.

An :class:`Observer` holds, for one viewer, a :class:`ShownJob` per submitted, unfinished job:
its view with a :class:`~arena_gym.types.HiddenSpec` (no true length, no deadline derived
from it), in the state's allocation order for the jobs holding GPUs. It holds no job state,
no reference to the cluster state and nothing about jobs not yet submitted, so nothing
reachable from an observed snapshot by attribute access leads to the truth. The state keeps
it up to date from its event log (every change of a job logs an event naming the job): O(jobs
changed) per decision point.
"""

from __future__ import annotations

from arena_gym.records import Event, EventKind
from arena_gym.types import Allocation, HiddenSpec, JobId, JobSpec, JobStatus, JobView


class ShownJob:
    """One job as observed: its hidden view (immutable; replaced when the job changes)."""

    __slots__ = ("view",)

    def __init__(self, view: JobView) -> None:
        self.view = view

    @property
    def spec(self) -> JobSpec:
        """The hidden spec."""
        return self.view.spec

    @property
    def alloc(self) -> Allocation | None:
        """The allocation it holds (None while queued)."""
        return self.view.allocation

    @property
    def queued_now(self) -> bool:
        """Whether it waits in the queue (every observed job is submitted and unfinished)."""
        return self.view.status is JobStatus.PENDING

    def frozen(self) -> JobView:
        """Its hidden view."""
        return self.view


class Observer:
    """The observed records of one viewer's jobs; ``seen`` events of the state's log are taken into account."""

    __slots__ = ("viewer", "specs", "jobs", "active", "seen")

    def __init__(self, viewer: str, specs: dict[JobId, HiddenSpec] | None = None) -> None:
        self.viewer = viewer
        self.specs: dict[JobId, HiddenSpec] = {} if specs is None else specs
        self.jobs: dict[JobId, ShownJob] = {}
        self.active: dict[JobId, ShownJob] = {}
        self.seen = 0

    def copy(self) -> Observer:
        """An independent copy (records are immutable and shared; so is the memo of hidden specs)."""
        new = Observer(self.viewer, self.specs)
        new.jobs, new.active, new.seen = dict(self.jobs), dict(self.active), self.seen
        return new

    def hidden(self, spec: JobSpec) -> HiddenSpec:
        """The hidden form of ``spec`` (the same object at every decision point)."""
        hidden = self.specs.get(spec.job_id)
        if hidden is None:
            hidden = self.specs[spec.job_id] = HiddenSpec.of(spec, self.viewer)
        return hidden

    def follow(self, events: list[Event], views: dict[JobId, JobView]) -> None:
        """Take the events logged since the last call into account; ``views[j]`` is each named job's view now.

        The allocation order follows the events exactly as the state's does: an ALLOCATE moves
        the job to the end, a PREEMPT or FINISH takes it out.
        """
        active = self.active
        for event in events:
            if event.kind is EventKind.ALLOCATE:
                active.pop(event.job_id, None)
                active[event.job_id] = _PLACEHOLDER
            elif event.kind is EventKind.PREEMPT or event.kind is EventKind.FINISH:
                active.pop(event.job_id, None)
        self.seen += len(events)
        for job_id, view in views.items():
            if view.status is JobStatus.FINISHED:
                self.jobs.pop(job_id, None)
                continue
            shown = self.jobs[job_id] = ShownJob(self._hide(view))
            if job_id in active:
                active[job_id] = shown

    def rebuild(self, views: list[JobView], active: list[JobId], seen: int) -> None:
        """Start over from the views of every submitted, unfinished job and the allocation order."""
        self.jobs = {v.job_id: ShownJob(self._hide(v)) for v in views}
        self.active = {j: self.jobs[j] for j in active}
        self.seen = seen

    def _hide(self, view: JobView) -> JobView:
        return JobView(
            self.hidden(view.spec),
            view.status,
            view.allocation,
            view.done_at_mark,
            view.mark_time,
            view.rate,
            view.run_start,
            view.first_start,
            view.attained_gpu_s,
            view.queued_s_at_mark,
            view.reconfigurations,
            view.preemptions,
        )


_PLACEHOLDER = ShownJob.__new__(ShownJob)  # an active slot whose record is filled in the same call
