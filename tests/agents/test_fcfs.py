"""FCFS: submission order at the requested shape, head-of-line blocking per GPU type, skips of never-runnable jobs."""

from __future__ import annotations

import dataclasses

import pytest

from agents.fcfs import FCFS, FCFSConfig
from arena_gym.metrics import job_outcomes
from arena_gym.records import EventKind
from tests.agents.baseline_cases import SMALL, check_random_traces, run_checked
from tests.helpers import GPT, job, table_model

# a40: 4 GPUs as 2 nodes x 2 take 1.0 s per iteration, 2 GPUs on one node 2.0 s, 2 GPUs spread over
# two nodes 2.5 s, 1 GPU 4.0 s; a10: 1 GPU 4.0 s.
PERF = table_model(
    {
        (GPT, 128, "a40", 2, 2): 1.0,
        (GPT, 128, "a40", 1, 2): 2.0,
        (GPT, 128, "a40", 2, 1): 2.5,
        (GPT, 128, "a40", 1, 1): 4.0,
        (GPT, 128, "a10", 1, 1): 4.0,
    }
)


def starts(record):
    """(time, job, shape) of every allocation, in log order."""
    return [(e.time, e.job_id, e.shape) for e in record.events if e.kind is EventKind.ALLOCATE]


def finish(record):
    return {o.job_id: o.finish for o in job_outcomes(record)}


def test_head_of_line_blocking_holds_back_later_jobs_of_the_same_type_only():
    # A takes all four a40 GPUs (20 s overhead + 100 x 1 s: done at 120). B (a40 x 2) must wait for A,
    # and so must C (a40 x 1) behind it; D (a10 x 1) starts at once: GPU types do not block each other.
    jobs = [
        job("A", 0, 100, "a40", 4),
        job("B", 10, 10, "a40", 2),
        job("C", 20, 10, "a40", 1),
        job("D", 30, 10, "a10", 1),
    ]
    record = run_checked(FCFS(), jobs, perf=PERF, config=SMALL)
    assert starts(record) == [
        (0.0, "A", "a40:2x2"),
        (30.0, "D", "a10:1x1"),
        (120.0, "B", "a40:1x2"),
        (120.0, "C", "a40:1x1"),
    ]
    assert finish(record)["B"] == pytest.approx(120.0 + 10.0 + 10 * 2.0)


def test_a_blocked_job_keeps_smaller_later_jobs_of_its_type_waiting():
    # A holds 2 of the 4 a40 GPUs. B wants 4 and blocks; C (1 GPU) would fit but waits behind B.
    jobs = [job("A", 0, 100, "a40", 2), job("B", 10, 10, "a40", 4), job("C", 20, 10, "a40", 1)]
    record = run_checked(FCFS(), jobs, perf=PERF, config=SMALL)
    first = {j: t for t, j, _ in starts(record)}
    assert first["B"] > first["A"] and first["C"] >= first["B"]
    assert first["B"] == pytest.approx(finish(record)["A"])


def test_never_runnable_jobs_are_skipped_without_blocking():
    # X asks for 8 a40 GPUs (the cluster has 4); Y's a10 x 2 has no feasible plan in PERF: both are
    # passed over and never started, and Z behind them starts at once.
    jobs = [job("X", 0, 10, "a40", 8), job("Y", 0, 10, "a10", 2), job("Z", 5, 10, "a40", 2)]
    record = run_checked(FCFS(), jobs, perf=PERF, config=SMALL)
    assert starts(record) == [(5.0, "Z", "a40:1x2")]


def test_a_job_without_requested_type_runs_on_the_first_type_in_submission_order():
    untyped = dataclasses.replace(job("U", 5, 10, "a40", 1), requested_gpu_type=None)
    record = run_checked(
        FCFS(), [job("A", 0, 10, "a40", 2), untyped, job("B", 10, 10, "a40", 1)], perf=PERF, config=SMALL
    )
    assert [(t, j) for t, j, _ in starts(record)] == [(0.0, "A"), (5.0, "U"), (10.0, "B")]
    assert all(shape.startswith("a40") for _, _, shape in starts(record))


def test_relax_spreads_a_job_that_does_not_fit_on_one_node():
    # A, B pack node 0 and C, D node 1 (best fit); B and D end at 9 s (5 s overhead + 4 s), leaving one
    # free GPU per node. W (2 GPUs) arrives at 50: strict FCFS waits for A and C (done at 5 + 4,000 s);
    # fcfs-r spreads it at once and W finishes after 10 s of overhead and 10 x 2.5 s.
    jobs = [
        job("A", 0, 1000, "a40", 1),
        job("B", 0, 1, "a40", 1),
        job("C", 0, 1000, "a40", 1),
        job("D", 0, 1, "a40", 1),
        job("W", 50, 10, "a40", 2),
    ]
    strict = run_checked(FCFS(), jobs, perf=PERF, config=SMALL)
    relaxed = run_checked(FCFS(relax=True), jobs, perf=PERF, config=SMALL)
    assert [(t, s) for t, j, s in starts(strict) if j == "W"] == [(4005.0, "a40:1x2")]
    assert [(t, s) for t, j, s in starts(relaxed) if j == "W"] == [(50.0, "a40:2x1")]
    assert finish(relaxed)["W"] == pytest.approx(50.0 + 10.0 + 10 * 2.5)


def test_settings_come_from_one_config_with_overrides():
    assert FCFS().config == FCFSConfig() and FCFS(relax=True).config.relax
    assert (
        FCFS(config=FCFSConfig(relax=True)).config.relax and not FCFS(config=FCFSConfig(True), relax=False).config.relax
    )
    with pytest.raises(ValueError, match="unknown setting.*relaxed.*valid: relax"):
        FCFS(relaxed=True)


def test_invariants_determinism_and_requested_types_over_random_traces():
    records = check_random_traces(lambda: FCFS(), same_type=True)
    assert not any(e.kind is EventKind.PREEMPT for r in records for e in r.events)
