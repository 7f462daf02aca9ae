"""Gavel: max-sum normalised throughput over GPU types, the migration cap, DP feasibility."""

from __future__ import annotations

import pytest

from agents.gavel import Gavel
from arena_gym.records import EventKind
from arena_gym.sim import SimBackend
from arena_gym.types import ClusterSpec, GpuType, NodeGroup
from estimator.measured import ARTIFACT_GPU_MEMORY_GB, DpMemoryTable, MeasuredPerfModel
from tests.agents.baseline_cases import FREE, TINY, check_random_traces, run_checked
from tests.helpers import GPT, MOE, job, table_model

EIGHT = ClusterSpec("eight", (NodeGroup(GpuType("a40"), 2, 4), NodeGroup(GpuType("a10"), 2, 4)))


def moves_at(record, t):
    return sorted((e.job_id, e.shape) for e in record.events if e.kind is EventKind.ALLOCATE and e.time == t)


def test_moves_the_job_that_gains_most_to_the_faster_type():
    # J1 (GPT) runs 1.2x slower on a10 than on a40, J2 (MoE) 3x slower. B holds all of a40 until 100
    # and C (a40 only) waits for 2 of them. At 100 the MILP values (GPUs x normalised throughput,
    # a move costs 0.05 per GPU): C on a40 (2) + J2 moved (2 x 0.95) + J1 stays (2 x 0.83) = 5.57
    # beats moving J1 instead (4.57) or moving both and leaving C out (3.8).
    perf = table_model(
        {
            (GPT, 128, "a40", 1, 2): 1.0,
            (GPT, 128, "a10", 1, 2): 1.2,
            (MOE, 128, "a40", 1, 2): 1.0,
            (MOE, 128, "a10", 1, 2): 3.0,
            (GPT, 256, "a40", 2, 2): 1.0,
            (MOE, 256, "a40", 1, 2): 1.0,
        }
    )
    jobs = [
        job("B", 0, 100, "a40", 4, batch=256),
        job("J1", 0, 10_000, "a10", 2),
        job("J2", 0, 10_000, "a10", 2, model=MOE),
        job("C", 50, 100, "a40", 2, model=MOE, batch=256),
    ]
    policy = Gavel()
    record = run_checked(policy, jobs, cluster=TINY, perf=perf, config=FREE)
    assert moves_at(record, 0) == [("B", "a40:2x2"), ("J1", "a10:1x2"), ("J2", "a10:1x2")]
    assert moves_at(record, 50) == []  # nothing fits while B runs
    assert moves_at(record, 100) == [("C", "a40:1x2"), ("J2", "a40:1x2")]
    assert policy.solves >= 2  # capacity conflicts at 0 and 100 went to the MILP


def five_on_a10():
    # five 1-GPU jobs, a40 1.0 s/iteration, a10 1.5 / 2 / 3 / 4 / 5 s: normalised a10 throughput
    # 0.67 / 0.5 / 0.33 / 0.25 / 0.2, so j4 gains most, then j3, j2, j1, j0.
    times = {(GPT, 4096, "a40", 2, 4): 1.0}
    jobs = [job("B", 0, 100, "a40", 8, batch=4096)]
    for i, slow in enumerate((1.5, 2.0, 3.0, 4.0, 5.0)):
        batch = 128 * 2**i
        times[(GPT, batch, "a40", 1, 1)] = 1.0
        times[(GPT, batch, "a10", 1, 1)] = slow
        jobs.append(job(f"j{i}", 0, 10_000, "a10", 1, batch=batch))
    return table_model(times), jobs


@pytest.mark.parametrize("cap, moved", [(3, ["j2", "j3", "j4"]), (1, ["j4"])])
def test_migration_cap_limits_type_changes_per_event(cap, moved):
    perf, jobs = five_on_a10()
    record = run_checked(Gavel(max_migrations=cap), jobs, cluster=EIGHT, perf=perf, config=FREE)
    assert [j for j, shape in moves_at(record, 100)] == moved
    assert all(shape == "a40:1x1" for _, shape in moves_at(record, 100))


def test_dp_infeasible_type_is_never_chosen():
    # J fits a10 under the AP table but not under the DP memory rule (20 GB x 1.2 > 0.8 x 24 GB):
    # it waits for a40 instead of taking the idle a10 GPUs.
    table = table_model(
        {(GPT, 128, "a40", 1, 2): 1.0, (GPT, 128, "a10", 1, 2): 1.0, (GPT, 256, "a40", 2, 2): 1.0}
    ).table
    perf = MeasuredPerfModel(table, DpMemoryTable({("gpt", "1.3B", 128, 2): 20.0}), ARTIFACT_GPU_MEMORY_GB)
    record = run_checked(
        Gavel(),
        [job("B", 0, 100, "a40", 4, batch=256), job("J", 10, 50, "a10", 2)],
        cluster=TINY,
        perf=perf,
        config=FREE,
    )
    starts = [(e.time, e.job_id, e.shape) for e in record.events if e.kind is EventKind.ALLOCATE]
    assert starts == [(0, "B", "a40:2x2"), (100, "J", "a40:1x2")]


def test_normalised_throughput_and_invariants_over_random_traces():
    perf, jobs = five_on_a10()
    snapshot = SimBackend(EIGHT, perf).reset(jobs)
    policy = Gavel()
    policy.decide(snapshot)
    assert policy.normalised_throughput(snapshot, jobs[3], 1) == pytest.approx({"a40": 1.0, "a10": 1 / 3})
    records = check_random_traces(Gavel)
    assert not any(e.kind is EventKind.PREEMPT for r in records for e in r.events)


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="max_migrations"):
        Gavel(max_migrations=-1)
    with pytest.raises(ValueError, match="fifo_bonus"):
        Gavel(fifo_bonus=0.5)
