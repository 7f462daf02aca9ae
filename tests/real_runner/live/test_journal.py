"""The journal: the core's operation log (and journals written before it was typed), transactions, generations,
checkpoints, and a replay that rebuilds the cluster core exactly."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from arena_gym.core import ClusterState
from arena_gym.core.oplog import Close, Commit, Fail, Finish, Progress, Run, Submit, replay
from arena_gym.sim import SimConfig
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    Decision,
    GpuType,
    Grid,
    JobId,
    JobSpec,
    ModelRef,
    NodeGroup,
    Placement,
    ResourceShape,
)
from estimator import default_perf_model
from real_runner.launchers.base import RankSlot
from real_runner.live.journal import Journal, JournalError, exists
from real_runner.live.json_forms import (
    alloc_from_dict,
    alloc_to_dict,
    job_from_dict,
    job_to_dict,
    op_from_row,
    slots_from_list,
    slots_to_list,
)
from real_runner.testbed import load_testbed
from tests.fake_live import fake_live_backend
from tests.fuzzing import assert_one_line
from tests.helpers import GPT, table_model
from tests.helpers import job as make_job

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


def _without(data: dict, key: str) -> dict:
    return {k: v for k, v in data.items() if k != key}


JOB = job_to_dict(jobs()[0])
ALLOC = alloc_to_dict(alloc((0, 1), 2))
SLOT = slots_to_list((RankSlot(0, "localhost", 1, 3),))[0]


@pytest.mark.parametrize(
    ("read", "data", "message"),
    [
        (job_from_dict, {**JOB, "global_batch": True}, "job: global_batch must be an integer, got True"),
        (job_from_dict, {**JOB, "iterations": "7"}, "job: iterations must be an integer, got '7'"),
        (job_from_dict, {**JOB, "submit_time": "0.5"}, "job: submit_time must be a number, got '0.5'"),
        (job_from_dict, {**JOB, "requested_gpus": False}, "job: requested_gpus must be None or an integer"),
        (job_from_dict, {**JOB, "extra": 1}, "job: unknown field(s) extra; valid: job_id, model"),
        (job_from_dict, _without(JOB, "iterations"), "job: missing field(s) iterations"),
        (job_from_dict, {**JOB, "deadline_source": "guessed"}, "job: deadline_source must be one of declared, derived"),
        (job_from_dict, [JOB], "job must be an object"),
        (alloc_from_dict, {**ALLOC, "n_nodes": True}, "allocation: n_nodes must be an integer, got True"),
        (alloc_from_dict, {**ALLOC, "n_stages": "1"}, "allocation: n_stages must be an integer, got '1'"),
        (alloc_from_dict, {**ALLOC, "nodes": [0, "1"]}, "allocation: nodes must be a tuple of integers"),
        (alloc_from_dict, {**ALLOC, "stages": 1}, "allocation: unknown field(s) stages"),
        (alloc_from_dict, _without(ALLOC, "gpu_type"), "allocation: missing field(s) gpu_type"),
        (slots_from_list, [{**SLOT, "device": True}], "slot 0: device must be an integer, got True"),
        (slots_from_list, [{**SLOT, "node": "0"}], "slot 0: node must be an integer, got '0'"),
        (slots_from_list, [{**SLOT, "cpu": 2}], "slot 0: unknown field(s) cpu"),
        (slots_from_list, [_without(SLOT, "host")], "slot 0: missing field(s) host"),
        (slots_from_list, SLOT, "slots must be a list"),
    ],
)
def test_journal_forms_refuse_a_bad_field_in_one_line(read, data, message: str) -> None:
    with pytest.raises(ValueError) as err:
        read(data)
    assert_one_line(err.value, message)


@pytest.mark.parametrize(
    ("kind", "data", "message"),
    [
        ("progress", {"done": True, "iter_time": 0.25}, "progress data: done must be a number, got True"),
        ("progress", {"done": "7", "iter_time": 0.25}, "progress data: done must be a number, got '7'"),
        ("progress", {"done": 7}, "progress data: missing field(s) iter_time"),
        ("run", {"iter_time": 0.2, "speed": 1}, "run data: unknown field(s) speed"),
        ("fail", {"done": 5, "reason": 9}, "fail data: reason must be a string, got 9"),
        ("commit", {"preempt": ["b"]}, "commit data: missing field(s) alloc"),
        ("commit", {"preempt": [], "alloc": [["a", ALLOC]], "overhead": ["1"]}, "overhead must be None or a tuple"),
        ("commit", {"preempt": [], "alloc": [["a", {**ALLOC, "n_nodes": True}]]}, "allocation: n_nodes must be"),
        ("finish", {"done": 1}, "finish data: unknown field(s) done"),
    ],
)
def test_an_operation_row_with_a_bad_field_is_refused_in_one_line(kind: str, data: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        op_from_row(1.0, kind, "a", data)
    assert_one_line(err.value, message)


def test_a_bad_field_is_a_damaged_journal_in_one_line(tmp_path) -> None:
    path = tmp_path / Journal.FILENAME
    Journal(path).close()
    with sqlite3.connect(path) as db:
        db.execute(
            """INSERT INTO ops (t, op, job_id, data) VALUES (6.0, 'progress', 'a', '{"done": "7", "iter_time": 1}')"""
        )
    with pytest.raises(JournalError) as err:
        Journal(path).ops()
    assert_one_line(err.value, "operation 1 (progress) is damaged (progress data: done must be a number, got '7')")
    cluster = ClusterSpec("a40-2x2", (NodeGroup(GpuType("a40"), 2, 2),))
    workload = [make_job("a", 0, 30, "a40", 2)]
    run_dir = tmp_path / "deploy"
    run_dir.mkdir()
    journal = Journal(run_dir / Journal.FILENAME)
    journal.set_meta("workload", [{**job_to_dict(workload[0]), "global_batch": True}])
    journal.close()
    backend = fake_live_backend(
        cluster, table_model({(GPT, 128, "a40", 1, 2): 2.0}), run_dir, SimConfig(overhead_class="none")
    )
    try:
        with pytest.raises(JournalError) as err:
            backend.reset(workload)
    finally:
        backend.close()
    assert_one_line(err.value, "its workload is damaged (job: global_batch must be an integer, got True)")
