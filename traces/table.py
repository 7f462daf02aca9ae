"""Reading trace CSV files with row-accurate, one-line error messages.

Every malformed-input problem becomes a ``ValueError`` whose message is one line,
``"<file>:<row>: <problem>"`` (row = 1-based line number in the file, header = line 1) or
``"<file>: <problem>"`` for problems of the whole file (missing columns, empty file).
A :class:`CsvTable` checks column after column, remembers the first problem of each check
and, in :meth:`CsvTable.raise_if_problems`, raises the problem that comes first in the file.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from arena_gym.types import FAMILY_ALIASES, GpuType, JobId, JobSpec, ModelRef, is_power_of_two

#: Model families a trace may name (after aliases such as ``bert`` -> ``gpt``).
FAMILIES: tuple[str, ...] = ("gpt", "moe", "wide_resnet")


class TraceFormatError(ValueError):
    """A malformed trace input; the message is one line naming the file (and row)."""


def one_line(text: str) -> str:
    """Collapse whitespace so a message stays on one line."""
    return " ".join(str(text).split())


def parse_model(text: str) -> ModelRef:
    """Parse ``family__size`` and check the family; ValueError (one line) otherwise."""
    model = ModelRef.parse(text)
    if model.family not in FAMILIES:
        aliases = ", ".join(f"{a}->{f}" for a, f in sorted(FAMILY_ALIASES.items()))
        raise ValueError(
            f"unknown model family {model.family!r} in {text.strip()!r} "
            f"(valid: {', '.join(FAMILIES)}; aliases {aliases})"
        )
    return model


def read_header(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """Column names of a CSV file (stripped), or a one-line ValueError for an empty file."""
    df = _read(path, nrows=0)
    return tuple(df.columns)


def _read(path: str | os.PathLike[str], nrows: int | None = None) -> pd.DataFrame:
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise TraceFormatError(f"{name}: no such file")
    try:
        df = pd.read_csv(
            name, dtype=str, keep_default_na=False, na_filter=False, skip_blank_lines=False, nrows=nrows
        )
    except pd.errors.EmptyDataError:
        raise TraceFormatError(f"{name}: empty file (no header row)") from None
    except pd.errors.ParserError as exc:
        match = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if match:
            want, line, saw = match.groups()
            raise TraceFormatError(f"{name}:{line}: expected {want} fields, saw {saw}") from None
        raise TraceFormatError(f"{name}: malformed CSV: {one_line(exc)}") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{name}: not a UTF-8 text file ({one_line(exc)})") from None
    df.columns = [str(c).strip() for c in df.columns]
    return df


class CsvTable:
    """A trace CSV read as text, with typed column accessors that record problems.

    Accessors return placeholder values for bad cells; call :meth:`raise_if_problems`
    before using the values.
    """

    def __init__(self, path: str | os.PathLike[str], required: Sequence[str], format_label: str) -> None:
        self.path = os.fspath(path)
        df = _read(self.path)
        missing = [c for c in required if c not in df.columns]
        if missing:
            raise TraceFormatError(
                f"{self.path}: missing column(s) {', '.join(missing)} "
                f"(the {format_label} format needs {', '.join(required)})"
            )
        df = df.apply(lambda col: col.str.strip())
        # line numbers: header is line 1; blank lines keep their place and are then dropped
        lines = np.arange(len(df), dtype=np.int64) + 2
        blank = (df == "").all(axis=1).to_numpy() if len(df.columns) else np.ones(len(df), bool)
        self.df = df.loc[~blank].reset_index(drop=True)
        self.rows = lines[~blank]
        if len(self.df) == 0:
            raise TraceFormatError(f"{self.path}: no job rows (header only)")
        self._problems: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self.df)

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
        return self.df[col].to_numpy(dtype=object)

    def numbers(self, col: str, *, optional: bool = False, min_value: float | None = 0.0,
                integer: bool = False, what: str = "number") -> np.ndarray:
        """Parse a numeric column; empty optional cells become NaN.

        Problems: empty required cell, non-numeric or non-finite cell, value below
        ``min_value``, non-integral value where ``integer``.
        """
        raw = self.text(col)
        empty = raw == ""
        values = pd.to_numeric(self.df[col], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if not optional:
            self.first_bad(empty, lambda i: f"column {col!r} is empty")
        garbage = ~empty & ~np.isfinite(values)
        self.first_bad(garbage, lambda i: f"column {col!r}: {raw[i]!r} is not a finite {what}")
        ok = np.isfinite(values)
        if integer:
            frac = ok & (values != np.floor(np.where(ok, values, 0.0)))
            self.first_bad(frac, lambda i: f"column {col!r}: {raw[i]!r} is not an integer")
        if min_value is not None:
            low = ok & (values < min_value)
            self.first_bad(low, lambda i: f"column {col!r}: {raw[i]} is below {min_value:g}")
        values = np.where(ok, values, np.nan)
        return values

    def times(self, col: str, *, optional: bool = False) -> np.ndarray:
        """Non-negative times in seconds (NaN for empty optional cells)."""
        raw = self.text(col)
        values = self.numbers(col, optional=optional, min_value=None, what="time")
        self.first_bad(values < 0, lambda i: f"negative time in column {col!r}: {raw[i]}")
        return values

    def counts(self, col: str, *, optional: bool = False, min_value: int = 1) -> np.ndarray:
        """Integers >= ``min_value`` as int64 (0 for empty optional or bad cells)."""
        values = self.numbers(col, optional=optional, min_value=min_value, integer=True, what="integer")
        return np.where(np.isfinite(values), values, 0).astype(np.int64)

    def gpu_counts(self, col: str, *, optional: bool = False) -> np.ndarray:
        """Power-of-two GPU counts as int64 (0 for empty optional cells)."""
        values = self.counts(col, optional=optional)
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

    def deadlines_after(self, deadlines: np.ndarray, submits: np.ndarray, col: str) -> None:
        """Record a deadline earlier than its job's submission time."""
        bad = np.isfinite(deadlines) & np.isfinite(submits) & (deadlines < submits)
        self.first_bad(
            bad, lambda i: f"column {col!r}: deadline {deadlines[i]:g} is before the submission time {submits[i]:g}"
        )


def optional_float(value: float) -> float | None:
    """NaN -> None, else a float."""
    return None if math.isnan(value) else float(value)


def rebase_order(submits: np.ndarray, ids: Iterable[str]) -> tuple[np.ndarray, float]:
    """Indices sorting jobs by (submit time, job id), and the first submit time (offset)."""
    ids = list(ids)
    order = np.array(sorted(range(len(ids)), key=lambda i: (submits[i], ids[i])), dtype=np.int64)
    offset = float(submits[order[0]]) if len(order) else 0.0
    return order, offset


@dataclass(frozen=True)
class JobColumns:
    """Which column of a fully specified format (canonical, Arena CSV) holds which job field."""

    job_id: str
    submit: str
    model: str
    batch: str
    iterations: str
    gpu_type: str
    num_gpus: str
    deadline: str
    request_optional: bool  # may the GPU type / count cells be empty?


def read_jobs(table: CsvTable, cols: JobColumns, *, iteration_divisor: int = 1) -> tuple[tuple[JobSpec, ...], float]:
    """Parse, validate and rebase the jobs of a fully specified table.

    Returns the jobs sorted by (submit time, job id), rebased so the first arrives at 0, and
    the offset. Iterations are divided by ``iteration_divisor``, rounded up, at least 1.
    """
    ids = table.job_ids(cols.job_id)
    submit = table.times(cols.submit)
    models = table.models(cols.model)
    batch = table.counts(cols.batch)
    iters = table.counts(cols.iterations)
    types = table.labels(cols.gpu_type, optional=cols.request_optional, lower=True)
    gpus = table.gpu_counts(cols.num_gpus, optional=cols.request_optional)
    deadline = table.times(cols.deadline, optional=True)
    table.deadlines_after(deadline, submit, cols.deadline)
    table.raise_if_problems()

    order, offset = rebase_order(submit, ids)
    jobs = []
    for i in order:
        dl = optional_float(deadline[i])
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
            )
        )
    return tuple(jobs), offset
