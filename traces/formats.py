"""Registry of trace file formats and generators, resolved lazily from ``"module:attr"`` strings.

Adding a format means adding a :class:`TraceFormat` entry here (and its loader module); the
detection and the spec resolution in :mod:`traces.io` need no change.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from traces.table import TraceFormatError


@dataclass(frozen=True)
class TraceFormat:
    """A trace file format: the columns that identify it and its loader (``module:attr``)."""

    name: str
    columns: tuple[str, ...]
    loader: str
    description: str


CANONICAL_COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit_time_s",
    "model",
    "global_batch",
    "iterations",
    "gpu_type",
    "num_gpus",
    "deadline_s",
)
#: The canonical format's optional column: each deadline's source, ``declared`` or ``derived``
#: (absent: every deadline is declared).
DEADLINE_SOURCE_COLUMN = "deadline_source"
ARENA_COLUMNS: tuple[str, ...] = (
    "job_id",
    "submission_time",
    "num_iteration",
    "model_name",
    "deadline",
    "batch_size",
    "num_gpu",
    "gpu_type",
)
ITP_COLUMNS: tuple[str, ...] = ("job_id", "submission_time", "duration", "num_gpu")

FORMATS: dict[str, TraceFormat] = {
    "canonical": TraceFormat(
        "canonical",
        CANONICAL_COLUMNS,
        "traces.canonical:load_canonical",
        "arena-gym's own CSV (what save_trace writes)",
    ),
    "arena": TraceFormat(
        "arena",
        ARENA_COLUMNS,
        "traces.arena_csv:load_arena_csv",
        "the Arena artifact's trace CSV (philly, pai, testbed)",
    ),
    "itp": TraceFormat(
        "itp",
        ITP_COLUMNS,
        "traces.itp:load_itp_csv",
        "ITP / ElasticFlow raw trace; job fields sampled with the Arena recipe",
    ),
}

#: Built-in generators usable as a trace spec ``name[:key=value,...]``.
GENERATORS: dict[str, str] = {
    "synthetic": "traces.synthetic:synthetic_from_options",
    "live": "traces.live:live_from_options",
}


def resolve(target: str) -> Callable[..., Any]:
    """Import ``"module:attr"`` and return the attribute."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def get_format(name: str) -> TraceFormat:
    """The format called ``name``; ValueError listing the valid names otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown trace format {name!r}; valid: {', '.join(FORMATS)}") from None


def detect_format(path: str, header: Sequence[str]) -> TraceFormat:
    """The format whose columns the header has; a one-line error naming what is missing.

    A header that has all columns of several formats picks the one with the most columns.
    Otherwise the closest format (largest share of its columns present) names the missing
    columns; a header sharing under half of every format's columns is "unrecognised".
    """
    have = set(header)
    scored = []
    for order, fmt in enumerate(FORMATS.values()):
        present = sum(c in have for c in fmt.columns)
        scored.append((present == len(fmt.columns), present / len(fmt.columns), len(fmt.columns), -order, fmt))
    complete, share, _, _, best = max(scored, key=lambda s: s[:4])
    if complete:
        return best
    if share < 0.5:
        known = "; ".join(f"{f.name}: {', '.join(f.columns)}" for f in FORMATS.values())
        raise TraceFormatError(f"{path}: unrecognised header ({', '.join(header)}); known formats: {known}")
    missing = [c for c in best.columns if c not in have]
    raise TraceFormatError(
        f"{path}: missing column(s) {', '.join(missing)} (the {best.name} format needs {', '.join(best.columns)})"
    )
