"""DecisionRound's per-round memo of queue-order keys."""

from __future__ import annotations

from collections import Counter

from agents.arena.config import ArenaConfig
from agents.arena.oracle import ThroughputOracle
from agents.arena.round import DecisionRound
from agents.common import order_key
from arena_gym.types import JobView
from tests.agents.arena.test_index import running_snapshot


def test_queue_order_keys_are_read_once_per_job_and_match_the_key():
    snapshot = running_snapshot()
    calls: Counter[str] = Counter()

    def key(view: JobView) -> tuple:
        calls[view.job_id] += 1
        return order_key(view)

    config = ArenaConfig()
    oracle = ThroughputOracle(config)
    oracle.bind(snapshot)
    rnd = DecisionRound(config, snapshot, oracle, (), {}, order=key)
    jobs = [v.job_id for v in (*snapshot.running, *snapshot.pending)]
    first = [rnd._order(j) for j in jobs]
    assert [rnd._order(j) for j in jobs] == first == [order_key(rnd.views[j]) for j in jobs]
    assert calls == Counter(dict.fromkeys(jobs, 1))
