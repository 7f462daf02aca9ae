"""ClusterState driven by hand, as a live backend drives it: times from the caller, measured progress, failures."""

from __future__ import annotations

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.core import ClusterState
from arena_gym.metrics import compute_metrics, job_outcomes, timeline
from arena_gym.protocols import InvalidDecision
from arena_gym.records import EventKind
from arena_gym.types import Allocation, Decision, GpuType, Grid, JobId, JobStatus, Placement, ResourceShape
from tests.helpers import GPT, job, table_model

PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0, (GPT, 128, "a40", 2, 2): 1.0})
A, B = JobId("A"), JobId("B")


def a40(nodes=(0,)) -> Allocation:
    shape = ResourceShape(GpuType("a40"), len(nodes), 2)
    return Allocation(Grid(shape, 1), Placement(GpuType("a40"), tuple(nodes), 2))


@pytest.fixture
def state() -> ClusterState:
    s = ClusterState(PRESETS["tiny"], PERF)
    s.load([job("A", 0, 100, "a40", 2), job("B", 5, 100, "a40", 4)])
    return s


def test_lifecycle_with_measured_progress_and_a_failure(state):
    state.submit(A, 0.0)
    state.allocate(A, a40(), 1.0, overhead_s=3.0)
    assert state.status(A) is JobStatus.RECONFIGURING and state.view(A).run_start == 4.0
    # the job reports its first step at 6.5: 2.5 s of real overhead; it measures 2.5 s/iteration
    assert state.start_running(A, 6.5, iter_time=2.5) == pytest.approx(6.5 + 100 * 2.5)
    finish = state.update_progress(A, 16.5, iterations_done=5, iter_time=2.0)  # 5 done; 2 s/it from now
    assert finish == pytest.approx(16.5 + 95 * 2.0)
    assert state.view(A).iterations_done(26.5) == pytest.approx(10.0)
    state.fail(A, 26.5, iterations_done=8)  # ranks died; the last checkpoint holds 8 iterations
    view = state.view(A)
    assert view.status is JobStatus.RECONFIGURING and view.done_at_mark == 8 and view.allocation == a40()
    assert state.free("a40").tolist() == [0, 2]  # it keeps its GPUs while relaunching
    state.start_running(A, 30.0)
    state.update_progress(A, 214.0, iterations_done=100, iter_time=2.0)
    state.finish(A, 214.0)
    state.check_invariants()
    assert state.n_events == 8 and state.events_since(6) == state.events[6:]
    kinds = [e.kind for e in state.events]
    assert kinds == [
        EventKind.SUBMIT,
        EventKind.ALLOCATE,
        EventKind.RUN,
        EventKind.PROGRESS,
        EventKind.FAIL,
        EventKind.RUN,
        EventKind.PROGRESS,
        EventKind.FINISH,
    ]
    record = state.record("live", 0.0, 214.0)
    (out,) = job_outcomes(record)
    assert out.failures == 1 and out.reconfigurations == 0 and out.jct == 214.0 and out.queued_s == 1.0
    tl = timeline(record)
    # progress at 128/2.5 from 6.5, 128/2 from 16.5, nothing from the failure at 26.5 to 30, 64/s to the end
    assert tl.integral(tl.throughput) == pytest.approx(10 * 51.2 + 10 * 64 + 184 * 64)
    assert tl.integral(tl.running_gpus) == pytest.approx(2 * (20 + 184))
    assert compute_metrics(record)["failures"] == 1


def test_times_never_go_backwards(state):
    state.submit(A, 10.0)
    with pytest.raises(ValueError, match="time went backwards: 9.0 after 10.0"):
        state.submit(B, 9.0)
    with pytest.raises(ValueError, match="time went backwards"):
        state.apply(Decision(((A, a40()),)), float("nan"))
    assert state.status(A) is JobStatus.PENDING and len(state.events) == 1


def test_transitions_refuse_the_wrong_status(state):
    state.submit(A, 0.0)
    with pytest.raises(ValueError, match="cannot start running: it is pending"):
        state.start_running(A, 1.0)
    with pytest.raises(ValueError, match="cannot finish: it is pending"):
        state.finish(A, 1.0)
    with pytest.raises(ValueError, match="cannot fail: it holds no GPUs"):
        state.fail(A, 1.0, 0)
    with pytest.raises(InvalidDecision, match="holds no GPUs"):
        state.preempt(A, 1.0)
    with pytest.raises(ValueError, match="submitted already"):
        state.submit(A, 1.0)
    with pytest.raises(KeyError, match="not in the workload"):
        state.submit(JobId("zzz"), 1.0)
    state.check_invariants()


def test_a_checked_decision_commits_only_to_the_state_it_was_checked_on(state):
    state.submit(A, 0.0)
    checked = state.validate(Decision(((A, a40()),)))
    assert checked.allocations == ((A, a40(), 2.0),) and not checked.preemptions
    state.submit(B, 5.0)
    with pytest.raises(ValueError, match="validated against an older state"):
        state.commit(checked, 5.0)
    assert state.status(A) is JobStatus.PENDING
    # an allocation equal to the current one is no reconfiguration: nothing to commit
    state.allocate(A, a40(), 5.0)
    assert state.validate(Decision(((A, a40()),))).is_empty


def test_snapshots_are_lazy_and_read_the_queue_in_submission_order(state):
    state.submit(B, 0.0)
    state.submit(A, 0.0)  # same time, later: the queue still orders by (submit time, id)
    snap = state.snapshot(0.0, arrivals=(B, A))
    assert [v.job_id for v in snap.pending] == ["A", "B"] and snap.pending[1].job_id == "B"
    assert [v.job_id for v in snap.pending[:1]] == ["A"] and snap.pending.get("B").status is JobStatus.PENDING
    assert snap.job("A") is snap.pending[0] and snap.job("zzz") is None and len(snap.running) == 0
    assert not snap.free["a40"].flags.writeable
    state.allocate(A, a40(), 1.0)
    with pytest.raises(RuntimeError, match="stale snapshot"):
        snap.pending.get("A")
    snap = state.snapshot(1.0)
    assert [v.job_id for v in snap.running] == ["A"] and snap.running[0].allocation == a40()
    assert snap.free["a40"].tolist() == [0, 2]
    assert snap.running.placements() == {A: a40().placement} and snap.pending.placements() == {}


def test_running_placements_come_in_allocation_order_and_go_stale_with_the_state(state):
    state.submit(A, 0.0)
    state.submit(B, 0.0)
    state.allocate(A, a40((0,)), 0.0)
    state.allocate(B, a40((1,)), 0.0)
    state.preempt(A, 1.0)
    state.allocate(A, a40((0,)), 1.0)  # A takes an allocation again: it comes after B now
    snap = state.snapshot(1.0)
    placements = snap.running.placements()
    assert (
        list(placements.items())
        == [(v.job_id, v.allocation.placement) for v in snap.running]
        == [
            (B, a40((1,)).placement),
            (A, a40((0,)).placement),
        ]
    )
    placements.clear()  # a new dict each time: the caller may edit it
    assert len(snap.running.placements()) == 2
    state.preempt(B, 2.0)
    with pytest.raises(RuntimeError, match="stale snapshot"):
        snap.running.placements()
