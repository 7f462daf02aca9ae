"""The journal: transactions, generations, checkpoints, and a replay that rebuilds the cluster core exactly."""

from __future__ import annotations

import pytest

from arena_gym.core import ClusterState
from arena_gym.types import Allocation, GpuType, Grid, JobId, JobSpec, ModelRef, Placement, ResourceShape
from estimator import default_perf_model
from real_runner.live.backend import apply_op
from real_runner.live.codec import alloc_from_dict, alloc_to_dict, job_from_dict, job_to_dict
from real_runner.live.journal import Journal, exists
from real_runner.testbed import load_testbed

CPU = GpuType("cpu")
TINY = ModelRef.parse("gpt__tiny")


def jobs() -> tuple[JobSpec, ...]:
    return (JobSpec(JobId("a"), TINY, 16, 50, 0.0, CPU, 2), JobSpec(JobId("b"), TINY, 8, 30, 1.5, CPU, 1))


def alloc(nodes: tuple[int, ...], per_node: int) -> Allocation:
    shape = ResourceShape(CPU, len(nodes), per_node)
    return Allocation(Grid(shape, 1), Placement(CPU, nodes, per_node))


def test_ops_replayed_from_the_journal_rebuild_the_same_state_and_event_log(tmp_path) -> None:
    cluster = load_testbed("cpu-4").cluster()
    perf = default_perf_model(cluster)
    live, journal = ClusterState(cluster, perf), Journal(tmp_path / Journal.FILENAME)
    live.load(jobs())
    ops = [
        (0.0, "submit", "a", {}),
        (0.1, "commit", "", {"preempt": [], "alloc": [["a", alloc_to_dict(alloc((0,), 2))]]}),
        (1.5, "submit", "b", {}),
        (2.0, "run", "a", {"iter_time": 0.2}),
        (
            2.5,
            "commit",
            "",
            {"preempt": [], "alloc": [["a", alloc_to_dict(alloc((1,), 1))], ["b", alloc_to_dict(alloc((0,), 1))]]},
        ),
        (4.0, "run", "a", {"iter_time": 0.3}),
        (4.2, "run", "b", {"iter_time": None}),
        (6.0, "progress", "a", {"done": 17, "iter_time": 0.25}),
        (7.0, "fail", "b", {"done": 5}),
        (9.0, "run", "b", {"iter_time": 0.1}),
        (10.0, "commit", "", {"preempt": ["b"], "alloc": []}),
        (12.0, "progress", "a", {"done": 50, "iter_time": 0.25}),
        (12.0, "finish", "a", {}),
        (12.5, "close", "", {}),
    ]
    for t, op, job, data in ops:
        with journal.transaction():
            apply_op(live, t, op, JobId(job), data)
            journal.add_op(t, op, job, data)
    journal.close()
    assert exists(tmp_path)
    again = Journal(tmp_path / Journal.FILENAME)
    rebuilt = ClusterState(cluster, perf)
    rebuilt.load(jobs())
    for op in again.ops():
        apply_op(rebuilt, op.t, op.op, JobId(op.job_id), op.data)
    assert rebuilt.events == live.events and len(live.events) == 14
    for job in ("a", "b"):
        assert rebuilt.view(JobId(job)) == live.view(JobId(job))
    assert rebuilt.free(CPU).tolist() == live.free(CPU).tolist() == [2, 2]
    assert rebuilt.status(JobId("b")).value == "pending" and rebuilt.view(JobId("a")).done_at_mark == 50
    with pytest.raises(ValueError, match="unknown operation 'reboot'"):
        apply_op(rebuilt, 13.0, "reboot", JobId("a"), {})


def test_a_failed_transaction_leaves_nothing_and_rows_round_trip(tmp_path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    with pytest.raises(RuntimeError):
        with journal.transaction():
            journal.add_op(1.0, "submit", "a")
            with journal.transaction():  # nested blocks join the outer one
                journal.set_meta("status", "running")
            raise RuntimeError("crash before commit")
    assert journal.ops() == [] and journal.meta("status") is None
    with journal.transaction():
        journal.set_meta("workload", [job_to_dict(j) for j in jobs()])
        journal.put_generation("a", 1, "held", {"alloc": alloc_to_dict(alloc((0, 1), 2)), "handle": {"pids": [7]}})
        journal.put_generation("a", 1, "released", {"alloc": alloc_to_dict(alloc((0, 1), 2)), "handle": {"pids": [7]}})
        journal.add_checkpoint("a", 20, 5.0)
        journal.add_checkpoint("a", 10, 3.0)
        journal.set_offset("a", 1234)
    assert [job_from_dict(d) for d in journal.meta("workload")] == list(jobs())
    (row,) = journal.generations()
    assert (row.job_id, row.gen, row.phase, row.data["handle"]) == ("a", 1, "released", {"pids": [7]})
    assert alloc_from_dict(row.data["alloc"]) == alloc((0, 1), 2)
    assert journal.checkpoints("a") == [(10, 3.0), (20, 5.0)] and journal.offsets() == {"a": 1234}
    with pytest.raises(ValueError, match="unknown generation phase 'lost'"):
        journal.put_generation("a", 2, "lost", {})
