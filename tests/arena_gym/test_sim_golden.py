"""Golden metrics on tiny traces, with expected times worked out by hand in the comments."""

from __future__ import annotations

import dataclasses

import pytest

from agents.fcfs import FCFS
from agents.srtf import SRTF
from arena_gym.cluster import PRESETS
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics, job_outcomes
from arena_gym.records import EventKind
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import OverheadModel
from tests.helpers import GPT, job, table_model

TINY = PRESETS["tiny"]  # a40: 2 nodes x 2 GPUs, a10: 2 nodes x 2 GPUs
# a40: 2 GPUs on one node take 2.0 s per iteration, 4 GPUs on 2x2 take 1.0 s.
PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a40", 2, 2): 1.0, (GPT, 128, "a10", 1, 2): 3.0})
# Baselines pay the "full" class: 5 s per GPU (cap 100 s): 2 GPUs -> 10 s, 4 GPUs -> 20 s.
CONFIG = SimConfig(overhead=OverheadModel(full_per_gpu_s=5.0, full_cap_s=100.0), overhead_class="full")


def run(policy, jobs, config=CONFIG):
    return run_episode(SimBackend(TINY, PERF, config=config), policy, jobs)


def outcomes(record):
    return {o.job_id: o for o in job_outcomes(record)}


def test_fcfs_head_of_line_blocking_golden():
    jobs = [job("A", 0, 100, "a40", 2), job("B", 10, 50, "a40", 4), job("C", 20, 30, "a40", 2)]
    record = run(FCFS(), jobs)
    out = outcomes(record)
    # A starts at 0, pays 10 s, runs 100 x 2 s: finishes at 210.
    # B (4 GPUs) cannot fit while A holds a node; C waits behind B (head-of-line blocking).
    # At 210 B takes both nodes, pays 20 s, runs 50 x 1 s: finishes at 280.
    # At 280 C starts, pays 10 s, runs 30 x 2 s: finishes at 350.
    assert out["A"].finish == pytest.approx(210.0)
    assert out["B"].finish == pytest.approx(280.0)
    assert out["C"].finish == pytest.approx(350.0)
    m = compute_metrics(record)
    assert m["avg_jct_s"] == pytest.approx((210 + 270 + 330) / 3)
    assert m["avg_queue_s"] == pytest.approx((0 + 200 + 260) / 3)
    assert m["makespan_s"] == pytest.approx(350.0)
    assert m["jobs_finished"] == 3 and m["reconfigurations"] == 0


def test_fcfs_types_do_not_block_each_other():
    jobs = [job("A", 0, 100, "a40", 4), job("B", 5, 100, "a40", 4), job("C", 6, 10, "a10", 2)]
    out = outcomes(run(FCFS(), jobs))
    # C runs on a10 at once although B waits on a40: 6 + 10 + 10 x 3 s = 46.
    assert out["C"].finish == pytest.approx(46.0)
    # A: 20 + 100 = 120; B starts at 120: 120 + 20 + 100 = 240.
    assert out["A"].finish == pytest.approx(120.0)
    assert out["B"].finish == pytest.approx(240.0)


def test_srtf_preempts_longer_job_and_resumes_it_exactly():
    jobs = [job("L", 0, 100, "a40", 4), job("S", 50, 10, "a40", 4)]
    record = run(SRTF(), jobs)
    out = outcomes(record)
    # L starts at 0, pays 20 s, runs from 20. At 50 it has done 30 of 100 iterations (70 s left);
    # S needs 10 s, so L is preempted. S pays 20 s and runs 10 x 1 s: finishes at 80.
    # L resumes at 80, pays 20 s again, runs its remaining 70 iterations: finishes at 170.
    assert out["S"].finish == pytest.approx(80.0)
    assert out["L"].finish == pytest.approx(170.0)
    assert out["L"].preemptions == 1 and out["L"].reconfigurations == 1
    assert out["L"].queued_s == pytest.approx(30.0)  # re-queued from 50 to 80


def test_horizon_stops_and_counts_unfinished():
    jobs = [job("A", 0, 100, "a40", 2), job("B", 0, 1000, "a40", 2), job("late", 500, 10, "a40", 2)]
    record = run(FCFS(), jobs, dataclasses.replace(CONFIG, horizon_s=300.0))
    m = compute_metrics(record)
    # A finishes at 210; B (10 s + 2000 s) is still running at 300; "late" never arrives.
    assert m["jobs_finished"] == 1 and m["jobs_submitted"] == 2 and m["jobs_total"] == 3
    assert record.end_time == pytest.approx(300.0)
    assert m["makespan_s"] == pytest.approx(300.0)


def test_periodic_rounds_only():
    jobs = [job("A", 10, 100, "a40", 2)]
    config = dataclasses.replace(CONFIG, round_s=300.0, event_decisions=False)
    out = outcomes(run(FCFS(), jobs, config))
    # Rounds at 10 (first submission), 310, ... A is decided at the first round: 10 + 10 + 200.
    assert out["A"].finish == pytest.approx(220.0)


def test_event_log_order_and_throughput():
    record = run(FCFS(), [job("A", 0, 100, "a40", 2)])
    kinds = [e.kind for e in record.events]
    assert kinds == [EventKind.SUBMIT, EventKind.ALLOCATE, EventKind.RUN, EventKind.FINISH]
    run_event = record.events[2]
    assert run_event.samples_per_s == pytest.approx(128 / 2.0) and run_event.time == pytest.approx(10.0)
    m = compute_metrics(record, bin_s=10.0)
    assert m["peak_throughput"] == pytest.approx(64.0)
    # 2 of 8 GPUs held for 210 s; running (not reconfiguring) for 200 s.
    assert m["gpu_alloc_ratio"] == pytest.approx(2 / 8)
    assert m["gpu_util"] == pytest.approx(2 * 200 / (8 * 210))


def test_rounds_stop_when_nothing_can_change():
    # the job asks for 8 a40 GPUs (the tiny cluster has 4): FCFS never starts it; with periodic
    # rounds and no horizon the episode must still end (after two stalled rounds)
    config = dataclasses.replace(CONFIG, round_s=300.0)
    record = run(FCFS(), [job("A", 0, 10, "a40", 2), job("big", 5, 10, "a40", 8)], config)
    m = compute_metrics(record)
    assert m["jobs_finished"] == 1 and m["jobs_submitted"] == 2
    # A: 0 + 10 + 20 = 30; rounds at 0, 300 (stall 1), 600 (stall 2): the episode ends at 600
    assert record.end_time == pytest.approx(600.0)
