"""The progress channel: records round-trip, and a tail reads each complete line exactly once."""

from __future__ import annotations

import json

import pytest

from real_runner.progress import ProgressRecord, ProgressTail, ProgressWriter, read_progress


def test_records_round_trip_and_leave_out_empty_fields():
    rec = ProgressRecord(12.5, "step", "j1", 3, loss=5.5, iter_s=0.1, samples_per_s=80.0)
    line = rec.to_json()
    assert json.loads(line) == {
        "t": 12.5,
        "event": "step",
        "job_id": "j1",
        "step": 3,
        "loss": 5.5,
        "iter_s": 0.1,
        "samples_per_s": 80.0,
    }
    assert ProgressRecord.from_json(line) == rec
    start = ProgressRecord(1.0, "start", "j1", 0, info={"plan": {"pp": 2}, "timings": {"load_s": 0.3}})
    assert ProgressRecord.from_json(start.to_json()) == start
    with pytest.raises(ValueError, match="progress event 'bogus' is unknown"):
        ProgressRecord(1.0, "bogus", "j1", 0)
    with pytest.raises(ValueError, match="not a progress record"):
        ProgressRecord.from_json('{"t": 1}')


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"t": 1.0, "event": "step", "job_id": "j", "step": true}', "record: step must be an integer, got True"),
        ('{"t": "1.0", "event": "step", "job_id": "j", "step": 1}', "record: t must be a number, got '1.0'"),
        ('{"t": 1, "event": "step", "job_id": "j", "step": 1, "lr": 0.1}', "record: unknown field(s) lr; valid: t,"),
        ('{"t": 1.0, "event": "step", "step": 1}', "record: missing field(s) job_id"),
        ("[1, 2]", "record must be an object, got [1, 2]"),
        ('{"t": 1.0, "event": "step", "job_id": "j", "step": 1, "ckpt_step": 1.5}', "ckpt_step must be None or an"),
    ],
)
def test_a_line_of_the_wrong_shape_is_refused_in_one_line(line, says):
    with pytest.raises(ValueError, match="not a progress record") as info:
        ProgressRecord.from_json(line)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_a_record_read_back_has_the_annotated_types():
    rec = ProgressRecord.from_json(
        '{"t": 3, "event": "checkpoint", "job_id": "j", "step": 4, "ckpt_step": 4, "loss": 1}'
    )
    assert rec == ProgressRecord(3.0, "checkpoint", "j", 4, loss=1.0, ckpt_step=4)
    assert type(rec.t) is float and type(rec.loss) is float and rec.info == {} and rec.iter_s is None
    assert ProgressRecord.from_json(rec.to_json()) == rec
    assert "iter_s" not in rec.to_json()  # None fields are left out and default when read


def test_a_tail_reads_new_complete_lines_only(tmp_path):
    path = tmp_path / "p.jsonl"
    tail = ProgressTail(path)
    assert tail.poll() == []  # no file yet
    writer = ProgressWriter(path)
    for step in range(1, 4):
        writer.write(ProgressRecord(float(step), "step", "j", step, loss=1.0 / step))
    assert [r.step for r in tail.poll()] == [1, 2, 3]
    assert tail.poll() == []
    with open(path, "a") as fh:  # a record being written: no newline yet
        fh.write(ProgressRecord(4.0, "step", "j", 4).to_json()[:10])
    assert tail.poll() == []
    with open(path, "a") as fh:
        fh.write(ProgressRecord(4.0, "step", "j", 4).to_json()[10:] + "\nnot json\n")
    writer.write(ProgressRecord(5.0, "done", "j", 4, ckpt_step=4))
    assert [(r.event, r.step) for r in tail.poll()] == [("step", 4), ("done", 4)]  # the bad line is skipped
    writer.close()
    assert len(read_progress(path)) == 5


def test_a_non_finite_loss_is_kept_as_text(tmp_path):
    writer = ProgressWriter(tmp_path / "p.jsonl")
    writer.write(ProgressRecord(1.0, "step", "j", 1, loss=float("nan")))
    writer.close()
    (rec,) = read_progress(tmp_path / "p.jsonl")
    assert rec.loss is None and rec.info["loss"] == "nan"


def test_many_records_arrive_in_order_without_gaps(tmp_path):
    path = tmp_path / "p.jsonl"
    writer, tail, seen = ProgressWriter(path), ProgressTail(path), []
    for step in range(1, 1001):
        writer.write(ProgressRecord(float(step), "step", "j", step, loss=0.5))
        if step % 97 == 0:
            seen += [r.step for r in tail.poll()]
    writer.close()
    seen += [r.step for r in tail.poll()]
    assert seen == list(range(1, 1001))


def test_a_record_torn_by_a_killed_writer_costs_no_record_of_the_next_writer(tmp_path):
    """A rank killed (SIGKILL) inside a write leaves an unterminated line; the next generation's writer starts
    a new line, so its records (its start record first) are read whole and only the torn one is skipped."""
    path = tmp_path / "p.jsonl"
    writer = ProgressWriter(path)
    writer.write(ProgressRecord(1.0, "step", "j", 1, loss=0.5))
    writer.close()
    with open(path, "a") as fh:
        fh.write(ProgressRecord(2.0, "step", "j", 2, loss=0.4).to_json()[:25])  # the killed rank's last write
    tail = ProgressTail(path)
    assert [r.step for r in tail.poll()] == [1]  # the torn line is unterminated: not read yet
    writer = ProgressWriter(path)
    writer.write(ProgressRecord(3.0, "start", "j", 1, ckpt_step=1, info={"resumed_from": 1}))
    writer.write(ProgressRecord(4.0, "step", "j", 2, loss=0.4))
    writer.close()
    assert [(r.event, r.step) for r in tail.poll()] == [("start", 1), ("step", 2)]
    assert [(r.event, r.step) for r in read_progress(path)] == [("step", 1), ("start", 1), ("step", 2)]
    ProgressWriter(path).close()  # a whole last line: nothing added
    assert path.read_text().count("\n") == 4
