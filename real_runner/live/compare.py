"""Sim vs live: the same jobs and policy simulated on the testbed's cluster, compared job by job (no torch).

The simulation runs :class:`arena_gym.sim.SimBackend` on the testbed's one-type cluster with a
performance model (the estimator, a measured table or a profile of the testbed) as its truth, and
charges every (re)start the reconfiguration overhead measured live (the median time from an
ALLOCATE to the RUN of the generation it launched), so the comparison isolates what the
performance model and the scheduling dynamics get right. Both event logs go through the same
metrics code.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from arena_gym.loop import run_episode
from arena_gym.metrics import job_outcomes
from arena_gym.protocols import Policy
from arena_gym.records import EpisodeRecord, EventKind
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import ClusterSpec, JobSpec, OverheadModel, PerfModel


def measured_overheads(record: EpisodeRecord) -> list[float]:
    """Seconds from each ALLOCATE (or FAIL) to the next RUN of the same job: the reconfigurations paid live."""
    since: dict[str, float] = {}
    out = []
    for e in record.events:
        if e.kind in (EventKind.ALLOCATE, EventKind.FAIL):
            since[e.job_id] = e.time
        elif e.kind is EventKind.RUN and e.job_id in since:
            out.append(e.time - since.pop(e.job_id))
        elif e.kind in (EventKind.PREEMPT, EventKind.FINISH):
            since.pop(e.job_id, None)
    return out


def simulate_same(
    jobs: Sequence[JobSpec],
    policy: Policy,
    cluster: ClusterSpec,
    perf: PerfModel,
    overhead_s: float,
    round_s: float | None = None,
) -> EpisodeRecord:
    """Run ``policy`` on the simulator with the same jobs, charging ``overhead_s`` per (re)start."""
    config = SimConfig(overhead=OverheadModel(ckpt_resume_s=overhead_s), round_s=round_s, overhead_class="none")
    return run_episode(SimBackend(cluster, perf, perf, config), policy, jobs)


@dataclass(frozen=True)
class SimVsLive:
    """Per-job JCTs live and simulated, and the average-JCT error (simulated minus live, relative to live)."""

    jobs: pd.DataFrame
    avg_jct_live_s: float
    avg_jct_sim_s: float
    overhead_s: float

    @property
    def avg_jct_error(self) -> float:
        """(simulated - live) / live average JCT over the jobs finished in both."""
        return (self.avg_jct_sim_s - self.avg_jct_live_s) / self.avg_jct_live_s if self.avg_jct_live_s else math.nan

    def summary(self) -> dict[str, float]:
        """The figures for ``sim_vs_live.json``."""
        errors = self.jobs["jct_error"].abs()
        return {
            "avg_jct_live_s": self.avg_jct_live_s,
            "avg_jct_sim_s": self.avg_jct_sim_s,
            "avg_jct_error": self.avg_jct_error,
            "median_abs_job_jct_error": float(errors.median()),
            "max_abs_job_jct_error": float(errors.max()),
            "jobs_compared": float(len(self.jobs)),
            "sim_overhead_s": self.overhead_s,
        }


def compare(live: EpisodeRecord, sim: EpisodeRecord, overhead_s: float) -> SimVsLive:
    """Join the two runs' job outcomes: one row per job finished in both."""
    specs = {j.job_id: j for j in live.jobs}
    live_jct = {o.job_id: o.jct for o in job_outcomes(live) if o.jct is not None}
    sim_jct = {o.job_id: o.jct for o in job_outcomes(sim) if o.jct is not None}
    rows = []
    for job_id in sorted(set(live_jct) & set(sim_jct)):
        spec = specs[job_id]
        rows.append(
            {
                "job_id": job_id,
                "model": spec.model.name,
                "global_batch": spec.global_batch,
                "iterations": spec.iterations,
                "requested_gpus": spec.requested_gpus or 0,
                "live_jct_s": live_jct[job_id],
                "sim_jct_s": sim_jct[job_id],
                "jct_error": (sim_jct[job_id] - live_jct[job_id]) / live_jct[job_id],
            }
        )
    frame = pd.DataFrame(
        rows,
        columns=[
            "job_id",
            "model",
            "global_batch",
            "iterations",
            "requested_gpus",
            "live_jct_s",
            "sim_jct_s",
            "jct_error",
        ],
    )
    avg = lambda col: float(frame[col].mean()) if len(frame) else math.nan  # noqa: E731
    return SimVsLive(frame, avg("live_jct_s"), avg("sim_jct_s"), overhead_s)


def median_overhead(record: EpisodeRecord) -> float:
    """The median live reconfiguration overhead (0 when none was measured)."""
    values = measured_overheads(record)
    return statistics.median(values) if values else 0.0
