"""The journal: the core's operation log (and journals written before it was typed), transactions, generations,
checkpoints, and a replay that rebuilds the cluster core exactly."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from arena_gym.core import ClusterState
from arena_gym.core.oplog import Close, Commit, Fail, Finish, Progress, Run, Submit, replay
from arena_gym.types import Allocation, Decision, GpuType, Grid, JobId, JobSpec, ModelRef, Placement, ResourceShape
from estimator import default_perf_model
from real_runner.live.journal import Journal, exists
from real_runner.live.json_forms import alloc_from_dict, alloc_to_dict, job_from_dict, job_to_dict
from real_runner.testbed import load_testbed

CPU = GpuType("cpu")
TINY = ModelRef.parse("gpt__tiny")


def jobs() -> tuple[JobSpec, ...]:
    return (JobSpec(JobId("a"), TINY, 16, 50, 0.0, CPU, 2), JobSpec(JobId("b"), TINY, 8, 30, 1.5, CPU, 1))


def alloc(nodes: tuple[int, ...], per_node: int) -> Allocation:
    shape = ResourceShape(CPU, len(nodes), per_node)
    return Allocation(Grid(shape, 1), Placement(CPU, nodes, per_node))


def drive(state: ClusterState) -> None:
    """Every kind of operation, on the cpu-4 testbed's cluster: two commits, a resize, a failure, a preemption."""
    state.load(jobs())
    a, b = JobId("a"), JobId("b")
    state.submit(a, 0.0)
    state.apply(Decision(((a, alloc((0,), 2)),)), 0.1, lambda _job, _alloc: 1.5)
    state.submit(b, 1.5)
    state.start_running(a, 2.0, 0.2)
    state.apply(Decision(((a, alloc((1,), 1)), (b, alloc((0,), 1)))), 2.5)
    state.start_running(a, 4.0, 0.3)
    state.start_running(b, 4.2)
    state.update_progress(a, 6.0, 17, 0.25)
    state.fail(b, 7.0, 5, "rank exit code(s) [-9]")
    state.start_running(b, 9.0, 0.1)
    state.apply(Decision(preemptions=(b,)), 10.0)
    state.update_progress(a, 12.0, 50, 0.25)
    state.finish(a, 12.0)
    state.close(12.5)


def test_the_journal_holds_the_cores_operation_log_and_replays_it_exactly(tmp_path) -> None:
    cluster = load_testbed("cpu-4").cluster()
    perf = default_perf_model(cluster)
    live, journal = ClusterState(cluster, perf), Journal(tmp_path / Journal.FILENAME)
    drive(live)
    with journal.transaction():
        for op in live.ops:
            journal.add_op(op)
    journal.close()
    assert exists(tmp_path)
    again = Journal(tmp_path / Journal.FILENAME)
    assert again.ops() == list(live.ops) and len(live.ops) == 14
    assert {type(op) for op in live.ops} == {Submit, Commit, Run, Progress, Fail, Finish, Close}
    rebuilt = ClusterState(cluster, perf)
    rebuilt.load(jobs())
    replay(again.ops(), rebuilt)
    assert rebuilt.events == live.events and len(live.events) == 14 and rebuilt.ops == live.ops
    for job in ("a", "b"):
        assert rebuilt.view(JobId(job)) == live.view(JobId(job))
    assert rebuilt.free(CPU).tolist() == live.free(CPU).tolist() == [2, 2]
    assert rebuilt.status(JobId("b")).value == "pending" and rebuilt.view(JobId("a")).done_at_mark == 50


#: The ops table of a journal as earlier controllers wrote it (no overheads; a fail without its reason).
EARLIER_ROWS = [
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


def test_journals_written_before_the_typed_log_read_as_its_records(tmp_path) -> None:
    path = tmp_path / Journal.FILENAME
    Journal(path).close()
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO ops (t, op, job_id, data) VALUES (?, ?, ?, ?)",
            [(t, op, job, json.dumps(data)) for t, op, job, data in EARLIER_ROWS],
        )
    ops = Journal(path).ops()
    assert [op.kind for op in ops] == [row[1] for row in EARLIER_ROWS]
    assert ops[1] == Commit(0.1, (), ((JobId("a"), alloc((0,), 2)),), (0.0,))
    assert ops[8] == Fail(7.0, JobId("b"), 5.0) and ops[6] == Run(4.2, JobId("b"), None)
    cluster = load_testbed("cpu-4").cluster()
    perf = default_perf_model(cluster)
    expected, rebuilt = ClusterState(cluster, perf), ClusterState(cluster, perf)
    drive(expected)
    rebuilt.load(jobs())
    replay(ops, rebuilt)
    # the same operations but the first commit's overhead (the rows hold none)
    assert [e.kind for e in rebuilt.events] == [e.kind for e in expected.events]
    assert rebuilt.view(JobId("a")) == expected.view(JobId("a"))
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO ops (t, op, job_id, data) VALUES (13.0, 'reboot', 'a', '{}')")
    with pytest.raises(ValueError, match="unknown operation 'reboot'; valid: submit, commit"):
        Journal(path).ops()


def test_a_failed_transaction_leaves_nothing_and_rows_round_trip(tmp_path) -> None:
    journal = Journal(tmp_path / "j.sqlite")
    with pytest.raises(RuntimeError):
        with journal.transaction():
            journal.add_op(Submit(1.0, JobId("a")))
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


def test_a_job_keeps_where_its_deadline_comes_from() -> None:
    from arena_gym.types import DeadlineSource

    derived = dataclasses.replace(jobs()[0], deadline=99.0, deadline_source=DeadlineSource.DERIVED)
    data = job_to_dict(derived)
    assert data["deadline_source"] == "derived" and job_from_dict(data) == derived
    del data["deadline_source"]  # a journal written before the field: its deadlines were declared
    assert job_from_dict(data).deadline_source is DeadlineSource.DECLARED
