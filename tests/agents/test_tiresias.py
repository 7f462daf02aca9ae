"""Tiresias (discretised 2D-LAS): demotion, FIFO within a queue, starvation promotion, invariants."""

from __future__ import annotations

import pytest

from agents.tiresias import Tiresias
from arena_gym.metrics import job_outcomes
from arena_gym.records import EventKind
from arena_gym.types import JobStatus, JobView
from tests.agents.baseline_cases import SMALL, check_random_traces, run_checked
from tests.helpers import GPT, job, table_model

# a40 4 GPUs on 2x2 take 1.0 s per iteration; 2 GPUs on one node 2.0 s.
PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a40", 2, 2): 1.0})


def outcomes(record):
    return {o.job_id: o for o in job_outcomes(record)}


def test_long_job_is_demoted_and_newer_short_job_runs_first():
    # threshold 100 GPU-s: L (4 GPUs) starts at 0, pays 20 s, has 4 x 80 = 320 GPU-s at t = 100 -> queue 1.
    # S arrives at 100 in queue 0 and preempts L; S pays 20 s, runs 10 x 1 s: finishes at 130.
    # L resumes at 130, pays 20 s, runs its remaining 1000 - 80 = 920 iterations: finishes at 1070.
    record = run_checked(
        Tiresias(thresholds_gpu_s=(100.0,)),
        [job("L", 0, 1000, "a40", 4), job("S", 100, 10, "a40", 4)],
        perf=PERF,
        config=SMALL,
    )
    out = outcomes(record)
    assert out["S"].finish == pytest.approx(130.0)
    assert out["L"].finish == pytest.approx(1070.0)
    assert out["L"].preemptions == 1


def test_same_queue_jobs_do_not_preempt_each_other():
    # With a threshold far above both jobs' service, both stay in queue 0: S waits for L (FIFO).
    record = run_checked(
        Tiresias(thresholds_gpu_s=(1e9,)),
        [job("L", 0, 1000, "a40", 4), job("S", 100, 10, "a40", 4)],
        perf=PERF,
        config=SMALL,
    )
    out = outcomes(record)
    assert out["L"].preemptions == 0
    assert out["L"].finish == pytest.approx(1020.0)
    assert out["S"].finish == pytest.approx(1020.0 + 20.0 + 10.0)


def test_queue_index_follows_thresholds():
    policy = Tiresias(thresholds_gpu_s=(100.0, 1000.0))

    def view(service):
        return JobView(
            job("X", 0, 10, "a40", 2), JobStatus.PENDING, None, 0.0, 0.0, 0.0, None, None, service, 0.0, 0, 0
        )

    assert [policy.queue(view(s), 0.0) for s in (0.0, 99.9, 100.0, 999.0, 5000.0)] == [0, 0, 1, 1, 2]


def test_starved_job_is_promoted_back_to_the_top_queue():
    # L (queue 1 after 80 s on 4 GPUs) is preempted at 100 by S0. Short jobs (20 s overhead + 10 s)
    # arrive every 30 s and keep all 4 GPUs busy until 280. Without promotion L restarts only at 280.
    # With starvation_factor 0.5, L (80 s executed) is promoted after waiting 40 s: at the next
    # decision point, 160 (S1 ends, S2 arrives), it ranks first in queue 0 (earliest submission).
    jobs = [job("L", 0, 1000, "a40", 4)] + [job(f"S{i}", 100 + 30 * i, 10, "a40", 4) for i in range(6)]

    def l_starts(factor):
        record = run_checked(
            Tiresias(thresholds_gpu_s=(100.0,), starvation_factor=factor), jobs, perf=PERF, config=SMALL
        )
        return [e.time for e in record.events if e.kind is EventKind.ALLOCATE and e.job_id == "L"]

    assert l_starts(None) == [0.0, 280.0]
    assert l_starts(0.5)[:2] == [0.0, 160.0]


def test_requested_shape_only_and_never_on_infeasible_shape():
    # a10 has no entry in PERF: an a10 request is never started; the a40 job runs at its requested shape.
    record = run_checked(Tiresias(), [job("A", 0, 10, "a40", 2), job("B", 0, 10, "a10", 2)], perf=PERF, config=SMALL)
    allocs = [e for e in record.events if e.kind is EventKind.ALLOCATE]
    assert [(e.job_id, e.shape) for e in allocs] == [("A", "a40:1x2")]


def test_invariants_and_determinism_over_random_traces():
    records = check_random_traces(lambda: Tiresias(thresholds_gpu_s=(200.0, 2000.0)), same_type=True)
    assert any(e.kind is EventKind.PREEMPT for r in records for e in r.events)  # the LAS queues do preempt


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="strictly increasing"):
        Tiresias(thresholds_gpu_s=(10.0, 5.0))
    with pytest.raises(ValueError, match="starvation_factor"):
        Tiresias(starvation_factor=0.0)
