"""The event log and the episode record that metrics, tables and plots are computed from."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from arena_gym.types import ClusterSpec, JobId, JobSpec


class EventKind(enum.Enum):
    """What happened to a job.

    SUBMIT: the job entered the queue. ALLOCATE: it took (new) GPUs and starts paying its
    reconfiguration overhead. RUN: overhead paid, it makes progress at ``samples_per_s``.
    PROGRESS: a measured rate of a running job (live backends): it now runs at
    ``samples_per_s``. FAIL: its processes failed; it keeps its GPUs, falls back to its last
    checkpoint and makes no progress until it runs again (a RUN follows the relaunch).
    PREEMPT: it gave its GPUs back and re-queued. FINISH: it completed and released its GPUs.
    """

    SUBMIT = "submit"
    ALLOCATE = "allocate"
    RUN = "run"
    PROGRESS = "progress"
    FAIL = "fail"
    PREEMPT = "preempt"
    FINISH = "finish"


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the event log."""

    time: float
    kind: EventKind
    job_id: JobId
    gpu_type: str = ""
    num_gpus: int = 0
    shape: str = ""
    samples_per_s: float = 0.0
    overhead_s: float = 0.0


@dataclass(frozen=True)
class EpisodeRecord:
    """Everything an episode produced: the workload, the event log, and loop statistics.

    ``clairvoyant`` is the policy's information set: whether it saw the jobs' true lengths.
    """

    policy: str
    cluster: ClusterSpec
    jobs: tuple[JobSpec, ...]
    events: tuple[Event, ...]
    start_time: float
    end_time: float
    horizon: float
    decisions: int
    decide_wall_s: float
    clairvoyant: bool = False

    def job(self, job_id: JobId) -> JobSpec:
        """The spec of one job."""
        for spec in self.jobs:
            if spec.job_id == job_id:
                return spec
        raise KeyError(job_id)
