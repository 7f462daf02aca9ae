"""Loader for the ITP / ElasticFlow raw trace format (``job_id, submission_time, duration, num_gpu``).

The files (``../shared/data/itp/*.csv``, from microsoft/elasticflow-traces) carry no model,
batch or GPU type. This loader samples them, seeded, the way the Arena artifact built its
traces (``docs/arena.md`` section 8.3; :mod:`traces.recipe`):

1. model family, size, global batch, GPU count and GPU type are drawn from a mix (default
   ``philly``) and re-drawn until ``feasible(model, batch, gpu_type, num_gpus)`` holds
   (default :func:`traces.recipe.default_feasible`); the sampled GPU count replaces the
   file's ``num_gpu`` (which may be 32 and is otherwise ignored);
2. iterations = floor(duration / iter_time) with ``iter_time(model, batch, gpu_type,
   num_gpus)`` (default :func:`traces.recipe.nominal_iter_time`), the artifact's Helios/PAI
   recipe; counts outside ``[iter_min, iter_max]`` are clamped, or, with
   ``out_of_range="redraw"``, re-drawn uniformly in that range as the artifact did
   (Helios [2,000, 10,000], PAI [1,000, 5,000]);
3. deadline = submit + ``deadline_factor`` x iterations x iter_time (the artifact: 1.5),
   recorded as DERIVED (:class:`arena_gym.types.DeadlineSource`: computed from the true
   length, so hidden from non-clairvoyant policies); ``deadline_factor=None`` leaves jobs
   without a deadline.

Times are rebased to the first kept submission. ``skip_before_s`` drops jobs submitted before
that time on the file's own clock (the artifact's Philly trace skipped cluster08 before
1,945,572 s). Jobs are sampled in (submit time, job id) order, so the result does not depend
on the row order of the file.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

import numpy as np

from arena_gym.types import DeadlineSource, GpuType, JobId, JobSpec
from traces.formats import ITP_COLUMNS
from traces.recipe import (
    FeasibleFn,
    InfeasibleJobError,
    IterTimeFn,
    cached_iter_time,
    child_rngs,
    get_mix,
    nominal_iter_time,
    sample_fields,
)
from traces.table import MAX_EXACT_INT, CsvTable, TraceFormatError, rebase_order
from traces.trace import Trace

log = logging.getLogger(__name__)

OUT_OF_RANGE: tuple[str, ...] = ("clamp", "redraw")


def load_itp_csv(
    path: str | os.PathLike[str],
    *,
    seed: int | np.random.SeedSequence = 0,
    feasible: FeasibleFn | None = None,
    iter_time: IterTimeFn | None = None,
    mix: str = "philly",
    iter_min: int = 1,
    iter_max: int | None = None,
    out_of_range: str = "clamp",
    deadline_factor: float | None = 1.5,
    skip_before_s: float | None = None,
    gpu_types: tuple[str, ...] | None = None,
    max_gpus: int | None = None,
    max_tries: int = 1000,
    name: str | None = None,
) -> Trace:
    """Load an ITP/ElasticFlow raw CSV, sampling job fields with the Arena recipe (seeded)."""
    recipe = get_mix(mix)
    if iter_min < 1 or (iter_max is not None and iter_max < iter_min):
        raise ValueError(f"need 1 <= iter_min <= iter_max, got iter_min={iter_min}, iter_max={iter_max}")
    if out_of_range not in OUT_OF_RANGE:
        raise ValueError(f"out_of_range must be one of {', '.join(OUT_OF_RANGE)}, got {out_of_range!r}")
    if out_of_range == "redraw" and iter_max is None:
        raise ValueError("out_of_range='redraw' needs iter_max")
    if deadline_factor is not None and not (math.isfinite(deadline_factor) and deadline_factor > 0):
        raise ValueError(f"deadline_factor must be > 0 or None, got {deadline_factor}")

    table = CsvTable(path, ITP_COLUMNS, "itp")
    ids = table.job_ids("job_id")
    submit = table.times("submission_time")
    duration = table.numbers("duration", min_value=None, what="duration")
    table.first_bad(~(duration > 0) & np.isfinite(duration), lambda i: f"column 'duration': {duration[i]:g} is not > 0")
    table.counts("num_gpu")  # checked, then replaced by the sampled count
    table.raise_if_problems()

    keep = None if skip_before_s is None else np.flatnonzero(submit >= skip_before_s)
    order, offset = rebase_order(submit, ids, keep)
    if len(order) == 0:
        raise TraceFormatError(f"{table.path}: no jobs submitted at or after skip_before_s={skip_before_s:g}")

    fields_rng, redraw_rng = child_rngs(seed, 2)
    try:
        fields = sample_fields(
            fields_rng,
            len(order),
            recipe,
            feasible=feasible,
            gpu_types=gpu_types,
            max_gpus=max_gpus,
            max_tries=max_tries,
        )
    except InfeasibleJobError as exc:
        raise table.error(int(order[exc.index]), str(exc)) from None

    timer = cached_iter_time(iter_time or nominal_iter_time)
    jobs = []
    for k, i in enumerate(order):
        model, batch, gtype, count = fields.models[k], fields.batches[k], fields.gpu_types[k], fields.num_gpus[k]
        it = timer(model, batch, gtype, count)
        if not (math.isfinite(it) and it > 0):
            raise table.error(int(i), f"iter_time is {it} for {model.name} batch {batch} on {count} x {gtype}")
        n_iter = int(duration[i] // it)
        if iter_max is not None and out_of_range == "redraw" and not iter_min <= n_iter <= iter_max:
            n_iter = int(redraw_rng.integers(iter_min, iter_max + 1))
        n_iter = max(n_iter, iter_min) if iter_max is None else min(max(n_iter, iter_min), iter_max)
        if n_iter > MAX_EXACT_INT:
            raise table.error(
                int(i),
                f"column 'duration': {duration[i]:g} s gives {n_iter:.3g} iterations of "
                f"{model.name}, out of range (allowed 1..{MAX_EXACT_INT}); set iter_max",
            )
        t = float(submit[i]) - offset
        jobs.append(
            JobSpec(
                job_id=JobId(ids[i]),
                model=model,
                global_batch=batch,
                iterations=n_iter,
                submit_time=t,
                requested_gpu_type=GpuType(gtype),
                requested_gpus=count,
                deadline=None if deadline_factor is None else t + deadline_factor * n_iter * it,
                deadline_source=DeadlineSource.DECLARED if deadline_factor is None else DeadlineSource.DERIVED,
            )
        )
    source = f"itp-csv:{os.fspath(path)} (mix={mix}, seed={seed})"
    trace = Trace(name or Path(path).stem, tuple(jobs), source, offset)
    log.info("loaded %d jobs from %s (ITP, sampled with mix %s, seed %s)", len(trace), os.fspath(path), mix, seed)
    return trace
