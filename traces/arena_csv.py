"""Loader for the Arena artifact's trace CSV format.

Columns: ``job_id, submission_time, num_iteration, model_name, deadline, batch_size, num_gpu,
gpu_type`` (``../shared/data/arena/traces/*.csv``; artifact ``traces/simulate_trace_*.csv`` and
``traces/runtime_trace.csv``). ``model_name`` is ``family__size``; the artifact's GPT family
``bert`` is accepted as an alias of ``gpt``.

Iterations: the artifact stores ``num_iteration`` x 5 and its simulator divides by 5 on
arrival, so this loader divides by ``iteration_divisor`` (default 5), rounding up, at least 1
(the artifact floors; the difference is < 1 iteration). The artifact's *runtime* used its
testbed trace (``testbed.csv``) undivided: load it with ``iteration_divisor=1`` for that.

Times: rebased to the first submission (offset in ``Trace.time_offset_s``); deadlines are
kept as in the file, rebased the same way, unless ``deadline_scale`` loosens them: the artifact's
simulator sets ``deadline = submit + 5 x (deadline - submit)`` (docs/arena.md §5.7), i.e.
``deadline_scale=5``. ``num_gpu`` / ``gpu_type`` become the job's
requested GPU count / type.

Deadlines are DERIVED (:class:`arena_gym.types.DeadlineSource`): the artifact's scripts made
them from each job's length (``submit + 1.5 x duration`` for its Helios and PAI traces, the
duration the iterations were computed from; ElasticFlow's length-based deadlines for Philly and
the testbed trace), and loosening them by ``deadline_scale`` keeps them so.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from arena_gym.types import DeadlineSource
from traces.formats import ARENA_COLUMNS
from traces.table import JobColumns, load_job_table
from traces.trace import Trace

log = logging.getLogger(__name__)

ARENA_JOB_COLUMNS = JobColumns(
    format_label="arena",
    required=ARENA_COLUMNS,
    source="arena-csv",
    job_id="job_id",
    submit="submission_time",
    model="model_name",
    batch="batch_size",
    iterations="num_iteration",
    gpu_type="gpu_type",
    num_gpus="num_gpu",
    deadline="deadline",
    request_optional=False,
    default_source=DeadlineSource.DERIVED,
)


def load_arena_csv(
    path: str | os.PathLike[str], *, iteration_divisor: int = 5, deadline_scale: float = 1.0, name: str | None = None
) -> Trace:
    """Load an Arena-artifact trace CSV (times rebased to the first job; iterations / divisor;
    each job's time to its deadline multiplied by ``deadline_scale``)."""
    if iteration_divisor < 1:
        raise ValueError(f"iteration_divisor must be >= 1, got {iteration_divisor}")
    if not deadline_scale > 0:
        raise ValueError(f"deadline_scale must be > 0, got {deadline_scale}")
    trace = load_job_table(path, ARENA_JOB_COLUMNS, name=name, iteration_divisor=iteration_divisor)
    if deadline_scale != 1.0:
        jobs = tuple(
            j
            if j.deadline is None
            else dataclasses.replace(j, deadline=j.submit_time + deadline_scale * (j.deadline - j.submit_time))
            for j in trace.jobs
        )
        trace = dataclasses.replace(trace, jobs=jobs)
    log.info("loaded %d jobs from %s (Arena CSV, iterations / %d)", len(trace), os.fspath(path), iteration_divisor)
    return trace
