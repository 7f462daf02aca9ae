"""The controller's durable journal: a SQLite database (WAL) next to the deployment's results.

It holds everything a new controller needs after a crash:

* ``meta``: the deployment's settings and workload, the wall-clock origin, the status;
* ``ops``: the cluster core's operation log (:mod:`arena_gym.core.oplog`: submit, commit of a
  decision, run, progress, fail, finish, close), in order, one JSON row per record
  (:func:`real_runner.live.json_forms.op_to_row`); replaying them into a fresh
  :class:`~arena_gym.core.ClusterState` rebuilds its state and event log exactly;
* ``generations``: every launch of every job (allocation, device slots, worker spec, launcher
  facts such as pids, phase: planned, held, released, stopping, exited);
* ``checkpoints``: the checkpoints the jobs reported;
* ``offsets``: how far each job's progress channel has been read.

Writes that belong together (the ops of one poll, with the offsets they consumed) go in one
transaction; a transaction is on disk before the controller acts on it.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena_gym.core.oplog import Op
from arena_gym.fields import fits
from real_runner.live.json_forms import op_from_row, op_to_row

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ops (seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, op TEXT NOT NULL,
                                job_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS generations (job_id TEXT NOT NULL, gen INTEGER NOT NULL, phase TEXT NOT NULL,
                                        data TEXT NOT NULL, PRIMARY KEY (job_id, gen));
CREATE TABLE IF NOT EXISTS checkpoints (job_id TEXT NOT NULL, step INTEGER NOT NULL, t REAL NOT NULL,
                                        PRIMARY KEY (job_id, step));
CREATE TABLE IF NOT EXISTS offsets (job_id TEXT PRIMARY KEY, offset INTEGER NOT NULL);
"""

#: Generation phases, in order.
PHASES = ("planned", "held", "released", "stopping", "exited")


class JournalError(ValueError):
    """The journal cannot be read as a controller wrote it (a damaged database, a row that is not what it should
    be); the message is one line naming the journal and the row."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _number(value: Any) -> bool:
    return fits(value, float) and math.isfinite(value)


@dataclass(frozen=True)
class GenerationRow:
    """One journaled generation: its phase and its facts (allocation, slots, spec, launcher handle)."""

    job_id: str
    gen: int
    phase: str
    data: Mapping[str, Any]


class Journal:
    """A deployment's SQLite journal (WAL mode)."""

    FILENAME = "journal.sqlite"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        except sqlite3.Error as exc:
            raise JournalError(f"journal {self.path}: cannot open it ({_one_line(exc)})") from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            self._db.close()
            raise JournalError(f"journal {self.path}: not a readable journal database ({_one_line(exc)})") from None
        self._depth = 0

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        """The rows of a query; JournalError when the database is damaged."""
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"journal {self.path}: damaged ({_one_line(exc)})") from None

    def _json(self, text: Any, what: str) -> Any:
        try:
            return json.loads(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise JournalError(f"journal {self.path}: {what} is not JSON ({_one_line(exc)})") from None

    def check(self) -> None:
        """JournalError unless SQLite finds the database intact (``PRAGMA quick_check``)."""
        problems = [r[0] for r in self._rows("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise JournalError(f"journal {self.path}: damaged ({_one_line('; '.join(map(str, problems)))[:200]})")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: all or none reach the disk (nested blocks join the outer one)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._db.execute("ROLLBACK")
            raise
        self._depth = 0
        self._db.execute("COMMIT")

    # -- meta ------------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON value under ``key``."""
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self, key: str, default: Any = None) -> Any:
        """The JSON value under ``key`` (``default`` when absent)."""
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return default if not rows else self._json(rows[0][0], f"meta {key!r}")

    # -- ops -------------------------------------------------------------------------------------
    def add_op(self, op: Op) -> None:
        """Append one operation of the core's log."""
        kind, job_id, data = op_to_row(op)
        self._db.execute(
            "INSERT INTO ops (t, op, job_id, data) VALUES (?, ?, ?, ?)", (op.t, kind, job_id, json.dumps(data))
        )

    def ops(self) -> list[Op]:
        """Every operation, in order (JournalError naming a row that is not an operation)."""
        out = []
        for seq, t, kind, job_id, data in self._rows("SELECT seq, t, op, job_id, data FROM ops ORDER BY seq"):
            where = f"operation {seq}"
            if not (_number(t) and t >= 0) or not isinstance(kind, str) or not isinstance(job_id, str):
                raise JournalError(
                    f"journal {self.path}: {where} has a bad time, kind or job ({t!r}, {kind!r}, {job_id!r})"
                )
            fields = self._json(data, where)
            if not isinstance(fields, dict):
                raise JournalError(
                    f"journal {self.path}: {where} ({kind}) holds {type(fields).__name__}, not an object"
                )
            try:
                out.append(op_from_row(float(t), kind, job_id, fields))
            except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
                raise JournalError(f"journal {self.path}: {where} ({kind}) is damaged ({_one_line(exc)})") from None
        return out

    # -- generations -----------------------------------------------------------------------------
    def put_generation(self, job_id: str, gen: int, phase: str, data: Mapping[str, Any]) -> None:
        """Insert or update a generation."""
        if phase not in PHASES:
            raise ValueError(f"unknown generation phase {phase!r}; valid: {', '.join(PHASES)}")
        self._db.execute(
            "INSERT OR REPLACE INTO generations (job_id, gen, phase, data) VALUES (?, ?, ?, ?)",
            (job_id, gen, phase, json.dumps(dict(data))),
        )

    def generations(self) -> list[GenerationRow]:
        """Every generation, by job and number."""
        out = []
        for j, g, p, d in self._rows("SELECT job_id, gen, phase, data FROM generations ORDER BY job_id, gen"):
            where = f"generation {g!r} of job {j!r}"
            data = self._json(d, where)
            if not isinstance(j, str) or not fits(g, int) or g < 1 or p not in PHASES or not isinstance(data, dict):
                raise JournalError(f"journal {self.path}: {where} is damaged (phase {p!r})")
            out.append(GenerationRow(j, g, p, data))
        return out

    # -- checkpoints and offsets -----------------------------------------------------------------
    def add_checkpoint(self, job_id: str, step: int, t: float) -> None:
        """Record a checkpoint a job reported."""
        self._db.execute("INSERT OR REPLACE INTO checkpoints (job_id, step, t) VALUES (?, ?, ?)", (job_id, step, t))

    def checkpoints(self, job_id: str) -> list[tuple[int, float]]:
        """(step, time) of a job's reported checkpoints, oldest first."""
        rows = self._rows("SELECT step, t FROM checkpoints WHERE job_id = ? ORDER BY step", (job_id,))
        for step, t in rows:
            if not (fits(step, int) and step >= 0 and _number(t)):
                raise JournalError(f"journal {self.path}: checkpoint row of job {job_id} is damaged ({step!r}, {t!r})")
        return [(int(s), float(t)) for s, t in rows]

    def set_offset(self, job_id: str, offset: int) -> None:
        """How far a job's progress channel has been applied."""
        self._db.execute("INSERT OR REPLACE INTO offsets (job_id, offset) VALUES (?, ?)", (job_id, offset))

    def offsets(self) -> dict[str, int]:
        """Progress-channel offsets by job."""
        rows = self._rows("SELECT job_id, offset FROM offsets")
        for j, o in rows:
            if not (isinstance(j, str) and fits(o, int) and o >= 0):
                raise JournalError(f"journal {self.path}: progress offset of job {j!r} is damaged ({o!r})")
        return dict(rows)

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def exists(directory: str | Path) -> bool:
    """Whether ``directory`` holds a deployment journal."""
    return (Path(directory) / Journal.FILENAME).is_file()
