"""Arena's halving index answers as a scan of every bucket in order would, through any edits and rollbacks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.arena.index import ShrinkIndex, halved, halved_key
from agents.common import Workspace, key_of
from agents.fcfs import FCFS
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import JobId, Placement, Snapshot
from tests.agents.arena.support import cluster
from tests.helpers import job, uniform_model

SPEC = cluster(("a40", 4, 4), ("a10", 6, 2))
GPUS = (1, 2, 4, 4, 8, 2, 1, 2, 4, 2, 2, 1, 2)  # requests, several of each count: ties among equal changes
TOPS = (0, 2, 4, 8, 16)


def running_snapshot() -> Snapshot:
    """A snapshot in which FCFS started every job of ``GPUS`` it could."""
    jobs = [job(f"j{i:02d}", 0.0, 100, "a40" if i % 3 else "a10", n) for i, n in enumerate(GPUS)]
    backend = SimBackend(SPEC, uniform_model(counts=(1, 2, 4, 8), per_node_max=4), config=SimConfig())
    snapshot = backend.reset(jobs)
    backend.apply(FCFS().decide(snapshot))
    snapshot = backend.advance()
    assert snapshot is not None and len(snapshot.running) >= 8
    return snapshot


def running_workspace() -> Workspace:
    """A workspace, indexed at once, over :func:`running_snapshot`."""
    return Workspace(running_snapshot(), index=True)


def test_index_built_with_the_workspace_matches_the_lazy_build_in_order():
    snapshot = running_snapshot()
    eager, lazy = Workspace(snapshot, index=True), Workspace(snapshot)
    as_lists = [(t, [(c, list(jobs)) for c, jobs in counts.items()]) for t, counts in eager.by_count.items()]
    assert as_lists == [(t, [(c, list(jobs)) for c, jobs in counts.items()]) for t, counts in lazy.by_count.items()]
    assert sum(len(jobs) for counts in eager.by_count.values() for jobs in counts.values()) == len(eager.placement)


def change(job_id: JobId, placement: Placement) -> float | None:
    """A halving change with many ties (it depends on the count only) and some infeasible halvings."""
    return None if int(job_id[1:]) % 5 == 0 else -float(placement.num_gpus)


def scan(ws: Workspace, gpu_type: str, top: int, best: tuple[float, JobId | None] | None):
    """The reference: every job of every eligible bucket in order, kept only when strictly better."""
    for count, jobs in ws.by_count[gpu_type].items():
        if count < 2 or 2 * count < top:
            continue
        for j in jobs:
            c = change(j, ws.placement[j])
            if c is not None and (best is None or c > best[0]):
                best = (c, j)
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("halve", "release", "restore", "mark", "rollback")), st.integers(0, 12))))
def test_best_halving_matches_an_ordered_scan_through_edits_and_rollbacks(ops):
    ws = running_workspace()
    index = ShrinkIndex(ws, change)
    original = dict(ws.placement)
    marks = []
    for op, i in ops:
        j = JobId(f"j{i:02d}")
        p = ws.placement.get(j)
        if op == "halve" and p is not None and p.num_gpus >= 2:
            ws.set(j, halved(p))
        elif op == "release":
            ws.set(j, None)
        elif op == "restore" and j in original and p is None and ws.fits(original[j]):
            ws.set(j, original[j])
        elif op == "mark":
            marks.append(ws.checkpoint())
        elif op == "rollback" and marks:
            ws.rollback(marks.pop())
        for t in ws.types:
            for top in TOPS:
                for given_best in (None, (-4.0, None)):
                    assert index.best(t, top, given_best) == scan(ws, t, top, given_best)


def test_halved_keeps_one_object_per_placement_and_its_key_matches():
    p = Placement("a40", (0, 3), 4)
    half = halved(p)
    assert half == Placement("a40", (0,), 4) and halved(Placement("a40", (0, 3), 4)) is half
    assert halved(Placement("a10", (2,), 2)) == Placement("a10", (2,), 1)
    for q in (p, Placement("a10", (2,), 2), Placement("a40", (1, 2, 3, 5), 2)):
        assert halved_key(q) == key_of(halved(q))
