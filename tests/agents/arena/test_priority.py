"""Arena with a queue order other than FIFO: the true shortest remaining time, the belief's Gittins index, preempt_lower."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.arena import ArenaPolicy
from agents.arena.gittins import GittinsPriority
from agents.arena.priority import ShortestRemaining
from agents.belief import default_belief
from arena_gym.registry import make_policy
from arena_gym.sim import SimBackend
from arena_gym.types import JobStatus
from tests.agents.arena.support import cluster, simulate
from tests.helpers import GPT, job, table_model

ONE = cluster(("a40", 1, 2))  # one node of 2 GPUs
PERF = table_model({(GPT, 128, "a40", 1, 2): 1.0, (GPT, 128, "a40", 1, 1): 2.0})
# A holds the node from 0; B (long) and C (short) wait behind it, B submitted first.
JOBS = [job("A", 0, 100, "a40", 2), job("B", 10, 400, "a40", 2), job("C", 20, 30, "a40", 2)]


def _starts(record) -> list[str]:
    return [e.job_id for e in record.events if e.kind.value == "allocate"]


def test_fifo_serves_in_submission_order_and_srpt_shortest_first() -> None:
    _, fifo, _ = simulate(ONE, PERF, ArenaPolicy(max_upgrade_steps=0), JOBS)
    _, srpt, _ = simulate(ONE, PERF, ArenaPolicy(priority=ShortestRemaining(), max_upgrade_steps=0), JOBS)
    assert fifo["B"].finish < fifo["C"].finish and srpt["C"].finish < srpt["B"].finish
    assert (srpt["B"].jct + srpt["C"].jct) < (fifo["B"].jct + fifo["C"].jct)


def test_which_variants_read_the_true_remaining_work() -> None:
    assert make_policy("arena-srpt").clairvoyant and ArenaPolicy(priority=ShortestRemaining()).clairvoyant
    assert not make_policy("arena-gittins").clairvoyant and not make_policy("arena-pl").clairvoyant


def test_preempt_lower_lets_a_waiting_job_take_a_running_one_after_it() -> None:
    # SRPT order: C (30 iterations) comes before A's remainder once A has run a little? A: 100 at 1 s, C arrives at
    # 20 with 30 left against A's 80: with preempt_lower C takes the node from A (re-queued with its progress).
    jobs = [job("A", 0, 100, "a40", 2), job("C", 20, 30, "a40", 2)]
    plain = ArenaPolicy(priority=ShortestRemaining(), max_upgrade_steps=0)
    preempting = ArenaPolicy(priority=ShortestRemaining(), max_upgrade_steps=0, preempt_lower=True)
    record, out, rec = simulate(ONE, PERF, preempting, jobs)
    assert rec.at(20.0).preemptions == ("A",)
    assert out["C"].finish < out["A"].finish
    _, kept, _ = simulate(ONE, PERF, plain, jobs)
    assert kept["A"].finish < kept["C"].finish


def test_gittins_keys_follow_the_belief_index() -> None:
    belief = default_belief("real")
    backend = SimBackend(ONE, PERF)
    snapshot = backend.reset(JOBS[:1])
    assert snapshot is not None
    key = GittinsPriority(belief).keys(snapshot)
    view = snapshot.pending[0]
    assert key(view)[0] == pytest.approx(-float(belief.gittins_index(view, 0.0))) and key(view)[1:] == (0.0, "A")
    assert view.status is JobStatus.PENDING


def test_an_adaptive_gittins_order_remembers_the_episode_and_forks_it() -> None:
    policy = make_policy("arena-gittins")  # the plain order reads no episode
    assert not policy.priority.adapt
    from agents.arena.gittins import arena_gittins

    adaptive = arena_gittins(adapt=True)
    record, out, _ = simulate(ONE, PERF, adaptive, JOBS)
    assert len(out) == 3 and adaptive.priority._log.seen  # it saw the jobs
    twin = adaptive.fork()
    seen, rows = dict(adaptive.priority._log.seen), dict(adaptive.priority._log.likelihoods.rows)
    twin.priority._log.seen.clear()
    twin.priority._log.likelihoods.rows.clear()
    assert adaptive.priority._log.seen == seen and adaptive.priority._log.likelihoods.rows == rows
    assert rows and twin.priority is not adaptive.priority
    twin.priority._log.reset()
    assert adaptive.priority._log.seen
    adaptive.reset()
    assert not adaptive.priority._log.seen


def test_a_pinned_scale_reads_the_index_there_without_a_posterior(monkeypatch) -> None:
    from agents.arena.gittins import arena_gittins
    from agents.belief.adaptive import EpisodeScale

    belief = default_belief("real")
    backend = SimBackend(ONE, PERF)
    snapshot = backend.reset(JOBS)
    assert snapshot is not None
    backend.apply(make_policy("arena").decide(snapshot))
    snapshot = backend.advance()  # B and C wait, A has run
    assert snapshot is not None and snapshot.now > 0
    views = [*snapshot.pending, *snapshot.running]
    adaptive = arena_gittins(adapt=True)
    adaptive.priority.keys(snapshot)  # it has seen the episode so far

    def refuse(*_args, **_kwargs):
        raise AssertionError("a pinned scale computes no posterior")

    monkeypatch.setattr(EpisodeScale, "posterior", refuse)
    for log_scale in (0.0, 1.5):
        pinned = adaptive.at_scale(log_scale)
        key = pinned.priority.keys(snapshot)
        for view in views:
            attained = view.iterations_done(snapshot.now) * math.exp(-log_scale)
            assert key(view)[0] == pytest.approx(-float(belief.gittins_index(view, attained)))
    plain = make_policy("arena-gittins")  # a fixed order: at_scale is a fork
    twin = plain.at_scale(2.0)
    assert twin.priority is not plain.priority
    assert [twin.priority.keys(snapshot)(v) for v in views] == [plain.priority.keys(snapshot)(v) for v in views]


# Upgrade trial on a 3-GPU node: A (batch 128, 1,000 iterations) and B (batch 64, 50 iterations) start on one
# GPU each and one GPU stays free. Doubling A gains 64 samples/s, doubling B 8: raw, A grows; weighted by
# 1 / remaining samples (A: 128,000, B: 3,200), B's 0.0025 beats A's 0.0005 and B grows.
THREE = cluster(("a40", 1, 3))
SCALING = table_model(
    {
        (GPT, 128, "a40", 1, 1): 2.0,
        (GPT, 128, "a40", 1, 2): 1.0,
        (GPT, 64, "a40", 1, 1): 2.0,
        (GPT, 64, "a40", 1, 2): 1.6,
    }
)
PAIR = [job("A", 0, 1000, "a40", 1), job("B", 0, 50, "a40", 1, batch=64)]


def _sizes_at_start(policy) -> dict[str, int]:
    _, _, rec = simulate(THREE, SCALING, policy, PAIR)
    return {str(j): a.num_gpus for j, a in rec.at(0.0).allocations}


@pytest.mark.parametrize("weighted, grown", [(False, "A"), (True, "B")], ids=["raw-samples", "weighted-by-urgency"])
def test_weighted_upgrades_grow_the_job_with_most_completions_gained(weighted: bool, grown: str) -> None:
    sizes = _sizes_at_start(ArenaPolicy(priority=ShortestRemaining(), weighted_upgrades=weighted))
    assert sizes == {"A": 1, "B": 1, grown: 2}


def test_urgencies_of_the_two_priorities() -> None:
    backend = SimBackend(THREE, SCALING)
    snapshot = backend.reset(PAIR)
    assert snapshot is not None
    a, b = snapshot.pending
    srpt = ShortestRemaining().urgency(snapshot)
    assert srpt(a) == pytest.approx(1 / 128_000) and srpt(b) == pytest.approx(1 / 3_200)
    belief = default_belief("real")
    gittins = GittinsPriority(belief)
    weight = gittins.urgency(snapshot)
    for view in (a, b):
        index = float(belief.gittins_index(gittins._log.attributes(view), 0.0))
        assert weight(view) == pytest.approx(
            index * belief.reference_time(gittins._log.attributes(view)) / view.spec.global_batch
        )
        assert -gittins.keys(snapshot)(view)[0] == pytest.approx(index)  # the same snapshot's indexes, once


def test_weighting_needs_a_priority() -> None:
    with pytest.raises(ValueError, match="need a priority"):
        ArenaPolicy(weighted_fits=True)


# A downgrade on a 4-GPU node: A (batch 128, 1,000 iterations) and B (batch 64, 50 iterations) hold 2 GPUs each
# when C (batch 128, 100 iterations, 1 GPU) arrives. Halving A loses 64 samples/s, halving B 8: raw, B is halved.
# In C's samples/s weighted by urgency relative to C's (A x 0.1, B x 4), A loses 6.4 and B 32: A is halved.
FOUR = cluster(("a40", 1, 4))
TRIO = [job("A", 0, 1000, "a40", 2), job("B", 0, 50, "a40", 2, batch=64), job("C", 10, 100, "a40", 1)]


@pytest.mark.parametrize("weighted, halved", [(False, "B"), (True, "A")], ids=["raw-samples", "weighted-by-urgency"])
def test_weighted_fits_halve_the_job_whose_loss_costs_fewest_completions(weighted: bool, halved: str) -> None:
    policy = ArenaPolicy(priority=ShortestRemaining(), weighted_fits=weighted, max_upgrade_steps=0)
    _, out, rec = simulate(FOUR, SCALING, policy, TRIO)
    sizes = {str(j): a.num_gpus for j, a in rec.at(10.0).allocations}
    assert sizes == {halved: 1, "C": 1}
    assert len(out) == 3


def test_the_adaptive_order_reads_what_a_fresh_posterior_and_index_give_at_every_decision(monkeypatch) -> None:
    from agents.arena.gittins import arena_gittins
    from agents.belief.adaptive import EpisodeLog, EpisodeScale

    memoised_posterior, memoised_indexes = EpisodeLog.posterior, GittinsPriority._indexes
    checked: list[int] = []

    def posterior(log: EpisodeLog, scale: EpisodeScale) -> np.ndarray:
        weights = memoised_posterior(log, scale)
        assert np.array_equal(weights, scale.posterior(dict(log.seen)))  # no memo: every job's row afresh
        return weights

    def indexes(priority: GittinsPriority, snapshot) -> dict:
        memo = memoised_indexes(priority, snapshot)
        views = [v for v in (*snapshot.pending, *snapshot.running) if priority.known(v)]
        attained = [v.iterations_done(snapshot.now) * priority._shrink for v in views]
        afresh = priority.belief.gittins_index([priority._log.attributes(v) for v in views], attained)
        assert [memo[v.job_id] for v in views] == np.atleast_1d(afresh).tolist()
        checked.append(len(views))
        return memo

    monkeypatch.setattr(EpisodeLog, "posterior", posterior)
    monkeypatch.setattr(GittinsPriority, "_indexes", indexes)
    many = [job(f"J{i}", 7.0 * i, 40 + 90 * (i % 4), "a40", 1 + i % 2) for i in range(12)]
    _, out, _ = simulate(ONE, PERF, arena_gittins(adapt=True), many)
    assert len(out) == len(many) and len(checked) > len(many) and max(checked) > 2
