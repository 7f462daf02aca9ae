"""Metrics from hand-built event logs, padding rule, leaderboard."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena_gym.cluster import PRESETS
from arena_gym.loop import run_episode
from arena_gym.metrics import (
    MAX_BINS,
    bin_width,
    compute_metrics,
    finished_jcts,
    job_outcomes,
    padded_mean_jcts,
    percentile,
    read_log,
    read_once,
    timeline,
)
from arena_gym.records import EpisodeRecord, Event, EventKind
from arena_gym.types import MAX_TIME_S, GpuType, JobId, ResourceShape
from tests.helpers import job

E = EventKind


def record(events, jobs, end, policy="p"):
    return EpisodeRecord(policy, PRESETS["tiny"], tuple(jobs), tuple(events), 0.0, end, math.inf, 4, 0.4)


def ev(t, kind, jid, n=0, rate=0.0):
    return Event(t, kind, JobId(jid), "a40" if n else "", n, "", rate)


def test_queueing_with_preemption_and_deadlines():
    jobs = [job("A", 0, 10, "a40", 2, deadline=500.0), job("B", 100, 10, "a40", 2, deadline=150.0)]
    events = [
        ev(0, E.SUBMIT, "A"),
        ev(0, E.ALLOCATE, "A", 2),
        ev(10, E.RUN, "A", 2, 100.0),
        ev(100, E.SUBMIT, "B"),
        ev(100, E.PREEMPT, "A", 2),
        ev(100, E.ALLOCATE, "B", 2),
        ev(110, E.RUN, "B", 2, 50.0),
        ev(200, E.FINISH, "B", 2),
        ev(200, E.ALLOCATE, "A", 2),
        ev(210, E.RUN, "A", 2, 100.0),
        ev(400, E.FINISH, "A", 2),
    ]
    out = {o.job_id: o for o in job_outcomes(record(events, jobs, 400.0))}
    assert out["A"].queued_s == 100 and out["A"].reconfigurations == 1 and out["A"].preemptions == 1
    assert out["B"].queued_s == 0 and out["B"].jct == 100
    m = compute_metrics(record(events, jobs, 400.0), bin_s=100.0)
    assert m["avg_jct_s"] == 250 and m["deadline_met_ratio"] == 0.5
    # throughput: 100 on [10,100), 0 on [100,110), 50 on [110,200), 0 on [200,210), 100 on [210,400)
    assert m["avg_throughput_span"] == pytest.approx((90 * 100 + 90 * 50 + 190 * 100) / 400)
    # 100 s bins average 90, 45, 90, 100: peak 100
    assert m["peak_throughput"] == pytest.approx(100.0)
    # while a job runs (370 of the 400 s; nothing runs on [100,110) and [200,210))
    assert m["avg_throughput"] == pytest.approx((90 * 100 + 90 * 50 + 190 * 100) / 370)
    assert m["sched_ms_per_decision"] == pytest.approx(100.0)
    tl = timeline(record(events, jobs, 400.0))
    assert tl.pending_jobs.max() == 1 and tl.alloc_gpus.max() == 2


def test_avg_throughput_of_a_live_shaped_record_is_its_rate_while_running():
    # a live CPU run: a 12 s start, about 3 samples/s measured by PROGRESS events, an idle gap, a second job
    jobs = [job("A", 0, 10, "a40", 1), job("B", 0, 10, "a40", 1)]
    events = [
        ev(0, E.SUBMIT, "A"),
        ev(0, E.SUBMIT, "B"),
        ev(0, E.ALLOCATE, "A", 1),
        ev(12, E.RUN, "A", 1, 3.0),
        ev(30, E.PROGRESS, "A", 1, 4.0),
        ev(60, E.FINISH, "A", 1),
        ev(60, E.ALLOCATE, "B", 1),
        ev(70, E.RUN, "B", 1, 2.0),
        ev(100, E.FINISH, "B", 1),
    ]
    m = compute_metrics(record(events, jobs, 100.0))
    running = 18 * 3.0 + 30 * 4.0 + 30 * 2.0
    assert m["avg_throughput"] == pytest.approx(running / (18 + 30 + 30))
    assert m["avg_throughput_span"] == pytest.approx(running / 100)
    assert 0 < m["avg_throughput_span"] < m["avg_throughput"]


def test_avg_throughput_of_a_small_sim_run_is_the_rate_of_its_one_job():
    from arena_gym.registry import make_policy
    from arena_gym.sim import SimBackend
    from tests.helpers import uniform_model

    perf = uniform_model()
    backend = SimBackend(PRESETS["tiny"], perf)
    rec = run_episode(backend, make_policy("fcfs"), [job("A", 0.0, 50, "a40", 1)])
    m = compute_metrics(rec)
    rate = 128 / perf.iter_time(job("A", 0.0, 50, "a40", 1).model, 128, ResourceShape(GpuType("a40"), 1, 1))
    assert m["jobs_finished"] == 1 and m["avg_throughput"] == pytest.approx(rate)
    assert m["avg_throughput_span"] < m["avg_throughput"]  # the start overhead is in the span, not in the average


def test_unfinished_jobs_queue_until_the_end():
    jobs = [job("A", 0, 10, "a40", 2)]
    m = compute_metrics(record([ev(0, E.SUBMIT, "A")], jobs, 1000.0))
    assert m["jobs_finished"] == 0 and m["avg_queue_s"] == 1000.0 and math.isnan(m["avg_jct_s"])


def test_finished_jcts_skip_the_unfinished():
    jobs = [job("A", 0, 10, "a40", 2), job("B", 5, 10, "a40", 2)]
    events = [ev(0, E.SUBMIT, "A"), ev(0, E.ALLOCATE, "A", 2), ev(5, E.SUBMIT, "B"), ev(100, E.FINISH, "A", 2)]
    assert finished_jcts(job_outcomes(record(events, jobs, 200.0))) == [100.0]


def test_padding_goes_up_to_the_reference_policys_finished_count():
    jcts = {"a": [1.0, 2.0, 3.0], "b": [1.0, 10.0], "c": []}
    assert padded_mean_jcts(jcts, reference="b") == {"a": 2.0, "b": 5.5, "c": 10.0}
    assert padded_mean_jcts(jcts) == padded_mean_jcts(jcts, reference="max") == padded_mean_jcts(jcts, "a")
    with pytest.raises(ValueError, match="padding reference policy 'x' is not among a, b, c"):
        padded_mean_jcts(jcts, reference="x")


def test_binning_stays_bounded_whatever_the_span():
    # one job submitted at the latest allowed time, 2**40 s: 300 s bins over the span would need 3.7e9 of them
    late = MAX_TIME_S
    jobs = [job("A", 0, 10, "a40", 2), job("B", late, 10, "a40", 2)]
    events = [
        ev(0, E.SUBMIT, "A"),
        ev(0, E.ALLOCATE, "A", 2),
        ev(10, E.RUN, "A", 2, 64.0),
        ev(30, E.FINISH, "A", 2),
        ev(late, E.SUBMIT, "B"),
        ev(late, E.ALLOCATE, "B", 2),
        ev(late + 10, E.RUN, "B", 2, 64.0),
        ev(late + 30, E.FINISH, "B", 2),
    ]
    rec = record(events, jobs, late + 30)
    tl = timeline(rec)
    starts, means = tl.binned(tl.throughput, 300.0)
    assert len(starts) == MAX_BINS and bin_width(late + 30, 300.0) == pytest.approx((late + 30) / MAX_BINS)
    assert means.sum() * bin_width(late + 30, 300.0) == pytest.approx(2 * 20 * 64.0)
    m = compute_metrics(rec)
    assert m["makespan_s"] == late + 30 and m["avg_throughput_span"] == pytest.approx(2 * 20 * 64.0 / (late + 30))


def test_short_spans_keep_the_requested_bin_width():
    jobs = [job("A", 0, 10, "a40", 2)]
    events = [
        ev(0, E.SUBMIT, "A"),
        ev(0, E.ALLOCATE, "A", 2),
        ev(100, E.RUN, "A", 2, 64.0),
        ev(12_000, E.FINISH, "A", 2),
    ]
    tl = timeline(record(events, jobs, 12_000.0))
    starts, means = tl.binned(tl.throughput, 300.0)
    assert starts.tolist() == [300.0 * i for i in range(40)]
    assert means[0] == pytest.approx(64.0 * 200 / 300) and means[1:].tolist() == [64.0] * 39
    with pytest.raises(ValueError, match="finite bin_s > 0"):
        tl.binned(tl.throughput, 0.0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False), min_size=0, max_size=60),
    st.sampled_from([0, 1, 5, 25, 50, 95, 99, 99.9, 100]),
)
def test_percentile_is_numpys_bit_for_bit(values, q):
    arr = np.array(values, dtype=float)
    got = percentile(np.sort(arr), q)
    if len(values) == 0:
        assert math.isnan(got)
    else:
        assert got == float(np.percentile(arr, q))  # exact, not approx: metrics.json must not move


def test_percentile_of_values_with_nan_is_nan():
    assert math.isnan(percentile(np.sort(np.array([1.0, math.nan, 3.0])), 50))


def test_a_log_reading_is_reused_only_for_its_own_record():
    jobs = [job("A", 0, 10, "a40", 2), job("B", 5, 10, "a40", 2)]
    events = [
        ev(0, E.SUBMIT, "A"),
        ev(0, E.ALLOCATE, "A", 2),
        ev(10, E.RUN, "A", 2, 64.0),
        ev(5, E.SUBMIT, "B"),
        ev(30, E.FINISH, "A", 2),
        ev(30, E.ALLOCATE, "B", 2),
        ev(40, E.RUN, "B", 2, 32.0),
        ev(90, E.FINISH, "B", 2),
    ]
    rec = record(events, jobs, 90.0)
    done = read_log(rec)
    assert compute_metrics(rec, done=done) == compute_metrics(rec)
    assert read_once(rec, done) is done
    other = record(events[:4], jobs, 90.0)  # an equal-looking but different record gets its own reading
    assert read_once(other, done) is not done
    assert compute_metrics(other, done=done) == compute_metrics(other)
    assert compute_metrics(other)["jobs_finished"] == 0 and compute_metrics(rec)["jobs_finished"] == 2
