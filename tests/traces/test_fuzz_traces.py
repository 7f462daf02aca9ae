"""Fuzz the trace loaders: generated canonical, Arena and ITP CSV files load to exactly the values
written (and round-trip through ``save_trace``); a file with one bad cell fails with one line
naming the file, the line and the column; arbitrary bytes never escape as another exception."""

from __future__ import annotations

import csv
import io
import math
import os
import string
import tempfile
from pathlib import Path

from hypothesis import event, given
from hypothesis import strategies as st

from arena_gym.types import DeadlineSource, GpuType, JobId, JobSpec, ModelRef
from tests.fuzzing import assert_one_line, case_timeout, fuzz
from traces import load_trace, resolve_trace, save_trace
from traces.formats import ARENA_COLUMNS, CANONICAL_COLUMNS, ITP_COLUMNS
from traces.table import MAX_BATCH, MAX_EXACT_INT, MAX_GPUS

ID_CHARS = string.ascii_letters + string.digits + "-_."
GPU_NAMES = ("a100", "V100", "a40", "A10", "h100", "t4", "v100-32gb", "rtx3090")
MODELS = ("gpt__1.3B", "gpt__350M", "bert__760M", "moe__1.3B", "moe__2.4B", "wide_resnet__1B", "wrn__500M", "GPT__2.6B")
TIMEOUT_S = 10.0
#: One scratch folder for the module (hypothesis cannot use tmp_path per case); files are overwritten.
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-traces-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def _scratch() -> Path:
    return Path(_SCRATCH.name)


def spell_int(n: int, form: int) -> str:
    """An exact decimal spelling of ``n``: ``1000``, ``+1000``, ``1000.0``, `` 1000 `` or ``1e3``."""
    zeros = len(str(n)) - len(str(n).rstrip("0"))
    forms = [
        str(n),
        f"+{n}",
        f"{n}.0",
        f" {n} ",
        f"{str(n)[: len(str(n)) - zeros]}e{zeros}" if n and zeros else f"{n}e0",
    ]
    return forms[form]


def spell_time(value: float, form: int) -> str:
    """An exact spelling of a time: ``repr``, ``%.17g`` or (integral values) the integer."""
    return [repr(value), f"{value:.17g}", str(int(value)) if value.is_integer() else repr(value)][form]


FORM = st.integers(0, 4)
TIME = st.tuples(
    st.one_of(st.integers(0, 10**12).map(float), st.floats(0, 1e12, allow_nan=False, allow_infinity=False)),
    st.integers(0, 2),
)
POW2 = st.sampled_from([2**k for k in range(17)])
ID = st.text(ID_CHARS, min_size=1, max_size=6)
#: One job's drawn values: submit (value, form), model, batch (value, form), iterations (value, form),
#: GPU type, GPU count, deadline slack (None: no deadline).
JOB = st.tuples(
    TIME,
    st.sampled_from(MODELS),
    st.integers(1, MAX_BATCH),
    FORM,
    st.integers(1, MAX_EXACT_INT),
    FORM,
    st.sampled_from(GPU_NAMES),
    POW2,
    st.none() | st.floats(0, 1e9, allow_nan=False),
    st.booleans(),
)
ITP_JOB = st.tuples(TIME, st.floats(1e-3, 1e9, allow_nan=False, allow_infinity=False), st.integers(1, 64), FORM)


def _first(pair: tuple) -> object:
    return pair[0]


def jobs_of(fmt: str) -> st.SearchStrategy:
    """Lists of (job id, drawn values) with unique ids."""
    return st.lists(st.tuples(ID, ITP_JOB if fmt == "itp" else JOB), min_size=1, max_size=6, unique_by=_first)


def build(fmt: str, drawn: list[tuple]) -> tuple[list[dict[str, str]], list[dict[str, object]]]:
    """Rows (column -> cell text) of a valid trace in ``fmt`` and the values each row means."""
    rows, values = [], []
    for job_id, job in drawn:
        (submit, submit_form) = job[0]
        submit_text = spell_time(submit, submit_form)
        if fmt == "itp":
            _, duration, gpus, gpus_form = job
            rows.append(
                {
                    "job_id": job_id,
                    "submission_time": submit_text,
                    "duration": repr(duration),
                    "num_gpu": spell_int(gpus, gpus_form),
                }
            )
            values.append({"id": job_id, "submit": submit, "duration": duration})
            continue
        _, model, batch, batch_form, iters, iters_form, gpu_type, gpus, slack, request = job
        if fmt == "canonical" and not request:  # the canonical format may leave the request empty
            gpu_type, gpus = "", 0
        deadline = None if slack is None else submit + slack
        deadline_text = "" if deadline is None else repr(deadline)
        values.append(
            {
                "id": job_id,
                "submit": submit,
                "model": model,
                "batch": batch,
                "iters": iters,
                "gpu_type": gpu_type,
                "gpus": gpus,
                "deadline": deadline,
            }
        )
        if fmt == "canonical":
            rows.append(
                {
                    "job_id": job_id,
                    "submit_time_s": submit_text,
                    "model": model,
                    "global_batch": spell_int(batch, batch_form),
                    "iterations": spell_int(iters, iters_form),
                    "gpu_type": gpu_type,
                    "num_gpus": str(gpus or ""),
                    "deadline_s": deadline_text,
                }
            )
        else:
            rows.append(
                {
                    "job_id": job_id,
                    "submission_time": submit_text,
                    "num_iteration": spell_int(iters, iters_form),
                    "model_name": model,
                    "deadline": deadline_text,
                    "batch_size": spell_int(batch, batch_form),
                    "num_gpu": str(gpus),
                    "gpu_type": gpu_type,
                }
            )
    return rows, values


def _builder(fmt: str):
    def build_fmt(drawn: list[tuple]) -> tuple[list[dict[str, str]], list[dict[str, object]]]:
        return build(fmt, drawn)

    return build_fmt


#: A valid trace per format: (rows, values), see :func:`build`.
TRACES = {fmt: jobs_of(fmt).map(_builder(fmt)) for fmt in ("canonical", "arena", "itp")}


COLUMNS = {"canonical": CANONICAL_COLUMNS, "arena": ARENA_COLUMNS, "itp": ITP_COLUMNS}


def write(path: Path, fmt: str, rows: list[dict[str, str]], order: list[str] | None = None) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=order or list(COLUMNS[fmt]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def expected_jobs(
    values: list[dict[str, object]], divisor: int = 1, source: DeadlineSource = DeadlineSource.DECLARED
) -> tuple[tuple[JobSpec, ...], float]:
    """The jobs a file of ``values`` loads to (a deadline's source is ``source``), and the offset."""
    offset = min(float(v["submit"]) for v in values)
    jobs = []
    for v in values:
        deadline = v["deadline"]
        jobs.append(
            JobSpec(
                JobId(str(v["id"])),
                ModelRef.parse(str(v["model"])),
                int(v["batch"]),  # type: ignore[arg-type]
                max(1, -(-int(v["iters"]) // divisor)),
                float(v["submit"]) - offset,  # type: ignore[call-overload]
                GpuType(str(v["gpu_type"]).lower()) if v["gpu_type"] else None,
                int(v["gpus"]) or None,  # type: ignore[call-overload]
                None if deadline is None else float(deadline) - offset,
                DeadlineSource.DECLARED if deadline is None else source,
            )
        )  # type: ignore[arg-type]
    return tuple(sorted(jobs, key=lambda j: (j.submit_time, j.job_id))), offset


@fuzz(650)
@given(data=TRACES["canonical"], columns=st.permutations(CANONICAL_COLUMNS))
def test_canonical_files_load_exactly_and_round_trip(data, columns):
    rows, values = data
    folder = _scratch()
    with case_timeout(TIMEOUT_S):
        trace = load_trace(write(folder / "t.csv", "canonical", rows, list(columns)))  # column order is free
        jobs, offset = expected_jobs(values)
        assert trace.jobs == jobs and trace.time_offset_s == offset
        again = load_trace(save_trace(trace, folder / "saved.csv"))
        assert again.jobs == trace.jobs and again.time_offset_s == 0.0


@fuzz(650)
@given(data=TRACES["arena"], divisor=st.integers(1, 10))
def test_arena_files_load_exactly(data, divisor):
    rows, values = data
    with case_timeout(TIMEOUT_S):
        trace = resolve_trace(f"{write(_scratch() / 'a.csv', 'arena', rows)}?iteration_divisor={divisor}")
        jobs, offset = expected_jobs(values, divisor, DeadlineSource.DERIVED)  # the artifact's deadlines are derived
        assert trace.jobs == jobs and trace.time_offset_s == offset


@fuzz(650)
@given(data=TRACES["itp"], seed=st.integers(0, 2**32 - 1), step=st.sampled_from([0.5, 2.0, 7.25]))
def test_itp_files_keep_ids_times_and_durations(data, seed, step):
    rows, values = data
    with case_timeout(TIMEOUT_S):
        trace = load_trace(write(_scratch() / "i.csv", "itp", rows), seed=seed, iter_time=lambda m, b, t, n: step)
    offset = min(float(v["submit"]) for v in values)
    by_id = {str(v["id"]): v for v in values}
    assert trace.time_offset_s == offset and len(trace) == len(values)
    for job in trace.jobs:
        v = by_id[job.job_id]
        assert job.submit_time == float(v["submit"]) - offset  # type: ignore[arg-type]
        assert job.iterations == max(1, int(float(v["duration"]) // step))  # type: ignore[arg-type]
        assert job.deadline == job.submit_time + 1.5 * job.iterations * step
        assert job.deadline_source is DeadlineSource.DERIVED


#: Cells that are wrong for a column whatever the rest of the row holds.
BAD_CELLS = {
    "id": ["", "<dup>"],
    "time": ["", "-1", "nan", "inf", "-inf", "abc", "1_0", "0x10", "１", "1e400", "--1"],
    "model": ["", "gpt", "foo__1B", "__x", "gpt__"],
    "batch": ["", "0", "-3", "1.5", "1e20", str(MAX_BATCH + 1), "abc", "nan", "9223372036854775807"],
    "iters": ["", "0", "2.5", "1e20", "9223372036854775807", str(MAX_EXACT_INT + 1), "x", "1e-3"],
    "gpu_type": ["à40", "a 40", "a40!", "-a40", "\u212a40"],
    "gpus": ["3", "0", "6", "1e30", str(MAX_GPUS * 2), "-2", "x", "0.5"],
    "deadline": ["-5", "abc", "inf", "<before>"],
    "duration": ["", "0", "-1", "nan", "inf", "x"],
}
ROLE = {
    "canonical": {
        "job_id": "id",
        "submit_time_s": "time",
        "model": "model",
        "global_batch": "batch",
        "iterations": "iters",
        "gpu_type": "gpu_type",
        "num_gpus": "gpus",
        "deadline_s": "deadline",
    },
    "arena": {
        "job_id": "id",
        "submission_time": "time",
        "num_iteration": "iters",
        "model_name": "model",
        "deadline": "deadline",
        "batch_size": "batch",
        "num_gpu": "gpus",
        "gpu_type": "gpu_type",
    },
    "itp": {"job_id": "id", "submission_time": "time", "duration": "duration", "num_gpu": "iters"},
}


@st.composite
def one_bad_cell(draw):
    fmt = draw(st.sampled_from(list(COLUMNS)))
    rows, _ = draw(TRACES[fmt])
    row = draw(st.integers(0, len(rows) - 1))
    column = draw(st.sampled_from(list(COLUMNS[fmt])))
    role = ROLE[fmt][column]
    bad = draw(st.sampled_from(BAD_CELLS[role]))
    reported = row
    if bad == "<dup>":
        if len(rows) < 2:
            bad = ""
        else:
            other = draw(st.integers(0, len(rows) - 1).filter(lambda i: i != row))
            bad = rows[other]["job_id"]
            reported = max(row, other)  # the second occurrence is the one reported
    if bad == "<before>":
        submit = float(rows[row]["submission_time" if fmt == "arena" else "submit_time_s"])
        if submit == 0:
            bad = "-5"
        else:
            bad = repr(math.nextafter(submit, -math.inf))
    return fmt, rows, row, column, bad, reported


@fuzz(1200)
@given(case=one_bad_cell())
def test_one_bad_cell_is_reported_with_file_line_and_column(case):
    fmt, rows, row, column, bad, reported = case
    event(f"{fmt} file")
    rows = [dict(r) for r in rows]
    rows[row][column] = bad
    path = write(_scratch() / "bad.csv", fmt, rows)
    with case_timeout(TIMEOUT_S):
        try:
            load_trace(path)
        except ValueError as exc:
            message = assert_one_line(exc, f"{path}:{reported + 2}: ")
        else:
            raise AssertionError(f"{fmt} row {row} {column}={bad!r} loaded without an error")
    assert f"'{column}'" in message or "duplicate job id" in message or "model name" in message, message


@fuzz(300)
@given(
    blob=st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300),
        st.lists(
            st.sampled_from(list(set(CANONICAL_COLUMNS + ARENA_COLUMNS + ITP_COLUMNS)) + ["x", ""]), max_size=9
        ).map(lambda cols: ",".join(cols) + "\n1,2,3\n"),
    )
)
def test_arbitrary_bytes_never_escape(blob):
    path = _scratch() / "junk.csv"
    path.write_bytes(blob if isinstance(blob, bytes) else blob.encode("utf-8", "surrogatepass"))
    with case_timeout(TIMEOUT_S):
        try:
            trace = load_trace(path)
        except ValueError as exc:
            assert_one_line(exc, str(path))
        else:
            assert len(trace) >= 1


SYNTHETIC_KEYS = (
    "n_jobs",
    "arrival",
    "rate_per_h",
    "seed",
    "mix",
    "gpu_types",
    "max_gpus",
    "iter_log_mean",
    "iter_log_sigma",
    "iter_min",
    "iter_max",
    "burst_factor",
    "burst_fraction",
    "mean_burst_s",
    "deadline_factor",
    "max_tries",
    "head",
    "load",
    "start_s",
    "end_s",
    "bogus",
)
SYNTHETIC_VALUES = (
    "0",
    "1",
    "3",
    "-1",
    "2.5",
    "1e9",
    "1e400",
    "nan",
    "inf",
    "",
    "none",
    "poisson",
    "bursty",
    "philly",
    "testbed",
    "a40+a10",
    "a40",
    "zz",
    "true",
    "x",
    "20",
    "0.5",
    "9999999999",
)


@fuzz(300)
@given(items=st.lists(st.tuples(st.sampled_from(SYNTHETIC_KEYS), st.sampled_from(SYNTHETIC_VALUES)), max_size=5))
def test_synthetic_specs_load_or_fail_in_one_line(items):
    options = dict(items)
    options.setdefault("n_jobs", "3")  # every value drawn for n_jobs is small or refused
    spec = "synthetic:" + ",".join(f"{k}={v}" for k, v in options.items())
    with case_timeout(TIMEOUT_S):
        try:
            trace = resolve_trace(spec)
        except ValueError as exc:
            assert_one_line(exc)
        else:
            assert 1 <= len(trace) <= int(float(options["n_jobs"]))
            assert all(j.iterations >= 1 and math.isfinite(j.submit_time) for j in trace.jobs)
