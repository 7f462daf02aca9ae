"""Fuzz the deploy journal a resume reads: an interrupted deployment's journal (fake generations, a jumping clock)
truncated, with op rows reordered, duplicated, deleted or corrupted, damaged meta, generation, checkpoint and offset
rows, and bytes of the database file overwritten.

A resume either refuses in one line (ValueError or LiveError naming the problem) or recovers: the deployment runs to
its end with every job finished exactly once, an event log whose times never go back and whose lifecycle per job is
valid (submitted once, running before it finishes, finished once), a journal that replays to exactly that event log,
and, when the damage changed nothing a resume reads (a duplicated row the journal already holds), the same events as
the resume of the undamaged journal. Never another exception, never a hang.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from agents.fcfs import FCFS
from arena_gym.core import ClusterState
from arena_gym.core.oplog import replay
from arena_gym.records import EventKind
from arena_gym.sim import SimConfig
from arena_gym.types import ClusterSpec, GpuType, NodeGroup
from real_runner.launchers.fake import FakeClock
from real_runner.live.journal import Journal
from real_runner.live.state import LiveError
from tests.fake_live import fake_live_backend
from tests.fuzzing import assert_one_line, case_timeout, fuzz_budget
from tests.helpers import GPT, job, table_model

TIMEOUT_S = 20.0
A40 = ClusterSpec("a40-2x2", (NodeGroup(GpuType("a40"), 2, 2),))
PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0})
NO_OVERHEAD = SimConfig(overhead_class="none")
JOBS = [job("a", 0, 30, "a40", 2), job("b", 0, 80, "a40", 2), job("c", 20, 40, "a40", 2)]
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-journal-")
ROOT = Path(_SCRATCH.name)
_CASES = iter(range(10**9))


def _interrupted() -> Path:
    """A deployment whose controller died at 60 s (a's done record unread), its generations run on to 70 s."""
    pristine = ROOT / "pristine"
    if pristine.exists():
        return pristine
    clock = FakeClock()
    first = fake_live_backend(
        A40, PERF, pristine, NO_OVERHEAD, clock, lambda: clock.t >= 60.0, checkpoint_every_steps=10
    )
    policy = FCFS()
    snap = first.reset(JOBS)
    try:
        while snap is not None:
            first.apply(policy.decide(snap))
            snap = first.advance()
    except KeyboardInterrupt:
        pass
    clock.t = 70.0
    first.launcher.tick()  # type: ignore[attr-defined]
    first.journal.close()
    return pristine


def _resume(directory: Path):
    """Resume the deployment in ``directory`` to its end: (record, backend)."""
    backend = fake_live_backend(A40, PERF, directory, NO_OVERHEAD, FakeClock(70.0), checkpoint_every_steps=10)
    try:
        policy = FCFS()
        snap = backend.reset(JOBS)
        while snap is not None:
            backend.apply(policy.decide(snap))
            snap = backend.advance()
        return backend.record(policy.name)
    finally:
        backend.close()


@pytest.fixture(scope="module")
def reference():
    """The pristine journal's directory and the events its resume ends with."""
    pristine = _interrupted()
    copy = ROOT / "reference"
    shutil.copytree(pristine, copy)
    return pristine, _resume(copy).events


def _rows(db: sqlite3.Connection) -> list[tuple]:
    return db.execute("SELECT seq, t, op, job_id, data FROM ops ORDER BY seq").fetchall()


GARBAGE_JSON = ["", "{", "null", "[]", '"x"', "3", '{"x": 1}', "NaN", '{"iterations_done": "a"}', "\x00"]
GARBAGE_VALUES = [None, "x", -1.0, 1e308, float("nan"), float("inf"), -1e9, 0, "", b"\xff"]


@st.composite
def damage(draw) -> tuple[str, object]:
    """A kind of damage and its parameters (drawn as fractions and choices, applied to whatever the journal holds)."""
    kind = draw(
        st.sampled_from(
            [
                "truncate file",
                "overwrite bytes",
                "reorder ops",
                "duplicate op",
                "duplicate op at end",
                "delete op",
                "truncate ops",
                "corrupt op data",
                "corrupt op field",
                "corrupt meta",
                "delete meta",
                "corrupt generation",
                "corrupt offset",
                "corrupt checkpoint",
                "drop table",
            ]
        )
    )
    fraction = st.floats(0, 1, allow_nan=False)
    if kind == "truncate file":
        return kind, draw(fraction)
    if kind == "overwrite bytes":
        return kind, (draw(fraction), draw(st.binary(min_size=1, max_size=64)))
    if kind == "reorder ops":
        return kind, (draw(fraction), draw(fraction))
    if kind in ("duplicate op", "duplicate op at end", "delete op", "truncate ops"):
        return kind, draw(fraction)
    if kind == "corrupt op data":
        return kind, (draw(fraction), draw(st.sampled_from(GARBAGE_JSON) | st.text(max_size=30)))
    if kind == "corrupt op field":
        field = draw(st.sampled_from(["t", "op", "job_id"]))
        values = {"t": GARBAGE_VALUES, "op": ["", "nope", "finish", "submit", None, 3], "job_id": ["", "zz", None, 4]}
        return kind, (draw(fraction), field, draw(st.sampled_from(values[field])))
    if kind in ("corrupt meta", "delete meta"):
        key = draw(st.sampled_from(["t0", "workload", "status", "decisions", "decide_wall_s"]))
        return kind, (key, draw(st.sampled_from(GARBAGE_JSON + ['"finished"', "1e400", "-5", "[{}]"])))
    if kind == "corrupt generation":
        return kind, (
            draw(fraction),
            draw(st.sampled_from(["phase", "data"])),
            draw(st.sampled_from(GARBAGE_JSON + ["running", "exited", "planned", '{"alloc": null}'])),
        )
    if kind == "corrupt offset":
        return kind, draw(st.sampled_from([-1, 10**12, 3, 0, None, "x", 2**63 - 1]))
    if kind == "corrupt checkpoint":
        return kind, draw(st.sampled_from([-1, 10**9, 7, None, "x", 5]))
    return kind, draw(st.sampled_from(["ops", "meta", "generations", "checkpoints", "offsets"]))


def _index(fraction: float, n: int) -> int:
    return min(n - 1, int(fraction * n))


def apply_damage(path: Path, kind: str, arg) -> bool:
    """Damage the journal at ``path``; False when the damage leaves everything a resume reads as it was."""
    if kind == "truncate file":
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.truncate(int(arg * size))
        return True
    if kind == "overwrite bytes":
        where, blob = arg
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.seek(int(where * max(size - len(blob), 0)))
            fh.write(blob)
        return True
    with sqlite3.connect(path) as db:
        rows = _rows(db)
        if kind == "reorder ops":
            i, j = _index(arg[0], len(rows)), _index(arg[1], len(rows))
            if rows[i][1:] == rows[j][1:]:
                return False
            a, b = rows[i][0], rows[j][0]
            db.execute("UPDATE ops SET seq = -1 WHERE seq = ?", (a,))
            db.execute("UPDATE ops SET seq = ? WHERE seq = ?", (a, b))
            db.execute("UPDATE ops SET seq = ? WHERE seq = -1", (b,))
        elif kind in ("duplicate op", "duplicate op at end"):
            i = _index(arg, len(rows))
            if kind == "duplicate op":  # right after itself: renumber the later rows
                for seq, *_ in reversed(rows[i + 1 :]):
                    db.execute("UPDATE ops SET seq = ? WHERE seq = ?", (seq + 1, seq))
                db.execute(
                    "INSERT INTO ops (seq, t, op, job_id, data) VALUES (?, ?, ?, ?, ?)", (rows[i][0] + 1, *rows[i][1:])
                )
            else:
                db.execute("INSERT INTO ops (t, op, job_id, data) VALUES (?, ?, ?, ?)", rows[i][1:])
        elif kind == "delete op":
            db.execute("DELETE FROM ops WHERE seq = ?", (rows[_index(arg, len(rows))][0],))
        elif kind == "truncate ops":
            db.execute("DELETE FROM ops WHERE seq > ?", (rows[_index(arg, len(rows))][0],))
        elif kind == "corrupt op data":
            db.execute("UPDATE ops SET data = ? WHERE seq = ?", (arg[1], rows[_index(arg[0], len(rows))][0]))
        elif kind == "corrupt op field":
            fraction, field, value = arg
            try:
                db.execute(f"UPDATE ops SET {field} = ? WHERE seq = ?", (value, rows[_index(fraction, len(rows))][0]))
            except sqlite3.IntegrityError:  # NOT NULL: the database itself refuses this damage
                return False
        elif kind == "corrupt meta":
            db.execute("UPDATE meta SET value = ? WHERE key = ?", (arg[1], arg[0]))
        elif kind == "delete meta":
            db.execute("DELETE FROM meta WHERE key = ?", (arg[0],))
        elif kind == "corrupt generation":
            gens = db.execute("SELECT job_id, gen FROM generations ORDER BY job_id, gen").fetchall()
            job_id, gen = gens[_index(arg[0], len(gens))]
            db.execute(f"UPDATE generations SET {arg[1]} = ? WHERE job_id = ? AND gen = ?", (arg[2], job_id, gen))
        elif kind == "corrupt offset":
            try:
                db.execute("UPDATE offsets SET offset = ?", (arg,))
            except sqlite3.IntegrityError:
                return False
        elif kind == "corrupt checkpoint":
            try:
                db.execute("UPDATE checkpoints SET step = ? WHERE job_id = 'b'", (arg,))
            except sqlite3.IntegrityError:
                return False
        else:
            db.execute(f"DROP TABLE {arg}")
    return True


def check_record(record, directory: Path) -> None:
    """Every job finished once, times never go back, a valid lifecycle per job, a journal that replays to it."""
    times = [e.time for e in record.events]
    assert all(math.isfinite(t) for t in times) and times == sorted(times), times
    for spec in JOBS:
        kinds = [e.kind for e in record.events if e.job_id == spec.job_id]
        assert kinds.count(EventKind.SUBMIT) == 1 and kinds[0] is EventKind.SUBMIT, (spec.job_id, kinds)
        assert kinds.count(EventKind.FINISH) == 1 and kinds[-1] is EventKind.FINISH, (spec.job_id, kinds)
        assert EventKind.RUN in kinds[: kinds.index(EventKind.FINISH)], (spec.job_id, kinds)
    rebuilt = ClusterState(A40, PERF)
    rebuilt.load(JOBS)
    journal = Journal(directory / Journal.FILENAME)
    try:
        replay(journal.ops(), rebuilt)
    finally:
        journal.close()
    assert rebuilt.events == record.events


@fuzz_budget(12)
@given(case=damage())
def test_a_damaged_journal_is_resumed_correctly_or_refused_in_one_line(reference, case) -> None:
    pristine, reference_events = reference
    kind, arg = case
    directory = ROOT / f"case{next(_CASES)}"
    shutil.copytree(pristine, directory)
    changed = apply_damage(directory / Journal.FILENAME, kind, arg)
    try:
        with case_timeout(TIMEOUT_S):
            try:
                record = _resume(directory)
            except (ValueError, LiveError) as exc:
                event(f"{kind}: refused")
                assert_one_line(exc if isinstance(exc, ValueError) else ValueError(str(exc)))
                return
        event(f"{kind}: resumed")
        check_record(record, directory)
        if not changed:
            assert record.events == reference_events
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_the_undamaged_journal_resumes_to_every_job_finished(reference) -> None:
    pristine, events = reference
    directory = ROOT / "undamaged"
    shutil.copytree(pristine, directory)
    record = _resume(directory)
    check_record(record, directory)
    assert record.events == events
    assert len(Journal(directory / Journal.FILENAME).ops()) > 0
