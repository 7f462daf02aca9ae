"""Trace: validation, window / head / scale_load / shift_to_zero semantics, summary."""

from __future__ import annotations

import json

import pytest

from arena_gym.types import GpuType, JobId, JobSpec, ModelRef
from traces.trace import Trace


def job(job_id: str, t: float, deadline: float | None = None, gpus: int = 2) -> JobSpec:
    return JobSpec(JobId(job_id), ModelRef("moe", "1.3B"), 256, 100, t, GpuType("a40"), gpus, deadline)


@pytest.fixture
def trace() -> Trace:
    jobs = [job("a", 10), job("b", 20, deadline=120), job("c", 20), job("d", 50), job("e", 90, gpus=8)]
    return Trace("t", tuple(jobs), "test", time_offset_s=1000)


def test_validation():
    with pytest.raises(ValueError, match="duplicate job id 'a'"):
        Trace("x", (job("a", 1), job("a", 2)), "test")
    with pytest.raises(ValueError, match="not sorted"):
        Trace("x", (job("b", 1), job("a", 1)), "test")
    with pytest.raises(ValueError, match="not sorted"):
        Trace("x", (job("a", 2), job("b", 1)), "test")
    sorted_trace = Trace.from_jobs("x", [job("b", 1), job("c", 0), job("a", 1)], "test")
    assert [j.job_id for j in sorted_trace] == ["c", "a", "b"]
    assert Trace("x", [job("a", 1)], "test").jobs == (job("a", 1),)  # lists become tuples


def test_window_is_half_open_and_keeps_times(trace):
    sub = trace.window(20, 90)
    assert [j.job_id for j in sub] == ["b", "c", "d"]
    assert sub.jobs[0].submit_time == 20 and sub.time_offset_s == 1000
    assert len(trace.window(91, 1e9)) == 0
    assert [j.job_id for j in trace.window(50)] == ["d", "e"]
    with pytest.raises(ValueError):
        trace.window(5, 1)


def test_head(trace):
    assert [j.job_id for j in trace.head(2)] == ["a", "b"]
    assert len(trace.head(0)) == 0 and len(trace.head(99)) == 5
    with pytest.raises(ValueError):
        trace.head(-1)


def test_scale_load_compresses_gaps_and_keeps_budgets(trace):
    fast = trace.scale_load(2)
    assert [j.submit_time for j in fast] == [10, 15, 15, 30, 50]
    assert fast.jobs[1].deadline - fast.jobs[1].submit_time == 100
    assert [j.job_id for j in fast] == [j.job_id for j in trace]
    slow = trace.scale_load(0.5)
    assert slow.span_s == pytest.approx(2 * trace.span_s)
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            trace.scale_load(bad)


def test_shift_to_zero_accumulates_offset(trace):
    shifted = trace.window(20, 100).shift_to_zero()
    assert shifted.jobs[0].submit_time == 0 and shifted.time_offset_s == 1020
    assert shifted.jobs[0].deadline == 100
    assert shifted.shift_to_zero() is shifted


def test_summary_is_plain_data(trace):
    s = trace.summary()
    assert s["jobs"] == 5 and s["span_s"] == 80 and s["total_requested_gpus"] == 16
    assert s["gpu_counts"] == {2: 4, 8: 1} and s["families"] == {"moe": 5}
    assert s["gpu_types"] == {"a40": 5} and s["with_deadline"] == 1
    assert s["iterations"]["p50"] == 100
    json.dumps(s)
    empty = trace.head(0).summary()
    assert empty["jobs"] == 0 and empty["iterations"]["p50"] is None
