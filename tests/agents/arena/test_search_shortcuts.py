"""The search's shortcuts find what the long way finds: the last downgrade level, the halving memo."""

from __future__ import annotations

from typing import Any

from agents.arena.config import ArenaConfig
from agents.arena.index import ShrinkIndex, halved
from agents.arena.oracle import ThroughputOracle
from agents.arena.search import ArenaSearch
from agents.common import Workspace
from arena_gym.types import JobId, JobView, Snapshot
from tests.agents.arena.test_index import running_snapshot


class LongWay(ArenaSearch):
    """The downgrade search without the last-level shortcut."""

    def _shrink(self, *args: Any, **kwargs: Any) -> None:
        kwargs["last"] = False
        super()._shrink(*args, **kwargs)


def searches(snapshot: Snapshot, kind: type[ArenaSearch]) -> tuple[Workspace, ShrinkIndex, ArenaSearch]:
    config = ArenaConfig()
    oracle = ThroughputOracle(config)
    oracle.bind(snapshot)
    ws = Workspace(snapshot, index=True)
    search = kind(config, ws, oracle, ws.views)
    return ws, search._shrinks, search


def test_last_level_shortcut_gives_the_same_candidates_and_placements():
    snapshot = running_snapshot()
    pending: list[JobView] = list(snapshot.pending)
    assert pending
    short, long = searches(snapshot, ArenaSearch), searches(snapshot, LongWay)
    found_any = False
    for view in pending * 2:
        for gpu_type in short[0].types:
            for n in (1, 2, 4, 8):
                results = []
                for ws, _, search in (short, long):
                    found = search._downgrade(view, gpu_type, n, ws.checkpoint())
                    results.append((found, dict(ws.placement)))
                assert results[0] == results[1]
                found_any = found_any or bool(results[0][0])
    assert found_any  # some search found a candidate


def test_halving_memo_keeps_the_last_two_placements():
    snapshot = running_snapshot()
    config = ArenaConfig()
    oracle, fresh = ThroughputOracle(config), ThroughputOracle(config)
    oracle.bind(snapshot)
    ws = Workspace(snapshot)
    job = next(j for j, p in ws.placement.items() if p.num_gpus >= 4)
    p = ws.placement[job]
    h = halved(p)
    expected = []
    for q in (p, h):
        fresh.bind(snapshot)
        expected.append(fresh.halving_change(ws.views, job, q))
    assert [oracle.halving_change(ws.views, job, q) for q in (p, h)] == expected
    oracle._shape_halving.clear()  # from here on, a miss would have to recompute (and refill it)
    for _ in range(3):
        assert [oracle.halving_change(ws.views, job, q) for q in (h, p)] == expected[::-1]
    assert not oracle._shape_halving
    assert oracle._halving[JobId(job)][0] is p
