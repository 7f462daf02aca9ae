"""What a deployment is doing, for its status line: jobs by state and a line per submitted, unfinished job."""

from __future__ import annotations

import statistics
from collections.abc import Container, Mapping
from dataclasses import dataclass

from arena_gym.core import ClusterState
from arena_gym.types import JobId, JobStatus
from real_runner.live.generations import LiveJob


@dataclass(frozen=True)
class JobLine:
    """One job in a status report: state, progress, measured rate, devices and generation."""

    job_id: str
    status: str
    step: int
    target: int
    steps_per_s: float
    devices: str
    generation: int
    pids: tuple[int, ...]


@dataclass(frozen=True)
class LiveStatus:
    """What the deployment is doing: jobs by state and a line per submitted, unfinished job."""

    t: float
    running: int
    reconfiguring: int
    queued: int
    finished: int
    total: int
    jobs: tuple[JobLine, ...]


def live_status(
    t: float, state: ClusterState, jobs: Mapping[JobId, LiveJob], submitted: Container[JobId]
) -> LiveStatus:
    """The status at ``t``: what runs, waits and is done, with each submitted unfinished job's progress and rate."""
    lines = []
    counts = dict.fromkeys(JobStatus, 0)
    for job_id, job in jobs.items():
        st = state.status(job_id)
        counts[st] += 1
        if st is JobStatus.FINISHED or job_id not in submitted:
            continue
        gen = job.current
        rate = 1.0 / statistics.median(gen.iter_times) if gen and gen.iter_times and st is JobStatus.RUNNING else 0.0
        devices = ",".join(f"{s.node}:{s.device}" for s in (gen.slots if gen else ()))
        lines.append(
            JobLine(
                job_id,
                st.value,
                job.step,
                job.spec.iterations,
                rate,
                devices,
                gen.number if gen else 0,
                gen.handle.pids if gen and gen.handle else (),
            )
        )
    return LiveStatus(
        t,
        counts[JobStatus.RUNNING],
        counts[JobStatus.RECONFIGURING],
        state.queued,
        counts[JobStatus.FINISHED],
        len(jobs),
        tuple(lines),
    )
