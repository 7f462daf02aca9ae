"""The progress channel: an append-only JSON-lines file that one rank writes and a controller tails.

Each line is one :class:`ProgressRecord` (fields left out when empty)::

    {"t": 1764495000.12, "event": "step", "job_id": "j1", "step": 12, "loss": 5.91, "iter_s": 0.054,
     "samples_per_s": 296.3}

Events: ``start`` (``info``: executed plan, world size, resumed checkpoint step, start-up timings),
``step``, ``checkpoint`` (``ckpt_step``, ``info.save_s``), ``done`` and ``stopped`` (``ckpt_step``:
the checkpoint that holds the final state), ``error`` (``info.message``; step -1). A record is written with
one ``write`` call and flushed, so a reader sees whole lines or an unterminated tail, which
:class:`ProgressTail` leaves for its next poll. A tail torn by a writer killed during its write is
ended with a newline by the next writer (it then reads as one bad line, skipped).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from arena_gym.fields import FieldError, build

log = logging.getLogger(__name__)

#: The events a worker writes.
EVENTS = ("start", "step", "checkpoint", "done", "stopped", "error")


@dataclass(frozen=True)
class ProgressRecord:
    """One progress record; ``step`` is the number of completed training steps."""

    t: float
    event: str
    job_id: str
    step: int
    loss: float | None = None
    iter_s: float | None = None
    samples_per_s: float | None = None
    ckpt_step: int | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"progress event {self.event!r} is unknown; valid: {', '.join(EVENTS)}")

    def to_json(self) -> str:
        """One JSON line (no newline); ``None`` fields and an empty ``info`` are left out."""
        data: dict[str, Any] = {"t": self.t, "event": self.event, "job_id": self.job_id, "step": self.step}
        for key in ("loss", "iter_s", "samples_per_s", "ckpt_step"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.info:
            data["info"] = dict(self.info)
        return json.dumps(data, allow_nan=False, separators=(",", ":"))

    @staticmethod
    def from_json(line: str) -> ProgressRecord:
        """Parse one line (read by its annotations: ints not bools, numbers for floats, no unknown keys);
        ValueError when it is not a progress record."""
        try:
            return build(ProgressRecord, json.loads(line), "record")
        except FieldError as exc:
            raise ValueError(f"not a progress record ({exc}): {line[:80]!r}") from None
        except ValueError as exc:  # not JSON, or an unknown event
            raise ValueError(f"not a progress record ({type(exc).__name__}: {exc}): {line[:80]!r}") from None


class ProgressWriter:
    """Appends records to a JSON-lines file, one flushed write per record.

    A file that ends inside a line (a writer killed during its write) gets a newline first, so the
    torn record stays a line of its own, which readers skip, and costs none of the records that follow.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = open(self.path, "a", encoding="utf-8")
        if _ends_inside_a_line(self.path):
            log.warning("%s: ends inside a record (a writer was killed while writing it); starting a new line", path)
            self._fh.write("\n")
            self._fh.flush()

    def write(self, record: ProgressRecord) -> None:
        """Append one record and flush it to the operating system."""
        if record.loss is not None and not math.isfinite(record.loss):
            record = replace(record, loss=None, info={**record.info, "loss": str(record.loss)})  # JSON has no NaN
        self._fh.write(record.to_json() + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        self._fh.close()


def _ends_inside_a_line(path: Path) -> bool:
    """Whether the file's last byte is something other than a newline (False for an empty file)."""
    with open(path, "rb") as fh:
        if fh.seek(0, 2) == 0:
            return False
        fh.seek(-1, 2)
        return fh.read(1) != b"\n"


class ProgressTail:
    """Reads the records appended to a progress file since the last poll (by byte offset).

    A missing file reads as empty; an unterminated last line is left for the next poll; a complete
    line that is not a record is logged and skipped.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.offset = 0

    def poll(self) -> list[ProgressRecord]:
        """Records completed since the previous call, in file order."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        records = []
        for line in chunk[:end].split(b"\n"):
            try:
                records.append(ProgressRecord.from_json(line.decode("utf-8")))
            except (ValueError, UnicodeDecodeError) as exc:
                log.warning("%s: skipping a line: %s", self.path, exc)
        return records


def read_progress(path: str | Path) -> list[ProgressRecord]:
    """Every complete record of a progress file."""
    return ProgressTail(path).poll()
