"""Arena with a queue order other than FIFO: the true shortest remaining time, the belief's Gittins index, preempt_lower."""

from __future__ import annotations

import pytest

from agents.arena import ArenaPolicy
from agents.arena.priority import ShortestRemaining
from agents.search import default_belief
from agents.search.gittins import GittinsPriority
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
    from agents.search.gittins import arena_gittins

    adaptive = arena_gittins(adapt=True)
    record, out, _ = simulate(ONE, PERF, adaptive, JOBS)
    assert len(out) == 3 and adaptive.priority._log.seen  # it saw the jobs
    twin = adaptive.fork()
    twin.priority._log.reset()
    assert adaptive.priority._log.seen and twin.priority is not adaptive.priority
    adaptive.reset()
    assert not adaptive.priority._log.seen
