"""Exact, range-checked numbers in trace files: no silent overflow, rounding or wrapping."""

from __future__ import annotations

import re
import warnings

import pytest

from traces import load_trace
from traces.table import MAX_BATCH, MAX_EXACT_INT, integer_value, parse_number

CANON = "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s\n"
ARENA = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"


@pytest.mark.parametrize(
    "text, value",
    [
        ("12", 12),
        ("+12", 12),
        ("1e3", 1000),
        ("1.5e1", 15),
        ("2.0", 2),
        ("-0", 0),
        ("9223372036854775807", 9223372036854775807),
        ("1e20", 10**20),
        ("1e999999999", 10**40),
        ("1.5", None),
        ("1e-3", None),
        ("1_000", None),
        ("0x10", None),
        ("inf", None),
        ("nan", None),
        ("", None),
    ],
)
def test_integer_value_is_exact(text, value):
    assert integer_value(text) == value


def test_parse_number_is_correctly_rounded():
    assert parse_number("0.1") == 0.1 and parse_number("1e400") == float("inf")
    assert parse_number("1_0") != parse_number("1_0")  # NaN: digit separators are not numbers


@pytest.mark.parametrize(
    "cell, column, allowed",
    [
        ("1e20", "iterations", f"1..{MAX_EXACT_INT}"),
        ("9223372036854775807", "iterations", f"1..{MAX_EXACT_INT}"),
        (str(MAX_EXACT_INT + 2), "iterations", f"1..{MAX_EXACT_INT}"),
    ],
)
def test_iteration_overflow_names_file_line_column_and_range(tmp_path, cell, column, allowed):
    path = tmp_path / "t.csv"
    path.write_text(CANON + "a,0,gpt__1.3B,128,10,a40,2,\n" + f"b,1,gpt__1.3B,128,{cell},a40,2,\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from a wrapped cast either
        with pytest.raises(ValueError) as info:
            load_trace(path)
    assert str(info.value) == f"{path}:3: column {column!r}: {cell} is out of range (allowed {allowed})"


def test_batch_overflow_in_arena_csv(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(ARENA + "a,0,100,gpt__1.3B,,1e19,2,a40\n")
    with pytest.raises(
        ValueError, match=re.escape(f"{path}:2: column 'batch_size': 1e19 is out of range (allowed 1..{MAX_BATCH})")
    ):
        load_trace(path)


def test_gpu_count_overflow(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(CANON + "a,0,gpt__1.3B,128,10,a40,1e30,\n")
    with pytest.raises(ValueError, match=r":2: column 'num_gpus': 1e30 is out of range \(allowed 1\.\.65536\)"):
        load_trace(path)


def test_largest_exact_integer_loads_exactly(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(CANON + f"a,0,gpt__1.3B,1e3,{MAX_EXACT_INT},a40,2,\n")
    job = load_trace(path).jobs[0]
    assert job.iterations == MAX_EXACT_INT and job.global_batch == 1000


@pytest.mark.parametrize("gpu_type", ["à40", "a 40", "tpu!", "\u212a40"])  # the Kelvin sign lower-cases to 'k'
def test_non_ascii_gpu_type_names_are_refused(tmp_path, gpu_type):
    path = tmp_path / "t.csv"
    path.write_text(CANON + f"a,0,gpt__1.3B,128,10,{gpu_type},2,\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r":2: column 'gpu_type': .* is not a GPU type name"):
        load_trace(path)


def test_itp_duration_that_overflows_iterations(tmp_path):
    path = tmp_path / "itp.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\na,0,1e300,1\n")
    with pytest.raises(
        ValueError, match=rf"{re.escape(str(path))}:2: column 'duration': 1e\+300 s gives .* out of range"
    ):
        load_trace(path)


def test_rebasing_that_rounds_two_times_together_keeps_the_id_order(tmp_path):
    # 2**39 + 2u and 2**39 + 3u (u = 2**-13, the float spacing there) are one float apart; minus the
    # offset u/2 both round (to even) to 2**39 + 2u: the tie must then be ordered by job id, "a" before "b"
    u = 2.0**-13
    x, y, offset = 2**39 + 2 * u, 2**39 + 3 * u, u / 2
    assert x - offset == y - offset
    path = tmp_path / "t.csv"
    path.write_text(CANON + f"z,{offset!r},gpt__1.3B,8,1,,,\nb,{x!r},gpt__1.3B,8,1,,,\na,{y!r},gpt__1.3B,8,1,,,\n")
    trace = load_trace(path)
    assert [j.job_id for j in trace.jobs] == ["z", "a", "b"] and trace.time_offset_s == offset
    assert trace.jobs[1].submit_time == trace.jobs[2].submit_time == x - offset


def test_load_scaling_that_creates_a_tie_keeps_the_id_order():
    from arena_gym.types import JobId, JobSpec, ModelRef
    from traces import Trace

    jobs = [
        JobSpec(JobId(i), ModelRef("gpt", "1.3B"), 8, 1, t)
        for i, t in (("z", 1.0), ("b", 2.0), ("a", 2.0000000000000004))
    ]
    scaled = Trace("t", tuple(jobs), "test").scale_load(1e17)  # 1 + 1/1e17 and 1 + 1.0000000000000004/1e17 are both 1.0
    assert {j.submit_time for j in scaled.jobs} == {1.0} and [j.job_id for j in scaled.jobs] == ["a", "b", "z"]


@pytest.mark.parametrize("text", ["٣", "１２", "1٣"])
def test_digits_of_other_scripts_are_not_numbers(text):
    assert integer_value(text) is None and parse_number(text) != parse_number(text)


def test_line_numbers_count_quoted_newlines_and_blank_lines(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(CANON + '"a\nb",0,gpt__1.3B,128,10,a40,2,\n\nc,1,gpt__1.3B,128,0,a40,2,\n')
    with pytest.raises(ValueError, match=re.escape(f"{path}:5: column 'iterations': 0 is below 1")):
        load_trace(path)


def test_duplicate_header_columns_are_refused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(CANON.strip() + ",iterations\na,0,gpt__1.3B,128,10,a40,2,,5\n")
    with pytest.raises(ValueError, match=r"column\(s\) iterations appear twice in the header"):
        load_trace(path)


def test_short_rows_are_padded_long_rows_refused_bom_ignored(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("\ufeff" + CANON + "a,0,gpt__1.3B,128,10\n", encoding="utf-8")
    job = load_trace(path).jobs[0]
    assert job.requested_gpu_type is None and job.deadline is None
    path.write_text(CANON + "a,0,gpt__1.3B,128,10,a40,2,,x\n")
    with pytest.raises(ValueError, match=r":2: expected 8 fields, saw 9$"):
        load_trace(path)
    path.write_bytes(CANON.encode() + b"a,0,gpt__1.3B,128,10,a40,2,\x00\n")
    with pytest.raises(ValueError, match=r":2: column 'deadline_s': '\\x00' is not a finite time$"):
        load_trace(path)
