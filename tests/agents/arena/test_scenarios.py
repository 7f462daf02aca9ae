"""Hand-checked Arena scenarios; the expected times are worked out in the comments.

Arena pays the pruned overhead: 10 s per GPU, at most 40 s (2 GPUs: 20 s, 4 GPUs: 40 s).
Throughput = batch 128 / iteration time.
"""

from __future__ import annotations

import pytest

from agents.arena import ArenaPolicy
from arena_gym.metrics import compute_metrics
from arena_gym.placement import allocation
from arena_gym.records import EventKind
from arena_gym.sim import SimBackend
from arena_gym.types import Decision, Placement
from estimator.measured import DpMemoryTable, MeasuredPerfModel, MeasuredTable
from tests.agents.arena.support import cluster, simulate
from tests.helpers import GPT, MOE, job, table_model

ONE = cluster(("a40", 2, 2))  # one type: 2 nodes x 2 GPUs


def placements(decision):
    return {j: a.placement for j, a in decision.allocations}


# ---------------------------------------------------------------- (1) elastic shrink
# GPT: 2x2 a40 1.0 s (128/s), 1x2 1.6 s (80/s). MOE: 1x2 2.0 s (64/s). Nothing else is feasible.
SHRINK_PERF = table_model({(GPT, 128, "a40", 2, 2): 1.0, (GPT, 128, "a40", 1, 2): 1.6, (MOE, 128, "a40", 1, 2): 2.0})
SHRINK_JOBS = [job("A", 0, 200, "a40", 4), job("B", 100, 50, "a40", 2, model=MOE)]


def test_shrinks_big_job_to_admit_blocked_one_when_throughput_rises():
    record, out, rec = simulate(ONE, SHRINK_PERF, ArenaPolicy(), SHRINK_JOBS)
    # t=100: A (4 GPUs, 128/s) halves to node 0 (80/s) and B takes node 1 (64/s): 144 > 128.
    assert placements(rec.at(100.0)) == {"A": Placement("a40", (0,), 2), "B": Placement("a40", (1,), 2)}
    # A: runs from 40 at 1 it/s, 60 done at 100; pays 20 s, then 140 x 1.6 s = 224 s -> would end at 344.
    # B: 100 + 20 + 50 x 2 s = 220. At 220 the upgrade trial grows A back to 4 GPUs (+48/s):
    # A did 60 + 100 / 1.6 = 122.5, pays 40 s, runs the last 77.5 at 1 s each: 260 + 77.5 = 337.5.
    assert out["B"].finish == pytest.approx(220.0)
    assert out["A"].finish == pytest.approx(337.5)
    assert placements(rec.at(220.0)) == {"A": Placement("a40", (0, 1), 2)}
    runs = [(e.time, e.job_id, round(e.samples_per_s, 6)) for e in record.events if e.kind is EventKind.RUN]
    assert runs == [(40.0, "A", 128.0), (120.0, "A", 80.0), (120.0, "B", 64.0), (260.0, "A", 128.0)]
    assert compute_metrics(record)["avg_jct_s"] == pytest.approx((337.5 + 120.0) / 2)


def test_no_shrink_when_total_throughput_would_fall():
    # B only makes 32/s (4.0 s per iteration): 80 + 32 = 112 < 128, so B waits for A (40 + 200 = 240).
    perf = table_model({(GPT, 128, "a40", 2, 2): 1.0, (GPT, 128, "a40", 1, 2): 1.6, (MOE, 128, "a40", 1, 2): 4.0})
    _, out, rec = simulate(ONE, perf, ArenaPolicy(), SHRINK_JOBS)
    assert rec.at(100.0).is_empty
    assert out["A"].finish == pytest.approx(240.0)
    assert out["B"].finish == pytest.approx(240.0 + 20.0 + 200.0)


def test_no_scaling_variant_never_changes_gpu_counts():
    record, out, _ = simulate(ONE, SHRINK_PERF, ArenaPolicy(no_scaling=True), SHRINK_JOBS)
    # A keeps 4 GPUs: 40 + 200 = 240; B then starts: 240 + 20 + 100 = 360.
    assert out["A"].finish == pytest.approx(240.0)
    assert out["B"].finish == pytest.approx(360.0)
    assert all(e.num_gpus == {"A": 4, "B": 2}[e.job_id] for e in record.events if e.kind is EventKind.ALLOCATE)


def test_deadline_aware_rejects_a_shrink_that_misses_the_deadline():
    jobs = [job("A", 0, 200, "a40", 4, deadline=300.0), job("B", 100, 50, "a40", 2, model=MOE)]
    # Shrinking A at 100 would end it at 100 + 20 + 140 x 1.6 = 344 > 300: infeasible, B waits.
    _, out, rec = simulate(ONE, SHRINK_PERF, ArenaPolicy(deadline_aware=True), jobs)
    assert rec.at(100.0).is_empty
    assert out["A"].finish == pytest.approx(240.0) and out["A"].deadline_met
    assert out["B"].finish == pytest.approx(360.0)
    # Plain Arena shrinks A and A misses its deadline (337.5 > 300).
    _, plain, _ = simulate(ONE, SHRINK_PERF, ArenaPolicy(), jobs)
    assert plain["A"].finish == pytest.approx(337.5) and not plain["A"].deadline_met


# ---------------------------------------------------------------- (2) type change, (8) dp_only
TWO_TYPES = cluster(("a40", 1, 2), ("a10", 1, 2))
# GPT 1.3B, batch 128: a40 1x2 2.0 s (64/s), a10 1x2 3.0 s (42.7/s); no other shape.
TYPE_TIMES = {(GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a10", 1, 2): 3.0}
TYPE_JOBS = [job("A", 0, 100, "a40", 2), job("B", 10, 50, "a40", 2)]


def test_blocked_job_starts_on_another_type_with_idle_gpus():
    record, out, rec = simulate(TWO_TYPES, table_model(TYPE_TIMES), ArenaPolicy(), TYPE_JOBS)
    # a40 is full (A until 20 + 200 = 220): B starts on a10 at 10: 10 + 20 + 50 x 3 s = 180.
    assert placements(rec.at(10.0)) == {"B": Placement("a10", (0,), 2)}
    assert out["B"].finish == pytest.approx(180.0) and out["B"].last_gpu_type == "a10"
    assert out["A"].finish == pytest.approx(220.0)


def test_no_type_change_variant_waits_for_the_requested_type():
    _, out, _ = simulate(TWO_TYPES, table_model(TYPE_TIMES), ArenaPolicy(no_type_change=True), TYPE_JOBS)
    # B waits for A: 220 + 20 + 50 x 2 s = 340, on a40.
    assert out["B"].finish == pytest.approx(340.0) and out["B"].last_gpu_type == "a40"


def test_dp_only_does_not_choose_a_config_infeasible_under_dp():
    # DP memory rule: GPT-1.3B on 2 GPUs needs 19.7 GB; 19.7 x 1.2 = 23.6 > 0.8 x 24 GB (a10) but fits 48 GB (a40).
    table = MeasuredTable({(GPT.family, GPT.size, 128, t, n, g): s for (_, _, t, n, g), s in TYPE_TIMES.items()})
    perf = MeasuredPerfModel(table, DpMemoryTable({("gpt", "1.3B", 128, 2): 19.7}), {"a40": 48.0, "a10": 24.0})
    assert perf.dp_iter_time(GPT, 128, Placement("a10", (0,), 2).shape) == float("inf")
    _, out, rec = simulate(TWO_TYPES, perf, ArenaPolicy(dp_only=True), TYPE_JOBS)
    assert rec.at(10.0).is_empty  # a10 x 2 is DP-infeasible: B waits for a40 (340), as without type change
    assert out["B"].finish == pytest.approx(340.0) and out["B"].last_gpu_type == "a40"
    _, plain, _ = simulate(TWO_TYPES, perf, ArenaPolicy(), TYPE_JOBS)
    assert plain["B"].last_gpu_type == "a10"  # the AP proxy plan fits a10 x 2


# ---------------------------------------------------------------- (3) upgrade trial
def test_upgrade_trial_grows_a_running_job_into_freed_gpus():
    # GPT: 1x2 2.0 s (64/s), 2x2 1.2 s (106.7/s): growing gains 42.7/s. MOE: 1x2 2.0 s only.
    perf = table_model({(GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a40", 2, 2): 1.2, (MOE, 128, "a40", 1, 2): 2.0})
    jobs = [job("A", 0, 100, "a40", 2), job("B", 0, 10, "a40", 2, model=MOE)]
    record, out, rec = simulate(ONE, perf, ArenaPolicy(), jobs)
    # Both start at 0 (node 0, node 1), run from 20; B ends at 20 + 10 x 2 = 40.
    # A has done 10; it grows to 4 GPUs, pays 40 s and runs 90 x 1.2 = 108 s: 80 + 108 = 188.
    assert placements(rec.at(40.0)) == {"A": Placement("a40", (0, 1), 2)}
    assert out["B"].finish == pytest.approx(40.0)
    assert out["A"].finish == pytest.approx(188.0)
    grow = [e for e in record.events if e.kind is EventKind.RUN and e.job_id == "A"][-1]
    assert grow.samples_per_s == pytest.approx(128 / 1.2)
    _, fixed, _ = simulate(ONE, perf, ArenaPolicy(no_scaling=True), jobs)
    assert fixed["A"].finish == pytest.approx(220.0)  # 20 + 100 x 2 s


# ---------------------------------------------------------------- (4) backfill and preemption
# A: GPT 1x2 only; B: MOE 2x2 only (4 GPUs, 1.0 s); C: GPT 1x2. Nothing can shrink or grow.
BACKFILL_PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0, (MOE, 128, "a40", 2, 2): 1.0})
BACKFILL_JOBS = [job("A", 0, 50, "a40", 2), job("B", 10, 30, "a40", 4, model=MOE), job("C", 20, 100, "a40", 2)]


def test_opportunistic_backfill_is_preempted_when_its_blocker_can_start():
    record, out, rec = simulate(ONE, BACKFILL_PERF, ArenaPolicy(), BACKFILL_JOBS)
    # A: 20 + 50 x 2 = 120. B (4 GPUs) waits; C backfills node 1 at 20 and runs from 40.
    assert placements(rec.at(20.0)) == {"C": Placement("a40", (1,), 2)}
    # At 120 B can start only on C's GPUs: C (40 of 100 done) is preempted; B: 120 + 40 + 30 = 190.
    assert rec.at(120.0).preemptions == ("C",)
    assert placements(rec.at(120.0)) == {"B": Placement("a40", (0, 1), 2)}
    assert out["B"].finish == pytest.approx(190.0)
    # C resumes at 190: 190 + 20 + 60 x 2 = 330.
    assert out["C"].finish == pytest.approx(330.0) and out["C"].preemptions == 1
    assert [e.job_id for e in record.events if e.kind is EventKind.PREEMPT] == ["C"]


def test_no_opportunism_variant_keeps_fifo_per_type():
    _, out, rec = simulate(ONE, BACKFILL_PERF, ArenaPolicy(no_opportunism=True), BACKFILL_JOBS)
    # C may not pass B: B starts at 120 (ends 190), then C: 190 + 20 + 200 = 410.
    assert rec.at(20.0).is_empty
    assert out["B"].finish == pytest.approx(190.0)
    assert out["C"].finish == pytest.approx(410.0) and out["C"].preemptions == 0


# ---------------------------------------------------------------- bubble migration
def test_bubble_migration_repacks_nodes_to_place_at_best_locality():
    spec = cluster(("a40", 2, 4))  # 2 nodes x 4 GPUs
    perf = table_model({(GPT, 128, "a40", 1, 2): 2.0, (MOE, 128, "a40", 1, 4): 1.0, (MOE, 128, "a40", 2, 2): 1.0})
    jobs = [
        job("X1", 0, 500, "a40", 2),
        job("X2", 0, 10, "a40", 2),
        job("X3", 0, 500, "a40", 2),
        job("Y", 100, 10, "a40", 4, model=MOE),
    ]
    _, out, rec = simulate(spec, perf, ArenaPolicy(), jobs)
    # At 0: best fit puts X1, X2 on node 0 and X3 on node 1. X2 ends at 40: both nodes have 2 free.
    assert placements(rec.at(0.0)) == {
        "X1": Placement("a40", (0,), 2),
        "X2": Placement("a40", (0,), 2),
        "X3": Placement("a40", (1,), 2),
    }
    # Y needs 4 GPUs on one node: X3 moves into node 0's bubble and Y takes node 1 (no spread 2x2).
    assert placements(rec.at(100.0)) == {"X3": Placement("a40", (0,), 2), "Y": Placement("a40", (1,), 4)}
    assert out["X3"].reconfigurations == 1 and out["X1"].reconfigurations == 0


# ---------------------------------------------------------------- relaxed locality, introspective migration
SPREAD_PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0, (MOE, 128, "a40", 1, 2): 2.0})  # 2x1 = 2.0 / 0.9 s


def start_by_hand(jobs, placements_by_job):
    """A simulator at its first decision point with jobs placed by hand (spread on purpose)."""
    backend = SimBackend(ONE, SPREAD_PERF)
    backend.reset(jobs)
    backend.apply(
        Decision(
            tuple(
                (j, allocation(SPREAD_PERF, next(s for s in jobs if s.job_id == j), p))
                for j, p in placements_by_job.items()
            )
        )
    )
    return backend


def test_relaxed_locality_when_bubble_migration_cannot_help():
    # V holds one GPU on each node (2x1): it cannot move onto a node it already uses, so
    # migration frees no node and R (2 GPUs) is placed spread, 2x1, at 128 x 0.9 / 2 = 57.6/s.
    jobs = [job("V", 0, 1000, "a40", 2), job("R", 50, 10, "a40", 2, model=MOE)]
    backend = start_by_hand(jobs, {"V": Placement("a40", (0, 1), 1)})
    snap = backend.advance()
    assert snap.now == 50.0 and snap.arrivals == ("R",)
    decision = ArenaPolicy().decide(snap)
    assert placements(decision) == {"R": Placement("a40", (0, 1), 1)}
    backend.apply(decision)
    backend.check_invariants()


def test_introspective_migration_packs_a_spread_job_after_a_departure():
    # V and Z both run spread (2x1). When Z ends (20 s overhead + 10 x 2.0 / 0.9 s), V moves to node 0 (1x2).
    jobs = [job("V", 0, 1000, "a40", 2), job("Z", 0, 10, "a40", 2, model=MOE)]
    backend = start_by_hand(jobs, {"V": Placement("a40", (0, 1), 1), "Z": Placement("a40", (0, 1), 1)})
    snap = backend.advance()
    assert snap.departures == ("Z",) and snap.now == pytest.approx(20.0 + 10 * 2.0 / 0.9)
    decision = ArenaPolicy().decide(snap)
    assert placements(decision) == {"V": Placement("a40", (0,), 2)}
