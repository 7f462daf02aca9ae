"""The operation log: every change made to a :class:`~arena_gym.core.ClusterState`, as frozen records.

The state appends one record per operation it performs (both backends, so every episode can be
replayed): :class:`Submit`, :class:`Commit` (a validated decision's preemptions and allocations
with the overhead of each allocation: a decision is valid as a whole, not always one job at a
time), :class:`Run`, :class:`Progress`, :class:`Fail`, :class:`Finish` and :class:`Close`. Each
record applies itself to a state (:meth:`Submit.apply` ...); :func:`replay` applies a log to a
state loaded with the same workload and rebuilds its job states and event log exactly. The live
backend's journal stores the same records (``kind`` names them there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from arena_gym.types import Allocation, Decision, JobId

if TYPE_CHECKING:
    from arena_gym.core.state import ClusterState


@dataclass(frozen=True, slots=True)
class Submit:
    """The job entered the queue at ``t``."""

    kind: ClassVar[str] = "submit"
    t: float
    job_id: JobId

    def apply(self, state: ClusterState) -> None:
        """Do it again on ``state``."""
        state.submit(self.job_id, self.t)


@dataclass(frozen=True, slots=True)
class Commit:
    """A validated decision committed at ``t``: its preemptions, then its allocations, each with its overhead."""

    kind: ClassVar[str] = "commit"
    t: float
    preemptions: tuple[JobId, ...]
    allocations: tuple[tuple[JobId, Allocation], ...]
    overheads: tuple[float, ...]

    def apply(self, state: ClusterState) -> None:
        """Validate and commit the same decision on ``state``, with the same overheads.

        A job appears at most once in a decision, so its overhead is found by its id.
        """
        overhead = dict(zip((job_id for job_id, _ in self.allocations), self.overheads, strict=True))
        state.apply(Decision(self.allocations, self.preemptions), self.t, lambda job_id, _: overhead[job_id])


@dataclass(frozen=True, slots=True)
class Run:
    """The job made progress from ``t``; ``iter_time`` replaced the expected seconds per iteration (None: kept)."""

    kind: ClassVar[str] = "run"
    t: float
    job_id: JobId
    iter_time: float | None = None

    def apply(self, state: ClusterState) -> None:
        """Do it again on ``state``."""
        state.start_running(self.job_id, self.t, self.iter_time)


@dataclass(frozen=True, slots=True)
class Progress:
    """A measured report of a running job at ``t``: iterations done and seconds per iteration."""

    kind: ClassVar[str] = "progress"
    t: float
    job_id: JobId
    iterations_done: float
    iter_time: float

    def apply(self, state: ClusterState) -> None:
        """Do it again on ``state``."""
        state.update_progress(self.job_id, self.t, self.iterations_done, self.iter_time)


@dataclass(frozen=True, slots=True)
class Fail:
    """The job's processes failed at ``t``; it resumes from ``iterations_done`` (``reason``: why, for readers)."""

    kind: ClassVar[str] = "fail"
    t: float
    job_id: JobId
    iterations_done: float
    reason: str = ""

    def apply(self, state: ClusterState) -> None:
        """Do it again on ``state``."""
        state.fail(self.job_id, self.t, self.iterations_done, self.reason)


@dataclass(frozen=True, slots=True)
class Finish:
    """The job completed at ``t`` and released its GPUs."""

    kind: ClassVar[str] = "finish"
    t: float
    job_id: JobId

    def apply(self, state: ClusterState) -> None:
        """Do it again on ``state``."""
        state.finish(self.job_id, self.t)


@dataclass(frozen=True, slots=True)
class Close:
    """The episode ended at ``t``."""

    kind: ClassVar[str] = "close"
    t: float

    def apply(self, state: ClusterState) -> None:
        """Do it again on ``state``."""
        state.close(self.t)


#: One record of the operation log.
Op: TypeAlias = Submit | Commit | Run | Progress | Fail | Finish | Close

#: The record types by ``kind``.
OP_KINDS: dict[str, type[Op]] = {cls.kind: cls for cls in (Submit, Commit, Run, Progress, Fail, Finish, Close)}


def replay(ops: Iterable[Op], state: ClusterState) -> None:
    """Apply ``ops`` in order to ``state`` (loaded with the workload they were logged on, or restored as it was)."""
    for op in ops:
        op.apply(state)
