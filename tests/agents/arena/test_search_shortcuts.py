"""The search's shortcuts leave what the long way leaves: relinking, the last downgrade level, the halving memo."""

from __future__ import annotations

from typing import Any

from agents.arena.config import ArenaConfig
from agents.arena.index import ShrinkIndex, halved
from agents.arena.oracle import ThroughputOracle
from agents.arena.search import ArenaSearch
from agents.common import Workspace
from arena_gym.types import JobId, JobView, Placement, Snapshot
from tests.agents.arena.test_index import change, running_snapshot


def orders(ws: Workspace, index: ShrinkIndex) -> tuple:
    """Every order a search reads: placements, buckets, node occupants, halving groups, the placed jobs by order stamp.

    (Stamps count edits, so a shortcut that skips an undone edit leaves them lower; only their order is read.)
    """
    buckets = [(t, c, list(jobs)) for t, counts in ws.by_count.items() for c, jobs in counts.items()]
    nodes = [(t, n, list(ws.occupants(t, n))) for t in ws.types for n in range(ws.nodes[t])]
    groups = [(k, c, list(jobs)) for k, g in index._groups.items() for c, jobs in g.items()]
    stamped = sorted(ws.placement, key=ws._order.__getitem__)
    return list(ws.placement.items()), buckets, nodes, groups, stamped, ws.checkpoint()


def test_relink_leaves_what_an_edit_and_its_rollback_leave():
    snapshot = running_snapshot()
    edited, relinked = Workspace(snapshot, index=True), Workspace(snapshot, index=True)
    indexes = ShrinkIndex(edited, change), ShrinkIndex(relinked, change)
    for ws, index in zip((edited, relinked), indexes):
        for t in ws.types:
            index.best(t, 0, None)  # build every group, so that their order is compared too
    jobs = [j for j, p in edited.placement.items() if p.num_gpus >= 2]
    assert len(jobs) >= 3
    for j in (jobs[0], jobs[2], jobs[0], jobs[1]):
        mark = edited.checkpoint()
        edited.set(j, halved(edited.placement[j]))
        edited.rollback(mark)
        relinked.relink(j, halved(relinked.placement[j]))
        assert orders(edited, indexes[0]) == orders(relinked, indexes[1])
    assert list(edited.placement) != list(Workspace(snapshot).placement)  # the orders did move


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


def test_last_level_shortcut_gives_the_same_candidates_and_orders():
    snapshot = running_snapshot()
    pending: list[JobView] = list(snapshot.pending)
    assert pending
    short, long = searches(snapshot, ArenaSearch), searches(snapshot, LongWay)
    relinks: list[JobId] = []
    relink = short[0].relink

    def counted(job: JobId, via: Placement) -> None:
        relinks.append(job)
        relink(job, via)

    short[0].relink = counted  # type: ignore[method-assign]
    for view in pending * 2:
        for gpu_type in short[0].types:
            for n in (1, 2, 4, 8):
                results = []
                for ws, index, search in (short, long):
                    base = ws.checkpoint()
                    found = search._downgrade(view, gpu_type, n, base)
                    results.append((found, orders(ws, index)))
                assert results[0] == results[1]
    assert relinks  # the shortcut was taken
    assert any(
        short[2]._downgrade(v, t, 8, short[0].checkpoint()) for v in pending for t in short[0].types
    )  # some search found a candidate


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
