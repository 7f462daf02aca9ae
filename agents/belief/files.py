"""Belief files: the JSON form of a :class:`WorkBelief` (read with :mod:`agents.belief.jsonio`, written atomically) and the packaged beliefs."""

from __future__ import annotations

import json
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from agents.belief.arrivals import ArrivalModel, JobAttributes
from agents.belief.jsonio import JsonObject, dumps
from agents.belief.kernels import POOLED, WorkGroup
from agents.belief.model import KINDS, Candidate, Provenance, WorkBelief
from agents.belief.references import ReferenceTable
from arena_gym.fields import FieldError, check, short
from arena_gym.outputs import atomic_write
from arena_gym.types import GpuType, ModelRef

log = logging.getLogger(__name__)

#: The ``format`` tag and version of a belief file.
FORMAT = "arena-gym-belief"
FORMAT_VERSION = 1
#: Where the packaged belief files are.
DATA_DIR = Path(__file__).resolve().parent / "data"
_TOP_KEYS = (
    "format",
    "version",
    "kind",
    "unit",
    "levels",
    "min_group_jobs",
    "provenance",
    "selection",
    "groups",
    "references",
    "arrivals",
)


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
    text = dumps(belief_to_dict(belief)) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def belief_from_dict(data: Any) -> WorkBelief:
    """A belief from the JSON object of its file; one-line ValueError naming the problem."""
    top = JsonObject(data, "belief")
    if top.get("format", str) != FORMAT:
        raise ValueError(f"format must be {FORMAT!r}, got {top.data.get('format')!r}")
    if top.get("version", int) != FORMAT_VERSION:
        raise ValueError(f"version must be {FORMAT_VERSION}, got {top.data.get('version')!r}")
    unknown = sorted(set(top.data) - set(_TOP_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(_TOP_KEYS)}")
    prov = top.obj("provenance")
    arrivals = top.obj("arrivals")
    mix = [_config_entry(e, f"arrivals.mix[{i}]", False) for i, e in enumerate(arrivals.get("mix", list))]
    return WorkBelief(
        kind=top.get("kind", str),
        unit=top.get("unit", str),
        levels=tuple(top.strings("levels")),
        min_group_jobs=top.get("min_group_jobs", int),
        groups=tuple(_group_of(g) for g in top.objs("groups")),
        references=ReferenceTable(
            tuple(_config_entry(e, f"references[{i}]", True)[0] for i, e in enumerate(top.get("references", list)))
        ),
        arrivals=ArrivalModel(
            rate_shape=arrivals.get("rate_shape", float),
            rate_s=arrivals.get("rate_s", float),
            windows=arrivals.get("windows", int),
            mix=tuple(a for a, _ in mix),
            weights=tuple(w for _, w in mix),
        ),
        provenance=Provenance(
            env=prov.get("env", str),
            traces=tuple(prov.strings("traces")),
            split=prov.get("split", str),
            cluster=prov.get("cluster", str),
            perf=prov.get("perf", str),
            jobs=prov.get("jobs", int),
            source=prov.get("source", str),
            code_version=prov.get("code_version", str),
        ),
        selection=tuple(
            Candidate(
                c.get("unit", str),
                tuple(c.strings("levels")),
                c.get("loglik", float),
                c.get("se", float),
                c.get("jobs", int),
            )
            for c in top.objs("selection")
        ),
    )


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
    names = {"configuration": ("model", "global_batch", "gpu_type", "num_gpus"), "model": ("model",), POOLED: ()}
    return {
        "level": g.level,
        **dict(zip(names[g.level], g.key)),
        "jobs": g.jobs,
        "bandwidth": g.bandwidth,
        "centres": list(g.centres),
        "weights": list(g.weights),
    }


def _group_of(o: JsonObject) -> WorkGroup:
    level = o.get("level", str)
    if level == "configuration":
        key: tuple[str | int, ...] = (
            o.get("model", str),
            o.get("global_batch", int),
            o.get("gpu_type", str),
            o.get("num_gpus", int),
        )
    elif level == "model":
        key = (o.get("model", str),)
    else:
        key = ()
    return WorkGroup(
        level, key, o.get("jobs", int), o.get("bandwidth", float), o.numbers("centres"), o.numbers("weights")
    )


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
