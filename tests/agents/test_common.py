"""The policy kit: the workspace's undo log and decision order, the estimates' memo, the settings path."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from agents.common import DpBelief, Estimates, FreeGpus, TypeCount, Workspace, configure, requested
from agents.fcfs import FCFS
from arena_gym.cluster import PRESETS
from arena_gym.core.information import Masker
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import GpuType, JobId, Placement, ResourceShape, Snapshot
from tests.helpers import GPT, MOE, job, uniform_model

TINY = PRESETS["tiny"]  # a40: 2 nodes x 2 GPUs, a10: 2 nodes x 2 GPUs


def running_snapshot() -> Snapshot:
    """A snapshot at t = 5 with A (a40 x 2), B (a40 x 1) and C (a10 x 2) running and D pending."""
    jobs = [
        job("A", 0, 100, "a40", 2),
        job("B", 0, 100, "a40", 1),
        job("C", 0, 100, "a10", 2),
        job("D", 5, 10, "a40", 4),
    ]
    backend = SimBackend(TINY, uniform_model(), config=SimConfig(overhead_class="none"))
    first = backend.reset(jobs)
    backend.apply(FCFS().decide(first))
    snapshot = backend.advance()
    assert snapshot is not None and snapshot.now == 5.0 and len(snapshot.running) == 3
    return snapshot


def state(ws: Workspace) -> tuple:
    occupants = {t: {n: dict(ws.occupants(t, n)) for n in range(ws.nodes[t]) if ws.occupants(t, n)} for t in ws.types}
    counts = {t: {c: set(jobs) for c, jobs in ws.by_count[t].items() if jobs} for t in ws.types}
    return ({t: f.tolist() for t, f in ws.free.items()}, dict(ws.total_free), dict(ws.placement), occupants, counts)


def test_workspace_copies_the_snapshot_and_rolls_back_every_edit():
    snapshot = running_snapshot()
    before_free = {t: f.copy() for t, f in snapshot.free.items()}
    ws = Workspace(snapshot)
    start = state(ws)
    assert ws.free_gpus("a40") == 1 and ws.total_gpus("a40") == 4 and ws.largest("a40") == 2
    mark = ws.checkpoint()
    ws.release(JobId("A"))
    ws.hold(JobId("D"), ws.find("a40", 2))
    ws.move(JobId("C"), "a10", 1)
    assert ws.free_gpus("a10") == 3 and ws.changed("C") and ws.changed("A")
    edits = ws.changes_since(mark)
    assert [j for j, _, _ in edits] == ["A", "D", "C", "C"]  # a move releases, then holds
    after = state(ws)
    ws.rollback(mark)
    assert state(ws) == start and not ws.changed("A")
    ws.redo(edits)
    assert state(ws) == after
    assert all(np.array_equal(snapshot.free[t], before_free[t]) for t in snapshot.free)  # never touched


def test_indexes_built_on_first_use_match_indexes_kept_from_the_start():
    snapshot = running_snapshot()
    eager, lazy = Workspace(snapshot, index=True), Workspace(snapshot)
    for ws in (eager, lazy):
        ws.release(JobId("B"))
        ws.hold(JobId("D"), ws.find("a40", 2))
        ws.move(JobId("C"), "a10", 1)
    assert state(lazy) == state(eager)
    assert {t: [list(jobs) for jobs in lazy.by_count[t].values()] for t in lazy.types} == {
        t: [list(jobs) for jobs in eager.by_count[t].values() if jobs] for t in eager.types
    }


class BucketMirror:
    """An index watcher that rebuilds ``by_count`` from what it hears (order included)."""

    def __init__(self, ws: Workspace) -> None:
        self.buckets = {(t, c): list(jobs) for t in ws.types for c, jobs in ws.by_count[t].items()}
        ws.watch(self)

    def linked(self, job, placement):
        self.buckets.setdefault((placement.gpu_type, placement.num_gpus), []).append(job)

    def unlinked(self, job, placement):
        self.buckets[placement.gpu_type, placement.num_gpus].remove(job)


def test_watchers_hear_every_index_change_and_changed_jobs_come_in_snapshot_order():
    ws = Workspace(running_snapshot())
    mirror = BucketMirror(ws)
    mark = ws.checkpoint()
    ws.hold(JobId("D"), Placement("a40", (1,), 1))  # not in the snapshot: listed after the running jobs
    ws.move(JobId("C"), "a10", 1)
    ws.release(JobId("A"))
    assert ws.changed_jobs() == ["A", "C", "D"]
    inner = ws.checkpoint()
    ws.move(JobId("B"), "a40", 2)
    ws.rollback(inner)  # B is back where it was: not changed, but last in its bucket now
    assert ws.changed_jobs() == ["A", "C", "D"]
    expected = {(t, c): list(jobs) for t in ws.types for c, jobs in ws.by_count[t].items()}
    assert {k: v for k, v in mirror.buckets.items() if v} == {k: v for k, v in expected.items() if v}
    ws.rollback(mark)
    assert ws.changed_jobs() == []


def test_the_workspace_reads_running_placements_and_views_as_the_snapshot_shows_them():
    snapshot = Masker("m").snapshot(running_snapshot())  # what a non-clairvoyant policy is shown
    ws = Workspace(snapshot)
    assert list(ws.placement.items()) == [(v.job_id, v.allocation.placement) for v in snapshot.running]
    assert all(ws.views[v.job_id] is v for v in snapshot.running)  # the same (hidden) view objects, looked up
    assert ws.views["D"] is snapshot.pending.get("D") and len(ws.views) == 4
    with pytest.raises(KeyError):
        ws.views[JobId("zzz")]


def test_largest_follows_every_edit_and_rollback():
    ws = Workspace(running_snapshot(), index=True)
    rng = np.random.default_rng(7)
    marks: list[int] = []
    seen: set[tuple[str, int]] = set()

    def scanned(t: str) -> int:
        return max((c for c, jobs in ws.by_count[t].items() if jobs), default=0)

    for _ in range(300):
        step = rng.integers(4)
        job_id = JobId("ABCD"[rng.integers(4)])
        if step == 0:
            marks.append(ws.checkpoint())
            ws.move(job_id, str(rng.choice(["a40", "a10"])), int(rng.choice([1, 2, 4])))
        elif step == 1:
            marks.append(ws.checkpoint())
            ws.release(job_id)
        elif step == 2 and marks:
            ws.rollback(marks.pop())
        assert [ws.largest(t) for t in ws.types] == [scanned(t) for t in ws.types]
        seen.update((t, ws.largest(t)) for t in ws.types)
    assert seen >= {("a40", 0), ("a40", 2), ("a40", 4), ("a10", 0), ("a10", 1), ("a10", 2)}  # it rose and fell


def test_hold_refuses_busy_gpus_and_move_keeps_the_old_placement_when_nothing_fits():
    ws = Workspace(running_snapshot())
    with pytest.raises(ValueError, match="not free"):
        ws.hold(JobId("D"), Placement("a10", (0,), 2))
    old = ws.placement["B"]
    assert ws.move(JobId("B"), "a40", 4) is None and ws.placement["B"] == old


def test_decision_lists_changes_in_placement_order_and_a_rollback_restores_that_order():
    snapshot = running_snapshot()
    ws = Workspace(snapshot)
    ws.release(JobId("B"))  # preempted
    ws.hold(JobId("D"), ws.find("a40", 2))  # D first ...
    ws.move(JobId("C"), "a10", 1)  # ... then C
    mark = ws.checkpoint()
    ws.move(JobId("D"), "a40", 1)  # D moves again: it would now come after C
    ws.rollback(mark)  # ... but the rollback restores D before C
    decision = ws.decision(snapshot.perf)
    assert [j for j, _ in decision.allocations] == ["D", "C"] and decision.preemptions == ("B",)
    assert decision.allocations[1][1].placement.num_gpus == 1
    ws.release(JobId("D"))
    ws.hold(JobId("D"), Placement("a40", (1,), 2))  # taken again after C: listed after it
    assert [j for j, _ in ws.decision(snapshot.perf).allocations] == ["C", "D"]


def test_free_gpus_find_best_fit_spread_and_filtered_placements():
    snapshot = running_snapshot()  # a40 free per node: [0, 1] (A holds node 0, B one GPU of node 1)
    gpus = FreeGpus(snapshot)
    assert gpus.find("a40", 2) is None and gpus.find("a40", 1) == Placement("a40", (1,), 1)
    assert gpus.find("h100", 1) is None and gpus.find("a10", 8) is None
    gpus.take(Placement("a10", (1,), 1))
    assert gpus.free_gpus("a10") == 1 and gpus.free["a10"].tolist() == [0, 1]
    spread = np.array([1, 1])
    assert gpus.find("a10", 2, free=spread) is None
    assert gpus.find("a10", 2, relax=True, free=spread) == Placement("a10", (0, 1), 1)
    assert gpus.find("a10", 2, relax=True, free=spread, ok=lambda s: s.n_nodes == 1) is None


class CountingModel:
    """A belief model that counts its queries (a10 at 4 GPUs is infeasible; DP answers are twice as slow)."""

    def __init__(self) -> None:
        self.base = uniform_model()
        self.calls = 0

    def iter_time(self, model, batch, shape):
        self.calls += 1
        return math.inf if (shape.gpu_type, shape.num_gpus) == ("a10", 4) else self.base.iter_time(model, batch, shape)

    def dp_iter_time(self, model, batch, shape):
        self.calls += 1
        return 2 * self.base.iter_time(model, batch, shape) if shape.num_gpus < 4 else -1.0


def test_estimates_memoise_per_model_batch_and_shape_until_the_model_changes():
    perf, spec = CountingModel(), job("X", 0, 10, "a40", 2)
    ap = Estimates(dp=False)
    assert ap.bind(perf) and not ap.bind(perf)
    shape = ResourceShape(GpuType("a40"), 1, 2)
    t = ap.time(spec, shape)
    assert t == perf.base.iter_time(GPT, 128, shape) and perf.calls == 1
    assert ap.time(dataclasses.replace(spec, job_id="Y"), shape) == t and perf.calls == 1  # same (model, batch)
    assert ap.time(job("Z", 0, 10, "a40", 2, model=MOE), shape) > 0 and perf.calls == 2
    assert ap.best(spec, "a10", 4, 2) == math.inf and ap.throughput(spec, ResourceShape(GpuType("a10"), 2, 2)) == 0.0
    spread = ResourceShape(GpuType("a40"), 2, 1)
    assert ap.fastest(spec, "a40", 2, 2) == min(t, ap.time(spec, spread))
    assert ap.feasible(spec)(shape) and not ap.feasible(spec)(ResourceShape(GpuType("a10"), 2, 2))
    assert ap.bind(CountingModel())  # another model: the memo is gone
    with pytest.raises(RuntimeError, match="bind"):
        Estimates(dp=True).time(spec, shape)


def test_estimates_list_feasible_configurations_and_the_dp_belief_needs_both_views():
    perf, spec = CountingModel(), job("X", 0, 10, "a40", 2)
    belief = DpBelief()
    belief.bind(perf)
    ap_configs = belief.ap.configs(TINY, spec)
    assert list(ap_configs) == [
        TypeCount("a40", 1),
        TypeCount("a40", 2),
        TypeCount("a40", 4),
        TypeCount("a10", 1),
        TypeCount("a10", 2),
    ]
    assert belief.dp.counts(TINY, spec, "a40") == (1, 2)  # dp_iter_time <= 0 at 4 GPUs: infeasible
    assert list(belief.configs(TINY, spec)) == [
        TypeCount("a40", 1),
        TypeCount("a40", 2),
        TypeCount("a10", 1),
        TypeCount("a10", 2),
    ]
    ok = belief.ok(spec)
    assert ok(ResourceShape(GpuType("a40"), 1, 2)) and not ok(ResourceShape(GpuType("a40"), 2, 2))
    other = CountingModel()
    assert belief.bind(other) and not belief.bind(other)


def test_requested_defaults_to_the_first_type_and_one_gpu():
    snapshot = running_snapshot()
    bare = dataclasses.replace(job("X", 0, 1, "a10", 2), requested_gpu_type=None, requested_gpus=None)
    assert requested(bare, snapshot) == TypeCount("a40", 1)
    assert requested(job("Y", 0, 1, "a10", 2), snapshot) == ("a10", 2)


@dataclasses.dataclass(frozen=True)
class Knobs:
    depth: int = 3
    relax: bool = False


def test_configure_applies_overrides_and_names_the_valid_fields():
    assert configure("P", Knobs, None, {}) == Knobs()
    base = Knobs(depth=5)
    assert configure("P", Knobs, base, {}) is base
    assert configure("P", Knobs, base, {"relax": True}) == Knobs(5, True)
    with pytest.raises(ValueError, match="P: unknown setting\\(s\\) dpth; valid: depth, relax"):
        configure("P", Knobs, None, {"dpth": 2})
    with pytest.raises(ValueError, match="config must be a Knobs"):
        configure("P", Knobs, {"depth": 2}, {})
