"""Cluster presets and loading a user's JSON/TOML cluster file (checked against a schema)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arena_gym.fields import build, fits, from_text, hints_of, read_fields, short
from arena_gym.types import ClusterSpec, GpuType, NodeGroup, is_power_of_two


def _groups(spec: dict[str, tuple[int, int]]) -> tuple[NodeGroup, ...]:
    return tuple(NodeGroup(GpuType(t), nodes, per_node) for t, (nodes, per_node) in spec.items())


#: Built-in clusters. ``arena-1280`` is the artifact's simulated cluster (docs/arena.md §8.1);
#: ``testbed-64`` its real A40 + A10 testbed (32 two-GPU nodes, split evenly: the exact split is
#: unknown); ``tiny`` is an 8-GPU, 2-type cluster for quick experiments and tests.
PRESETS: dict[str, ClusterSpec] = {
    "arena-1280": ClusterSpec(
        "arena-1280", _groups({"a100": (80, 4), "v100": (20, 16), "a40": (160, 2), "a10": (160, 2)})
    ),
    "testbed-64": ClusterSpec("testbed-64", _groups({"a40": (16, 2), "a10": (16, 2)})),
    "tiny": ClusterSpec("tiny", _groups({"a40": (2, 2), "a10": (2, 2)})),
}

#: The cluster-file schema: a ``gpu_types`` entry's keys are NodeGroup's fields after its type (typed by
#: its annotations); ranges.
GROUP_KEYS = tuple(hints_of(NodeGroup))[1:]
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 64
MAX_GPU_TYPES = 64
MAX_LINK_GBPS = 100_000.0
#: A GPU type name in a cluster file or trace: ASCII letters, digits, '.', '_', '-' (checked before
#: lower-casing; the catalogue check is the CLI's).
GPU_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Largest cluster file read (a real one is a few hundred bytes).
MAX_FILE_BYTES = 1_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class _ClusterFile:
    """A cluster file's top level as read: its name (None: the caller's) and a node group per GPU type."""

    name: str | None = None
    gpu_types: tuple[NodeGroup, ...]


def _count(value: Any, where: str, hi: int, power_of_two: bool = False) -> int:
    """A count in 1..``hi`` (a power of two if asked); one line naming ``where`` and the value as the file spells it."""
    if not (fits(value, int) and 1 <= value <= hi and (is_power_of_two(value) or not power_of_two)):
        kind = "a power of two" if power_of_two else "an integer"
        raise ValueError(f"{where}: expected {kind} in 1..{hi}, got {short(value, as_json=True)}")
    return int(value)


def _bandwidth(value: Any, where: str) -> float:
    if not (fits(value, float) and math.isfinite(value) and 0 < value <= MAX_LINK_GBPS):
        raise ValueError(
            f"{where}: expected a number of GB/s in (0, {MAX_LINK_GBPS:g}] (omit it for the "
            f"GPU type's default), got {short(value, as_json=True)}"
        )
    return float(value)


def _label(value: Any, where: str) -> str | None:
    if value is not None and not (isinstance(value, str) and value.strip() and value.isprintable()):
        raise ValueError(f"{where}: name: expected a non-empty one-line string, got {short(value, as_json=True)}")
    return None if value is None else value.strip()


def _group_readers(where: str) -> dict[str, Callable[[Any], Any]]:
    """The readers of a ``gpu_types`` entry's values: type and range in one message naming ``where.<key>``."""
    return {
        "nodes": functools.partial(_count, where=f"{where}.nodes", hi=MAX_NODES),
        "gpus_per_node": functools.partial(
            _count, where=f"{where}.gpus_per_node", hi=MAX_GPUS_PER_NODE, power_of_two=True
        ),
        **{key: functools.partial(_bandwidth, where=f"{where}.{key}") for key in GROUP_KEYS[2:]},
    }


def _node_groups(types: Any, where: str) -> tuple[NodeGroup, ...]:
    if not isinstance(types, dict) or not types:
        raise ValueError(
            f"{where}: expected a non-empty 'gpu_types' table mapping GPU type to {{nodes, gpus_per_node}}"
        )
    if len(types) > MAX_GPU_TYPES:
        raise ValueError(f"{where}: gpu_types: at most {MAX_GPU_TYPES} GPU types, got {len(types)}")
    groups: dict[str, NodeGroup] = {}
    for gpu_type, entry in types.items():
        if not GPU_TYPE_NAME.fullmatch(gpu_type):
            raise ValueError(
                f"{where}: gpu_types: {short(gpu_type, as_json=True)} is not a GPU type name "
                "(ASCII letters, digits, '.', '_', '-')"
            )
        at = f"{where}: gpu_types.{gpu_type}"
        key = gpu_type.lower()
        if key in groups:
            raise ValueError(f"{at}: GPU type {key!r} is listed twice")
        fields = read_fields(NodeGroup, entry, at, _group_readers(at), names=GROUP_KEYS)
        groups[key] = NodeGroup(GpuType(key), **fields)
    return tuple(groups.values())


def cluster_from_dict(data: Any, name: str, source: str | None = None) -> ClusterSpec:
    """Build a cluster from ``{"name"?, "gpu_types": {type: {"nodes", "gpus_per_node", links?}}}``.

    ``name`` is used when the data has none. Every value is checked (:func:`arena_gym.fields.build`:
    an object, no unknown or missing keys; types and ranges); a problem is a one-line ValueError
    starting with ``source`` (default ``name``) and the key path, never a silent repair.
    """
    where = source or name
    readers: dict[str, Callable[[Any], Any]] = {
        "name": functools.partial(_label, where=where),
        "gpu_types": functools.partial(_node_groups, where=where),
    }
    file = build(_ClusterFile, data, where, readers)
    return ClusterSpec(name if file.name is None else file.name, file.gpu_types)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice")
        out[key] = value
    return out


def _parse(path: Path) -> Any:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: cluster file larger than {MAX_FILE_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10: the same parser, as a package (a dependency there)
                import tomli as tomllib

            return tomllib.loads(text)
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise ValueError(f"{path}: cannot parse cluster file: nested too deeply") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: cannot parse cluster file: not UTF-8 text") from None
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        raise ValueError(f"{path}: cannot parse cluster file: {' '.join(str(exc).split())}") from None


def load_cluster(spec: str, allow_shadowing: bool = False) -> ClusterSpec:
    """A preset name (``arena-1280``, ``testbed-64``, ``tiny``) or a JSON/TOML file path.

    A file that shadows a preset is refused unless ``allow_shadowing`` (then the file is read):
    a file named like a preset (``tiny`` in the current directory), or a cluster file whose name
    is a preset's but whose contents are not (its results would pass for the preset's).
    """
    path = Path(spec)
    if spec in PRESETS:
        if not path.exists():
            return PRESETS[spec]
        if not allow_shadowing:
            raise ValueError(
                f"cluster {spec!r} names both a preset and a file here; write ./{spec} for the file, "
                "or pass --allow-shadowing"
            )
    if not path.is_file():
        raise ValueError(f"unknown cluster {spec!r}: not a file; presets are {', '.join(PRESETS)}")
    try:
        data = _parse(path)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read cluster file: {exc.strerror or exc}") from None
    cluster = cluster_from_dict(data, path.stem, str(path))
    preset = PRESETS.get(cluster.name)
    if preset is not None and cluster != preset and not allow_shadowing:
        raise ValueError(
            f"{path}: cluster name {cluster.name!r} is a preset's, but the contents differ from it; "
            'give the file another name (its "name" key or file name), or pass --allow-shadowing'
        )
    return cluster


_VARIANT = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<body>[^\[\]]*)\]$")


def resolve_cluster(cluster: str | ClusterSpec, allow_shadowing: bool = False) -> ClusterSpec:
    """A ClusterSpec as given, or a cluster spec: a preset or file (:func:`load_cluster`), optionally with
    node-count overrides ``[type=nodes,...]`` (``testbed-64[a40=8,a10=24]``).

    The overrides keep the base cluster's GPU types, GPUs per node and links and change how many
    nodes some types have; the variant is named after the spec. The one cluster resolver of every
    command and env.
    """
    if isinstance(cluster, ClusterSpec):
        return cluster
    match = _VARIANT.match(cluster.strip())
    if match is None:
        return load_cluster(cluster, allow_shadowing)
    base = load_cluster(match["base"].strip(), allow_shadowing)
    nodes: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in match["body"].split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in base.gpu_types:
            raise ValueError(
                f"cluster {cluster!r}: {item!r} is not TYPE=NODES with TYPE one of {', '.join(base.gpu_types)}"
            )
        try:
            count = from_text(value.strip(), int)
        except ValueError:
            raise ValueError(f"cluster {cluster!r}: node count {value.strip()!r} of {key} is not an integer") from None
        if not 1 <= count <= MAX_NODES:
            raise ValueError(f"cluster {cluster!r}: node count of {key} must be in 1..{MAX_NODES}, got {count}")
        nodes[key] = count
    groups = tuple(dataclasses.replace(g, nodes=nodes.get(g.gpu_type, g.nodes)) for g in base.groups)
    return ClusterSpec(cluster.strip(), groups)
