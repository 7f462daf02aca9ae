"""Belief files: the JSON form of a :class:`WorkBelief` (read through :mod:`arena_gym.fields`, written atomically) and the packaged beliefs."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from agents.belief.arrivals import ArrivalModel, JobAttributes
from agents.belief.kernels import POOLED, WorkGroup
from agents.belief.model import KINDS, Candidate, Provenance, WorkBelief
from agents.belief.references import ReferenceTable
from arena_gym.fields import FieldError, build, check, fits, read_fields, short
from arena_gym.outputs import atomic_write
from arena_gym.types import GpuType, ModelRef

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The ``format`` tag and version of a belief file.
FORMAT = "arena-gym-belief"
FORMAT_VERSION = 1
#: Where the packaged belief files are.
DATA_DIR = Path(__file__).resolve().parent / "data"
#: The fields of a belief its file gives (besides ``format`` and ``version``).
_BELIEF_FIELDS = tuple(f.name for f in dataclasses.fields(WorkBelief) if f.init)
#: The fields naming a kernel group in its file, by level.
_KEY_NAMES: dict[str, tuple[str, ...]] = {
    "configuration": ("model", "global_batch", "gpu_type", "num_gpus"),
    "model": ("model",),
    POOLED: (),
}


@dataclass(frozen=True)
class _GroupKey:
    """The fields that name a kernel group in its file (its level gives those :data:`_KEY_NAMES` lists)."""

    model: str
    global_batch: int
    gpu_type: str
    num_gpus: int


def belief_to_dict(belief: WorkBelief) -> dict[str, Any]:
    """The belief as the JSON object of its file."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "kind": belief.kind,
        "unit": belief.unit,
        "levels": list(belief.levels),
        "min_group_jobs": belief.min_group_jobs,
        "provenance": {**_fields(belief.provenance), "traces": list(belief.provenance.traces)},
        "selection": [{**_fields(c), "levels": list(c.levels)} for c in belief.selection],
        "groups": [_group_dict(g) for g in belief.groups],
        "references": [[*_config_list(r), r.reference_s] for r in belief.references.entries],
        "arrivals": {
            "rate_shape": belief.arrivals.rate_shape,
            "rate_s": belief.arrivals.rate_s,
            "windows": belief.arrivals.windows,
            "mix": [[*_config_list(a), w] for a, w in zip(belief.arrivals.mix, belief.arrivals.weights)],
        },
    }


def save_belief(belief: WorkBelief, path: str | os.PathLike[str]) -> Path:
    """Write the belief to a JSON file (atomically)."""
    text = _dumps(belief_to_dict(belief)) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def belief_from_dict(data: Any) -> WorkBelief:
    """A belief from the JSON object of its file; one-line ValueError naming the problem."""
    if not isinstance(data, Mapping):
        raise ValueError(f"belief: expected a JSON object, got {short(data)}")
    if data.get("format") != FORMAT:
        raise ValueError(f"format must be {FORMAT!r}, got {short(data.get('format'))}")
    if not (fits(data.get("version"), int) and data.get("version") == FORMAT_VERSION):
        raise ValueError(f"version must be {FORMAT_VERSION}, got {short(data.get('version'))}")
    readers: dict[str, Callable[[Any], Any]] = {
        "groups": lambda v: _each(_group_of, v, "belief.groups"),
        "references": lambda v: ReferenceTable(
            tuple(a for a, _ in _each(lambda e, w: _config_entry(e, w, True), v, "belief.references"))
        ),
        "arrivals": _arrivals_of,
        "provenance": lambda v: build(Provenance, v, "belief.provenance"),
        "selection": lambda v: _each(lambda c, w: build(Candidate, c, w), v, "belief.selection"),
    }
    body = {k: v for k, v in data.items() if k not in ("format", "version")}
    return WorkBelief(**read_fields(WorkBelief, body, "belief", readers, names=_BELIEF_FIELDS, require=("selection",)))


def read_belief(path: str | os.PathLike[str]) -> WorkBelief:
    """Read a belief file; a malformed one raises a one-line ValueError naming the file and the problem."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"belief file {os.fspath(path)}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ValueError(f"belief file {os.fspath(path)}: not JSON ({exc})") from None
    try:
        belief = belief_from_dict(data)
    except ValueError as exc:
        raise ValueError(f"belief file {os.fspath(path)}: {str(exc).splitlines()[0]}") from None
    log.debug("loaded a %s belief (%d groups) from %s", belief.kind, len(belief.groups), os.fspath(path))
    return belief


@lru_cache(maxsize=len(KINDS))
def default_belief(kind: str = "real") -> WorkBelief:
    """The packaged belief of a kind: ``real`` (train split of Testbed64Real-v1's five traces) or ``synthetic``."""
    if kind not in KINDS:
        raise ValueError(f"unknown belief kind {kind!r}; valid: {', '.join(KINDS)}")
    return read_belief(DATA_DIR / f"belief-{kind}.json")


def load_belief(spec: str) -> WorkBelief:
    """A packaged belief by kind (:data:`KINDS`), else the belief file at path ``spec``."""
    return default_belief(spec) if spec in KINDS else read_belief(spec)


# ---------------------------------------------------------------------- file helpers
def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__dataclass_fields__ if not name.startswith("_")}


def _config_list(a: JobAttributes) -> list[Any]:
    return [a.model.name, a.global_batch, a.gpu_type, a.num_gpus]


def _group_dict(g: WorkGroup) -> dict[str, Any]:
    return {
        "level": g.level,
        **dict(zip(_KEY_NAMES[g.level], g.key)),
        "jobs": g.jobs,
        "bandwidth": g.bandwidth,
        "centres": list(g.centres),
        "weights": list(g.weights),
    }


def _dumps(value: Any, depth: int = 0) -> str:
    """JSON with objects and lists of containers indented, flat lists on one line."""
    pad, end = "  " * (depth + 1), "  " * depth
    if isinstance(value, dict) and value:
        body = ",\n".join(f"{pad}{json.dumps(k)}: {_dumps(v, depth + 1)}" for k, v in value.items())
        return "{\n" + body + "\n" + end + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(pad + _dumps(v, depth + 1) for v in value) + "\n" + end + "]"
    return json.dumps(value, allow_nan=False)


def _each(read: Callable[[Any, str], T], value: Any, where: str) -> tuple[T, ...]:
    """``read`` applied to each item of the JSON list ``value`` (``where[i]`` naming the item)."""
    return tuple(read(item, f"{where}[{i}]") for i, item in enumerate(check(value, list, where)))


def _group_of(data: Any, where: str) -> WorkGroup:
    level = data.get("level") if isinstance(data, Mapping) else None
    names = _KEY_NAMES.get(level, ()) if isinstance(level, str) else ()
    body = {k: v for k, v in data.items() if k not in names} if isinstance(data, Mapping) else data
    values = read_fields(WorkGroup, body, where, names=("level", "jobs", "bandwidth", "centres", "weights"))
    key = read_fields(_GroupKey, {k: data[k] for k in names if k in data}, where, names=names)
    return WorkGroup(key=tuple(key[n] for n in names), **values)


def _arrivals_of(data: Any) -> ArrivalModel:
    mix = {"mix": lambda v: _each(lambda e, w: _config_entry(e, w, False), v, "belief.arrivals.mix")}
    values = read_fields(ArrivalModel, data, "belief.arrivals", mix, names=("rate_shape", "rate_s", "windows", "mix"))
    entries = values.pop("mix")
    return ArrivalModel(**values, mix=tuple(a for a, _ in entries), weights=tuple(w for _, w in entries))


def _config_entry(entry: Any, where: str, reference: bool) -> tuple[JobAttributes, float]:
    """``[model, batch, type, count, value]`` as attributes (with ``reference_s = value`` for a reference) and value."""
    try:
        model, batch, gpu_type, count, value = check(entry, tuple[str, int, str | None, int | None, float], where)
    except FieldError:
        raise ValueError(
            f"{where}: expected [model, global batch, GPU type, GPU count, number], got {short(entry)}"
        ) from None
    try:
        ref = float(value) if reference else None
        return JobAttributes(ModelRef.parse(model), batch, GpuType(gpu_type) if gpu_type else None, count, ref), float(
            value
        )
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
