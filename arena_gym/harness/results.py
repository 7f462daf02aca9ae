"""Results directories: resolved config with seed and code version, metrics, CSVs, plots, leaderboards.

A run's directory is written without pandas (the CSVs with the csv module), so a simulation
that draws no plots imports neither pandas nor matplotlib; the frames and leaderboards use it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from arena_gym.harness.experiment import RunResult
from arena_gym.metrics import (
    JobOutcome,
    LogReading,
    Timeline,
    finished_jcts,
    job_outcomes,
    padded_mean_jcts,
    read_once,
    timeline,
)
from arena_gym.outputs import code_version, write_json, write_rows
from arena_gym.outputs import write_csv as write_csv  # re-exported: the writers moved to arena_gym.outputs
from arena_gym.records import EpisodeRecord
from arena_gym.registry import own

if TYPE_CHECKING:
    import pandas as pd

#: Columns of a run's ``jobs.csv``.
JOB_COLUMNS = (
    "job_id",
    "model",
    "global_batch",
    "iterations",
    "requested_gpu_type",
    "requested_gpus",
    "submit_s",
    "first_start_s",
    "finish_s",
    "jct_s",
    "queued_s",
    "reconfigurations",
    "preemptions",
    "last_gpu_type",
    "last_num_gpus",
    "deadline_s",
    "deadline_met",
)
#: The per-run metric columns of ``compare``'s leaderboard and ``evaluate``'s per-workload table, in order
#: (metric keys of ``compute_metrics``, and ``jobs_unplaceable_type``: jobs requesting a GPU type the cluster lacks).
METRIC_COLUMNS = (
    "avg_jct_s",
    "median_jct_s",
    "p95_jct_s",
    "avg_queue_s",
    "makespan_s",
    "jobs_finished",
    "jobs_total",
    "gpu_util",
    "reconfigurations",
    "preemptions",
    "avg_throughput",
    "peak_throughput",
    "jobs_submitted",
    "jobs_unplaceable_type",
    "deadline_met_ratio",
    "sched_ms_per_decision",
)
#: The padded average JCT of a run among the runs of its workload (:func:`arena_gym.metrics.padded_mean_jcts`).
PADDED_COLUMN = "padded_jct_s"


def metric_row(metrics: Mapping[str, float]) -> dict[str, float]:
    """A run's :data:`METRIC_COLUMNS`, NaN where ``metrics`` lacks one."""
    return {k: metrics.get(k, math.nan) for k in METRIC_COLUMNS}


def jobs_rows(record: EpisodeRecord, outcomes: Sequence[JobOutcome] | None = None) -> list[dict[str, Any]]:
    """One row per submitted job: outcome, queueing, restarts, deadline (``outcomes``: the record's, if known)."""
    specs = {j.job_id: j for j in record.jobs}
    rows = []
    for o in job_outcomes(record) if outcomes is None else outcomes:
        spec = specs[o.job_id]
        rows.append(
            {
                "job_id": o.job_id,
                "model": spec.model.name,
                "global_batch": spec.global_batch,
                "iterations": spec.iterations,
                "requested_gpu_type": spec.requested_gpu_type or "",
                "requested_gpus": spec.requested_gpus or 0,
                "submit_s": o.submit,
                "first_start_s": o.first_start,
                "finish_s": o.finish,
                "jct_s": o.jct,
                "queued_s": o.queued_s,
                "reconfigurations": o.reconfigurations,
                "preemptions": o.preemptions,
                "last_gpu_type": o.last_gpu_type,
                "last_num_gpus": o.last_num_gpus,
                "deadline_s": o.deadline,
                "deadline_met": o.deadline_met,
            }
        )
    return rows


def timeline_columns(record: EpisodeRecord, tl: Timeline | None = None) -> dict[str, np.ndarray]:
    """The step timeline by column: cluster state after each distinct event time (``tl``: the record's, if known)."""
    if tl is None:
        tl = timeline(record)
    return {
        "time_s": tl.time - record.start_time,
        "throughput": tl.throughput,
        "alloc_gpus": tl.alloc_gpus,
        "running_gpus": tl.running_gpus,
        "running_jobs": tl.running_jobs,
        "pending_jobs": tl.pending_jobs,
    }


def jobs_frame(record: EpisodeRecord) -> pd.DataFrame:
    """:func:`jobs_rows` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(jobs_rows(record))


def timeline_frame(record: EpisodeRecord) -> pd.DataFrame:
    """:func:`timeline_columns` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(timeline_columns(record))


def arena_version() -> int:
    """The version of Arena's decision rules (:data:`agents.arena.ARENA_VERSION`), recorded beside results; resolved
    at call time, so that another distribution's ``agents`` shadowing this one's is named in one line."""
    return int(own("agents.arena:ARENA_VERSION", "the Arena version recorded with the results"))


def write_run(out_dir: Path, result: RunResult, plots: bool = True, kind: str | None = None) -> Path:
    """Write one run's results directory and return it; ``kind`` (a command's own directory, not one
    run of a comparison) is recorded in its ``config.json`` (:mod:`arena_gym.harness.out_dirs`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(
        out_dir / "config.json",
        {
            **({"kind": kind} if kind is not None else {}),
            "config": result.config,
            "seed": result.config.seed,
            "code_version": code_version(),
            "arena_version": arena_version(),
            "policy": result.record.policy,
            "clairvoyant": result.record.clairvoyant,
            "cluster": result.record.cluster,
        },
    )
    write_json(out_dir / "metrics.json", result.metrics)
    done: LogReading = read_once(result.record, result.reading)
    jobs = jobs_rows(result.record, done.outcomes)
    write_rows(out_dir / "jobs.csv", JOB_COLUMNS, ([row[c] for c in JOB_COLUMNS] for row in jobs))
    columns = timeline_columns(result.record, done.timeline)
    write_rows(out_dir / "timeline.csv", list(columns), zip(*(c.tolist() for c in columns.values())))
    if plots:
        from arena_gym.harness.plots import plot_all  # matplotlib only when plots are drawn

        plot_all([result.record], out_dir, [done])
    return out_dir


def leaderboard(results: Sequence[RunResult], pad_reference: str | None = None) -> pd.DataFrame:
    """One row per run (policy, trace, seed) with the standard metric columns, best first
    (by padded average JCT when a padding reference is given, else by average JCT).

    The padded JCT is :func:`arena_gym.metrics.padded_mean_jcts` over the runs of one (trace,
    seed), the rule ``arena-gym evaluate`` pads each workload with."""
    import pandas as pd

    rows = []
    padded: dict[tuple[str, int], dict[str, float]] = {}
    if pad_reference:
        groups: dict[tuple[str, int], dict[str, list[float]]] = {}
        for r in results:
            jcts = finished_jcts(read_once(r.record, r.reading).outcomes)
            groups.setdefault((r.config.trace, r.config.seed), {})[r.record.policy] = jcts
        padded = {k: padded_mean_jcts(v, pad_reference) for k, v in groups.items()}
    for r in results:
        row: dict[str, Any] = {
            "policy": r.record.policy,
            "clairvoyant": r.record.clairvoyant,
            "trace": r.config.trace,
            "seed": r.config.seed,
        }
        row.update(metric_row(r.metrics))
        if pad_reference:
            row[PADDED_COLUMN] = padded[(r.config.trace, r.config.seed)][r.record.policy]
        rows.append(row)
    frame = pd.DataFrame(rows)
    key = PADDED_COLUMN if pad_reference else "avg_jct_s"
    return frame.sort_values(["trace", "seed", key], kind="stable").reset_index(drop=True)


def to_markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no extra dependency)."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "nan" if math.isnan(v) else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}")
        return str(v)

    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"
