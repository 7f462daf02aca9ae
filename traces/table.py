"""Reading trace CSV files with row-accurate, one-line error messages.

Every malformed-input problem becomes a ``ValueError`` whose message is one line,
``"<file>:<row>: <problem>"`` (row = 1-based line number in the file, header = line 1) or
``"<file>: <problem>"`` for problems of the whole file (missing columns, empty file).
A :class:`CsvTable` checks column after column, remembers the first problem of each check
and, in :meth:`CsvTable.raise_if_problems`, raises the problem that comes first in the file.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

from arena_gym.cluster import GPU_TYPE_NAME
from arena_gym.families import families, family_aliases
from arena_gym.types import MAX_TIME_S, DeadlineSource, GpuType, JobId, JobSpec, ModelRef, is_power_of_two
from traces.trace import Trace

#: A decimal number literal in ASCII digits (no ``inf``/``nan``, hex, digit separators or other scripts' digits).
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: Largest integer a trace column may hold: every integer up to it is exact as a float64.
MAX_EXACT_INT = 2**53 - 1
#: Largest requested GPU count a trace may hold.
MAX_GPUS = 65536
#: Largest global batch a trace may hold.
MAX_BATCH = 2**24
#: The spellings of a deadline source a trace cell may hold (any case).
DEADLINE_SOURCES: dict[str, DeadlineSource] = {s.value: s for s in DeadlineSource}
#: Magnitude beyond which an integer literal is only compared, never built exactly (``1e999999999``).
_HUGE_DIGITS = 40


def parse_number(text: str) -> float:
    """The correctly rounded float of a decimal literal; NaN for anything else."""
    return float(text) if NUMBER.fullmatch(text) else math.nan


def integer_value(text: str) -> int | None:
    """The exact integer a decimal literal denotes (``"1e3"`` -> 1000), None when it is not an
    integral number. Magnitudes above 10**40 come back as +-10**40 (enough for range checks)."""
    if len(text) <= _HUGE_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    if not NUMBER.fullmatch(text):
        return None
    value = Decimal(text)
    if value.is_zero():
        return 0
    if value.adjusted() >= _HUGE_DIGITS:
        return 10**_HUGE_DIGITS if value > 0 else -(10**_HUGE_DIGITS)
    if value.adjusted() < 0 or value != value.to_integral_value():
        return None
    return int(value)


class TraceFormatError(ValueError):
    """A malformed trace input; the message is one line naming the file (and row)."""


def one_line(text: str) -> str:
    """Collapse whitespace so a message stays on one line."""
    return " ".join(str(text).split())


def parse_model(text: str) -> ModelRef:
    """Parse ``family__size`` and check the family is in the family catalogue; ValueError (one line) otherwise."""
    model = ModelRef.parse(text)
    known = families()
    if model.family not in known:
        aliases = ", ".join(f"{a}->{f}" for a, f in sorted(family_aliases().items()))
        raise ValueError(
            f"unknown model family {model.family!r} in {text.strip()!r} (valid: {', '.join(known)}; aliases {aliases})"
        )
    return model


def read_header(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """Column names of a CSV file (stripped), or a one-line ValueError for an empty file."""
    return _read(path, header_only=True)[0]


def _read(
    path: str | os.PathLike[str], header_only: bool = False
) -> tuple[tuple[str, ...], list[tuple[int, list[str]]]]:
    """The stripped header and the ``(line number, cells)`` rows of a CSV file (UTF-8, BOM allowed).

    A row's line number is the file line it starts on (quoted fields may span lines); short rows
    are padded with empty cells, long rows are an error.
    """
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise TraceFormatError(f"{name}: no such file")
    line = 0
    try:
        with open(name, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header: list[str] = []
            while not any(c.strip() for c in header):  # blank lines before the header are skipped
                row = next(reader, None)
                if row is None:
                    raise TraceFormatError(f"{name}: empty file (no header row)")
                header = row
            columns = tuple(c.strip() for c in header)
            rows: list[tuple[int, list[str]]] = []
            if not header_only:
                line = reader.line_num + 1
                for cells in reader:
                    if len(cells) > len(columns):
                        raise TraceFormatError(f"{name}:{line}: expected {len(columns)} fields, saw {len(cells)}")
                    rows.append((line, cells + [""] * (len(columns) - len(cells))))
                    line = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{name}: not a UTF-8 text file ({one_line(str(exc))})") from None
    except csv.Error as exc:
        raise TraceFormatError(f"{name}:{line or 1}: malformed CSV: {one_line(str(exc))}") from None
    except OSError as exc:
        raise TraceFormatError(f"{name}: cannot read: {exc.strerror or exc}") from None
    return columns, rows


class CsvTable:
    """A trace CSV read as text, with typed column accessors that record problems.

    Accessors return placeholder values for bad cells; call :meth:`raise_if_problems`
    before using the values.
    """

    def __init__(self, path: str | os.PathLike[str], required: Sequence[str], format_label: str) -> None:
        self.path = os.fspath(path)
        columns, rows = _read(self.path)
        twice = sorted({c for c in columns if columns.count(c) > 1 and c})
        if twice:
            raise TraceFormatError(f"{self.path}: column(s) {', '.join(twice)} appear twice in the header")
        missing = [c for c in required if c not in columns]
        if missing:
            raise TraceFormatError(
                f"{self.path}: missing column(s) {', '.join(missing)} "
                f"(the {format_label} format needs {', '.join(required)})"
            )
        # blank lines keep their place in the numbering and are then dropped
        kept = [(line, [c.strip() for c in cells]) for line, cells in rows if any(c.strip() for c in cells)]
        if not kept:
            raise TraceFormatError(f"{self.path}: no job rows (header only)")
        self._index = {c: i for i, c in enumerate(columns)}
        self._cells = [cells for _, cells in kept]
        self.rows = np.array([line for line, _ in kept], dtype=np.int64)
        self._problems: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self._cells)

    def has(self, col: str) -> bool:
        """Whether the header has column ``col``."""
        return col in self._index

    # -- problems ------------------------------------------------------------------------

    def problem(self, index: int, message: str) -> None:
        """Record a problem at table index ``index`` (converted to the file's line number)."""
        self._problems.append((int(self.rows[index]), one_line(message)))

    def first_bad(self, bad: np.ndarray, message_of: Callable[[int], str]) -> None:
        """Record the first index where ``bad`` is true, with ``message_of(index)``."""
        idx = np.flatnonzero(bad)
        if len(idx):
            self.problem(int(idx[0]), message_of(int(idx[0])))

    def raise_if_problems(self) -> None:
        """Raise the recorded problem that comes first in the file, if any."""
        if self._problems:
            row, message = min(self._problems, key=lambda p: p[0])  # stable: first check wins a tie
            raise TraceFormatError(f"{self.path}:{row}: {message}")

    def error(self, index: int, message: str) -> TraceFormatError:
        """A ready-to-raise error at table index ``index``."""
        return TraceFormatError(f"{self.path}:{int(self.rows[index])}: {one_line(message)}")

    # -- typed columns -------------------------------------------------------------------

    def text(self, col: str) -> np.ndarray:
        """Raw (stripped) cells of a column as an object array."""
        i = self._index[col]
        out = np.empty(len(self._cells), dtype=object)
        out[:] = [cells[i] for cells in self._cells]
        return out

    def numbers(
        self, col: str, *, optional: bool = False, min_value: float | None = 0.0, what: str = "number"
    ) -> np.ndarray:
        """Parse a numeric column (correctly rounded floats); empty optional cells become NaN.

        Problems: empty required cell, non-numeric or non-finite cell, value below ``min_value``.
        """
        raw = self.text(col)
        empty = raw == ""
        if not optional:
            self.first_bad(empty, lambda i: f"column {col!r} is empty")
        values = np.array([parse_number(v) for v in raw], dtype=float)
        garbage = ~empty & ~np.isfinite(values)
        self.first_bad(garbage, lambda i: f"column {col!r}: {raw[i]!r} is not a finite {what}")
        ok = np.isfinite(values)
        if min_value is not None:
            low = ok & (values < min_value)
            self.first_bad(low, lambda i: f"column {col!r}: {raw[i]} is below {min_value:g}")
        return np.where(ok, values, np.nan)

    def times(self, col: str, *, optional: bool = False) -> np.ndarray:
        """Times in seconds in ``0..MAX_TIME_S`` (NaN for empty optional cells)."""
        raw = self.text(col)
        values = self.numbers(col, optional=optional, min_value=None, what="time")
        self.first_bad(values < 0, lambda i: f"negative time in column {col!r}: {raw[i]}")
        self.first_bad(
            values > MAX_TIME_S,
            lambda i: f"column {col!r}: {raw[i]} is beyond {MAX_TIME_S:.0f} s (2**40), where seconds lose precision",
        )
        return values

    def counts(
        self, col: str, *, optional: bool = False, min_value: int = 1, max_value: int = MAX_EXACT_INT
    ) -> np.ndarray:
        """Integers in ``[min_value, max_value]``, read exactly, as int64 (0 for empty optional or bad cells).

        Problems: empty required cell, non-numeric cell, fractional value, value below
        ``min_value``, value above ``max_value`` (named with the allowed range; never wrapped
        or rounded).
        """
        raw = self.text(col)
        empty = raw == ""
        if not optional:
            self.first_bad(empty, lambda i: f"column {col!r} is empty")
        numeric = np.array([NUMBER.fullmatch(v) is not None for v in raw], dtype=bool)
        self.first_bad(~empty & ~numeric, lambda i: f"column {col!r}: {raw[i]!r} is not a finite integer")
        exact = [integer_value(v) if ok else None for v, ok in zip(raw, numeric)]
        known = np.array([n is not None for n in exact], dtype=bool)
        self.first_bad(numeric & ~known, lambda i: f"column {col!r}: {raw[i]!r} is not an integer")
        low = np.array([n is not None and n < min_value for n in exact], dtype=bool)
        self.first_bad(low, lambda i: f"column {col!r}: {raw[i]} is below {min_value}")
        high = np.array([n is not None and n > max_value for n in exact], dtype=bool)
        self.first_bad(high, lambda i: f"column {col!r}: {raw[i]} is out of range (allowed {min_value}..{max_value})")
        return np.array([n if n is not None and min_value <= n <= max_value else 0 for n in exact], dtype=np.int64)

    def gpu_counts(self, col: str, *, optional: bool = False) -> np.ndarray:
        """Power-of-two GPU counts in ``[1, MAX_GPUS]`` as int64 (0 for empty optional cells)."""
        values = self.counts(col, optional=optional, max_value=MAX_GPUS)
        bad = np.array([v > 0 and not is_power_of_two(int(v)) for v in values], dtype=bool)
        self.first_bad(bad, lambda i: f"column {col!r}: GPU count {values[i]} is not a power of two")
        return values

    def models(self, col: str) -> list[ModelRef]:
        """Model references, family checked (aliases accepted); sizes are not checked."""
        raw = self.text(col)
        parsed: dict[str, ModelRef | None] = {}
        out: list[ModelRef] = []
        placeholder = ModelRef("gpt", "?")
        for i, text in enumerate(raw):
            if text not in parsed:
                try:
                    parsed[text] = parse_model(text)
                except ValueError as exc:
                    parsed[text] = None
                    self.problem(i, f"column {col!r}: {exc}")
            out.append(parsed[text] or placeholder)
        return out

    def labels(self, col: str, *, optional: bool = False, lower: bool = False) -> list[str | None]:
        """Text labels (``None`` for empty optional cells)."""
        raw = self.text(col)
        if not optional:
            self.first_bad(raw == "", lambda i: f"column {col!r} is empty")
        return [(str(v).lower() if lower else str(v)) if v != "" else None for v in raw]

    def gpu_types(self, col: str, *, optional: bool = False) -> list[str | None]:
        """Lower-cased GPU type names (``None`` for empty optional cells); ASCII names only."""
        raw = self.text(col)
        bad = np.array([v != "" and GPU_TYPE_NAME.fullmatch(v) is None for v in raw], dtype=bool)
        self.first_bad(
            bad, lambda i: f"column {col!r}: {raw[i]!r} is not a GPU type name (ASCII letters, digits, '.', '_', '-')"
        )
        return self.labels(col, optional=optional, lower=True)

    def job_ids(self, col: str = "job_id") -> list[str]:
        """Non-empty, unique job ids."""
        ids = [str(v) for v in self.text(col)]
        self.first_bad(np.array([v == "" for v in ids], dtype=bool), lambda i: f"column {col!r} is empty")
        seen: dict[str, int] = {}
        for i, job_id in enumerate(ids):
            if job_id and job_id in seen:
                self.problem(i, f"duplicate job id {job_id!r} (first on line {self.rows[seen[job_id]]})")
                break
            seen.setdefault(job_id, i)
        return ids

    def deadline_sources(self, col: str, deadlines: np.ndarray) -> list[DeadlineSource | None]:
        """Each row's deadline source (``declared`` / ``derived``, any case); None where the row has no deadline.

        Problems: an unknown value, an empty cell beside a deadline, a value beside no deadline.
        """
        raw = self.text(col)
        valid = ", ".join(DEADLINE_SOURCES)
        parsed = [DEADLINE_SOURCES.get(str(v).lower()) for v in raw]
        has_deadline = ~np.isnan(deadlines)
        empty = raw == ""
        unknown = np.array([p is None for p in parsed], dtype=bool) & ~empty
        self.first_bad(unknown, lambda i: f"column {col!r}: {raw[i]!r} is not a deadline source (valid: {valid})")
        self.first_bad(
            empty & has_deadline, lambda i: f"column {col!r} is empty but the job has a deadline (valid: {valid})"
        )
        self.first_bad(
            ~empty & ~unknown & ~has_deadline,
            lambda i: f"column {col!r}: {raw[i]!r} given for a job without a deadline (leave it empty)",
        )
        return parsed

    def deadlines_after(self, deadlines: np.ndarray, submits: np.ndarray, col: str) -> None:
        """Record a deadline earlier than its job's submission time."""
        bad = np.isfinite(deadlines) & np.isfinite(submits) & (deadlines < submits)
        self.first_bad(
            bad, lambda i: f"column {col!r}: deadline {deadlines[i]:g} is before the submission time {submits[i]:g}"
        )


def optional_float(value: float) -> float | None:
    """NaN -> None, else a float."""
    return None if math.isnan(value) else float(value)


def rebase_order(submits: np.ndarray, ids: Sequence[str], keep: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Indices of the jobs to keep (default all) sorted by (rebased submit time, job id), and the offset.

    The offset is the earliest kept submit time; sorting on the rebased times (not the file's)
    keeps the order right where the subtraction rounds two times to the same value.
    """
    kept = np.arange(len(ids), dtype=np.int64) if keep is None else np.asarray(keep, dtype=np.int64)
    if len(kept) == 0:
        return kept, 0.0
    offset = float(np.min(submits[kept]))
    order = sorted(kept.tolist(), key=lambda i: (float(submits[i]) - offset, ids[i]))
    return np.array(order, dtype=np.int64), offset


@dataclass(frozen=True)
class JobColumns:
    """A fully specified format (canonical, Arena CSV): its name, the header it needs, the prefix of a
    trace's ``source``, which column holds which job field, and where its deadlines come from.

    ``deadline_source`` names an optional column stating each deadline's source (None: the
    format has none); ``default_source`` is the source of every deadline where that column is absent.
    """

    format_label: str
    required: tuple[str, ...]
    source: str
    job_id: str
    submit: str
    model: str
    batch: str
    iterations: str
    gpu_type: str
    num_gpus: str
    deadline: str
    request_optional: bool  # may the GPU type / count cells be empty?
    default_source: DeadlineSource
    deadline_source: str | None = None


def read_jobs(table: CsvTable, cols: JobColumns, *, iteration_divisor: int = 1) -> tuple[tuple[JobSpec, ...], float]:
    """Parse, validate and rebase the jobs of a fully specified table.

    Returns the jobs sorted by (submit time, job id), rebased so the first arrives at 0, and
    the offset. Iterations are divided by ``iteration_divisor``, rounded up, at least 1. A job
    with a deadline gets the source its row states, else ``cols.default_source``; one without
    gets JobSpec's default (DECLARED).
    """
    ids = table.job_ids(cols.job_id)
    submit = table.times(cols.submit)
    models = table.models(cols.model)
    batch = table.counts(cols.batch, max_value=MAX_BATCH)
    iters = table.counts(cols.iterations)
    types = table.gpu_types(cols.gpu_type, optional=cols.request_optional)
    gpus = table.gpu_counts(cols.num_gpus, optional=cols.request_optional)
    deadline = table.times(cols.deadline, optional=True)
    table.deadlines_after(deadline, submit, cols.deadline)
    sources: list[DeadlineSource | None] = [cols.default_source] * len(table)
    if cols.deadline_source is not None and table.has(cols.deadline_source):
        sources = table.deadline_sources(cols.deadline_source, deadline)
    table.raise_if_problems()

    order, offset = rebase_order(submit, ids)
    jobs = []
    for i in order:
        dl = optional_float(deadline[i])
        source = sources[i] if dl is not None else None  # no deadline: JobSpec's default
        jobs.append(
            JobSpec(
                job_id=JobId(ids[i]),
                model=models[i],
                global_batch=int(batch[i]),
                iterations=max(1, -(-int(iters[i]) // iteration_divisor)),
                submit_time=float(submit[i]) - offset,
                requested_gpu_type=None if types[i] is None else GpuType(types[i]),
                requested_gpus=int(gpus[i]) or None,
                deadline=None if dl is None else dl - offset,
                deadline_source=source or DeadlineSource.DECLARED,
            )
        )
    return tuple(jobs), offset


def load_job_table(
    path: str | os.PathLike[str], cols: JobColumns, *, name: str | None = None, iteration_divisor: int = 1
) -> Trace:
    """The trace of a fully specified table file (:func:`read_jobs`), named ``name`` or the file's stem."""
    table = CsvTable(path, cols.required, cols.format_label)
    jobs, offset = read_jobs(table, cols, iteration_divisor=iteration_divisor)
    return Trace(name or Path(path).stem, jobs, f"{cols.source}:{os.fspath(path)}", offset)
