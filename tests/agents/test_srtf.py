"""SRTF: shortest estimated remaining time first, preemptive at the requested shape, never preempting for nothing."""

from __future__ import annotations

import pytest

from agents.srtf import SRTF
from arena_gym.metrics import job_outcomes
from arena_gym.records import EventKind
from tests.agents.baseline_cases import SMALL, check_random_traces, run_checked
from tests.helpers import GPT, job, table_model

# a40 x 4 (2 nodes x 2) 1.0 s per iteration; a40 x 2 on one node 2.0 s; a40 x 1 4.0 s.
PERF = table_model({(GPT, 128, "a40", 2, 2): 1.0, (GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a40", 1, 1): 4.0})


def outcomes(record):
    return {o.job_id: o for o in job_outcomes(record)}


def test_a_shorter_arrival_preempts_the_longer_running_job():
    # L (1000 iterations on 4 GPUs) starts at 0, 20 s overhead, so by t = 100 it did 80 iterations: 920 s left.
    # S (10 x 1 s) arrives at 100, preempts L, pays 20 s and finishes at 130; L resumes, pays 20 s: done at 1070.
    record = run_checked(SRTF(), [job("L", 0, 1000, "a40", 4), job("S", 100, 10, "a40", 4)], perf=PERF, config=SMALL)
    out = outcomes(record)
    assert out["S"].finish == pytest.approx(130.0)
    assert out["L"].finish == pytest.approx(1070.0) and out["L"].preemptions == 1


def test_a_longer_arrival_waits():
    # S (short) runs first; L arriving later has more work left than S: no preemption, L starts when S ends.
    record = run_checked(SRTF(), [job("S", 0, 100, "a40", 4), job("L", 10, 1000, "a40", 4)], perf=PERF, config=SMALL)
    out = outcomes(record)
    assert out["S"].preemptions == 0 and out["L"].preemptions == 0
    assert out["L"].finish == pytest.approx(out["S"].finish + 20.0 + 1000.0)


def test_ranking_uses_the_estimated_time_of_each_shape():
    # A: 150 iterations on 1 GPU = 600 s; B: 300 iterations on 4 GPUs = 300 s; only one fits at a time.
    # B goes first: shorter in time, though longer in iterations and later in submission order.
    jobs = [job("A", 0, 150, "a40", 1), job("B", 0, 300, "a40", 4)]
    record = run_checked(SRTF(), jobs, perf=PERF, config=SMALL)
    firsts = {}
    for e in record.events:
        if e.kind is EventKind.ALLOCATE:
            firsts.setdefault(e.job_id, e.time)
    assert firsts["B"] < firsts["A"]


def test_nobody_is_preempted_when_that_would_not_make_room():
    # R holds 2 a40 GPUs with lots left; S wants 8 a40 GPUs, more than the cluster has: S is never runnable
    # and R is never preempted for it, although S is "shorter".
    record = run_checked(SRTF(), [job("R", 0, 500, "a40", 2), job("S", 10, 1, "a40", 8)], perf=PERF, config=SMALL)
    assert not any(e.kind is EventKind.PREEMPT for e in record.events)
    assert outcomes(record)["R"].finish == pytest.approx(10.0 + 500 * 2.0)  # 5 s overhead per GPU


def test_unknown_settings_are_rejected_naming_the_valid_ones():
    assert SRTF(relax=True).config.relax
    with pytest.raises(ValueError, match="unknown setting.*thresholds.*valid: relax"):
        SRTF(thresholds=(1.0,))


def test_invariants_determinism_and_requested_types_over_random_traces():
    records = check_random_traces(lambda: SRTF(), same_type=True)
    assert any(e.kind is EventKind.PREEMPT for r in records for e in r.events)
