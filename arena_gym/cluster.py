"""Cluster presets and loading a user's JSON/TOML cluster file (checked against a schema)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from arena_gym.fields import fits, from_text, hints_of
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

#: The cluster-file schema: allowed keys (a ``gpu_types`` entry's are NodeGroup's fields after its
#: type, typed by its annotations) and ranges.
TOP_KEYS = ("name", "gpu_types")
GROUP_KEYS = tuple(hints_of(NodeGroup))[1:]
MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 64
MAX_GPU_TYPES = 64
MAX_LINK_GBPS = 100_000.0
#: A GPU type name: ASCII letters, digits, '.', '_', '-' (the catalogue check is the CLI's).
GPU_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Largest cluster file read (a real one is a few hundred bytes).
MAX_FILE_BYTES = 1_000_000


def _show(value: Any) -> str:
    """A file's value as the file spells it (``true``, ``NaN``, ``"2"``; a table or list by its kind), cut to 40 characters."""
    text = json.dumps(value) if isinstance(value, (bool, int, float, str)) or value is None else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def _integer(value: Any, where: str, lo: int, hi: int, power_of_two: bool = False) -> int:
    ok = fits(value, int) and lo <= value <= hi
    if not ok or (power_of_two and not is_power_of_two(value)):
        kind = "a power of two" if power_of_two else "an integer"
        raise ValueError(f"{where}: expected {kind} in {lo}..{hi}, got {_show(value)}")
    return value


def _bandwidth(value: Any, where: str) -> float:
    ok = fits(value, float) and math.isfinite(value)
    if not ok or not 0 < value <= MAX_LINK_GBPS:
        raise ValueError(
            f"{where}: expected a number of GB/s in (0, {MAX_LINK_GBPS:g}] (omit it for the "
            f"GPU type's default), got {_show(value)}"
        )
    return float(value)


def _unknown_keys(table: dict[str, Any], valid: tuple[str, ...], where: str) -> None:
    unknown = [str(k) for k in table if k not in valid]
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; valid: {', '.join(valid)}")


def cluster_from_dict(data: Any, name: str, source: str | None = None) -> ClusterSpec:
    """Build a cluster from ``{"name"?, "gpu_types": {type: {"nodes", "gpus_per_node", links?}}}``.

    ``name`` is used when the data has none. Every value is checked (types, ranges, unknown
    keys); a problem is a one-line ValueError starting with ``source`` (default ``name``) and
    the key path, never a silent repair.
    """
    where_file = source or name
    if not isinstance(data, dict):
        raise ValueError(f"{where_file}: a cluster file must hold a table/object, got {_show(data)}")
    _unknown_keys(data, TOP_KEYS, where_file)
    label = data.get("name", None)
    if label is not None and not (isinstance(label, str) and label.strip() and label.isprintable()):
        raise ValueError(f"{where_file}: name: expected a non-empty one-line string, got {_show(label)}")
    types = data.get("gpu_types")
    if not isinstance(types, dict) or not types:
        raise ValueError(
            f"{where_file}: expected a non-empty 'gpu_types' table mapping GPU type to {{nodes, gpus_per_node}}"
        )
    if len(types) > MAX_GPU_TYPES:
        raise ValueError(f"{where_file}: gpu_types: at most {MAX_GPU_TYPES} GPU types, got {len(types)}")
    groups: dict[str, NodeGroup] = {}
    for gpu_type, entry in types.items():
        if not GPU_TYPE_NAME.fullmatch(gpu_type):
            raise ValueError(
                f"{where_file}: gpu_types: {_show(gpu_type)} is not a GPU type name (ASCII letters, digits, '.', '_', '-')"
            )
        where = f"{where_file}: gpu_types.{gpu_type}"
        key = gpu_type.lower()
        if key in groups:
            raise ValueError(f"{where}: GPU type {key!r} is listed twice")
        if not isinstance(entry, dict) or "nodes" not in entry or "gpus_per_node" not in entry:
            raise ValueError(f"{where} needs integer 'nodes' and 'gpus_per_node'")
        _unknown_keys(entry, GROUP_KEYS, where)
        groups[key] = NodeGroup(
            GpuType(key),
            _integer(entry["nodes"], f"{where}.nodes", 1, MAX_NODES),
            _integer(entry["gpus_per_node"], f"{where}.gpus_per_node", 1, MAX_GPUS_PER_NODE, power_of_two=True),
            *(_bandwidth(entry[k], f"{where}.{k}") if k in entry else 0.0 for k in GROUP_KEYS[2:]),
        )
    return ClusterSpec(label.strip() if label is not None else name, tuple(groups.values()))


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
