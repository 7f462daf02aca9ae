"""The canonical on-disk trace format: a CSV with the columns

``job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s``

and optionally ``deadline_source``. ``model`` is ``family__size``; ``gpu_type``, ``num_gpus``
and ``deadline_s`` may be empty (no request / no deadline). ``deadline_source`` says where
each deadline comes from, ``declared`` (by the user) or ``derived`` (from the true length),
empty where there is no deadline; without the column every deadline is declared, since a
user's file states what users declared. Times are seconds. Loading rebases times to the first
submission like every loader; saving writes the times as they are, and always the
``deadline_source`` column, so a derived deadline stays derived.
"""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path

from arena_gym.outputs import atomic_write
from arena_gym.types import DeadlineSource
from traces.formats import CANONICAL_COLUMNS, DEADLINE_SOURCE_COLUMN
from traces.table import JobColumns, load_job_table
from traces.trace import Trace

log = logging.getLogger(__name__)

CANONICAL_JOB_COLUMNS = JobColumns(
    format_label="canonical",
    required=CANONICAL_COLUMNS,
    source="canonical",
    job_id="job_id",
    submit="submit_time_s",
    model="model",
    batch="global_batch",
    iterations="iterations",
    gpu_type="gpu_type",
    num_gpus="num_gpus",
    deadline="deadline_s",
    request_optional=True,
    default_source=DeadlineSource.DECLARED,
    deadline_source=DEADLINE_SOURCE_COLUMN,
)


def load_canonical(path: str | os.PathLike[str], *, name: str | None = None) -> Trace:
    """Load a canonical trace CSV (times rebased to the first job)."""
    trace = load_job_table(path, CANONICAL_JOB_COLUMNS, name=name)
    log.info("loaded %d jobs from %s (canonical)", len(trace), os.fspath(path))
    return trace


def _num(x: float) -> str:
    """Shortest exact text of a time: integers without a decimal point."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**53 else repr(float(x))


def save_canonical(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write ``trace`` as a canonical CSV via a temporary file and an atomic rename."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow((*CANONICAL_COLUMNS, DEADLINE_SOURCE_COLUMN))
            for j in trace.jobs:
                writer.writerow(
                    (
                        j.job_id,
                        _num(j.submit_time),
                        j.model.name,
                        j.global_batch,
                        j.iterations,
                        j.requested_gpu_type or "",
                        j.requested_gpus or "",
                        "" if j.deadline is None else _num(j.deadline),
                        "" if j.deadline is None else j.deadline_source.value,
                    )
                )

    target = atomic_write(path, write)
    log.info("saved %d jobs to %s (canonical)", len(trace), target)
    return target
