"""Gandiva: grow into idle GPUs, shrink back when others wait, migrate to defragment, one type per job."""

from __future__ import annotations

import pytest

from agents.gandiva import Gandiva
from arena_gym.metrics import job_outcomes
from arena_gym.records import EventKind
from tests.agents.baseline_cases import check_random_traces, finished, random_workload, run_checked
from tests.helpers import MOE, job


def allocations(record):
    return [(e.time, e.job_id, e.shape) for e in record.events if e.kind is EventKind.ALLOCATE]


def test_grows_into_idle_gpus_and_shrinks_back_when_a_job_arrives():
    # tests.helpers.uniform_model: time = 2 / sqrt(GPUs) on a40, so each doubling is a 1.41x speedup.
    jobs = [job("A", 0, 1000, "a40", 1), job("X", 10, 10, "a40", 1, model=MOE), job("B", 500, 100, "a40", 2)]
    record = run_checked(Gandiva(min_remaining_s=0.0), jobs)
    assert allocations(record) == [
        (0, "A", "a40:1x1"),  # started at its request (pending jobs do not grow)
        (10, "X", "a40:1x1"),  # X admitted; A (running since 5) grows into the idle pair of node 1
        (10, "A", "a40:1x2"),
        (pytest.approx(35.0), "A", "a40:2x2"),  # X done (10 + 5 s + 10 x 2 s): A grows to 4 = 4x its request
        (500, "A", "a40:1x1"),  # B waits for 2 GPUs: A shrinks back to its request ...
        (500, "B", "a40:1x2"),  # ... and B starts
        (pytest.approx(500 + 10 + 100 * 2 / 2**0.5), "A", "a40:2x2"),  # B done: A grows again
    ]
    assert finished(record) == 3


def test_migrates_a_job_to_defragment_nodes():
    # X and Y share node 0, W sits on node 1. X ends: one GPU free on each node. Z needs 2 on one node:
    # Gandiva moves W (the cheapest node to clear: one job) next to Y, and starts Z on node 1.
    jobs = [
        job("X", 0, 20, "a40", 1),
        job("Y", 0, 5000, "a40", 1),
        job("W", 0, 5000, "a40", 1),
        job("Z", 200, 10, "a40", 2),
    ]
    record = run_checked(Gandiva(max_grow_factor=1), jobs)
    at_z = [(j, s) for t, j, s in allocations(record) if t == 200]
    assert at_z == [("W", "a40:1x1"), ("Z", "a40:1x2")]
    out = {o.job_id: o for o in job_outcomes(record)}
    assert out["Z"].first_start == 200 and out["W"].reconfigurations == 1 and out["Y"].reconfigurations == 0
    # without migration Z waits until Y or W ends
    record = run_checked(Gandiva(max_grow_factor=1, max_migrations=0), jobs)
    assert {o.job_id: o for o in job_outcomes(record)}["Z"].first_start > 5000


def test_never_leaves_the_requested_type_and_keeps_invariants():
    records = check_random_traces(lambda: Gandiva(min_remaining_s=0.0), same_type=True)
    for seed, record in enumerate(records):
        requested = {j.job_id: j.requested_gpus for j in random_workload(seed)}
        assert all(
            requested[e.job_id] <= e.num_gpus <= 4 * requested[e.job_id]
            for e in record.events
            if e.kind is EventKind.ALLOCATE
        )


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="power of two"):
        Gandiva(max_grow_factor=3)
    with pytest.raises(ValueError, match="min_grow_speedup"):
        Gandiva(min_grow_speedup=0.5)
