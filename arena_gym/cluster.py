"""Cluster presets and loading a user's JSON/TOML cluster file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from arena_gym.types import ClusterSpec, GpuType, NodeGroup, is_power_of_two


def _groups(spec: dict[str, tuple[int, int]]) -> tuple[NodeGroup, ...]:
    return tuple(NodeGroup(GpuType(t), nodes, per_node) for t, (nodes, per_node) in spec.items())


#: Built-in clusters. ``arena-1280`` is the artifact's simulated cluster (reference/arena.md §8.1);
#: ``testbed-64`` its real A40 + A10 testbed (32 two-GPU nodes, split evenly: the exact split is
#: unknown); ``tiny`` is an 8-GPU, 2-type cluster for quick experiments and tests.
PRESETS: dict[str, ClusterSpec] = {
    "arena-1280": ClusterSpec("arena-1280", _groups({"a100": (80, 4), "v100": (20, 16), "a40": (160, 2), "a10": (160, 2)})),
    "testbed-64": ClusterSpec("testbed-64", _groups({"a40": (16, 2), "a10": (16, 2)})),
    "tiny": ClusterSpec("tiny", _groups({"a40": (2, 2), "a10": (2, 2)})),
}


def cluster_from_dict(data: dict[str, Any], name: str) -> ClusterSpec:
    """Build a cluster from ``{"name"?, "gpu_types": {type: {"nodes", "gpus_per_node", ...}}}``."""
    types = data.get("gpu_types")
    if not isinstance(types, dict) or not types:
        raise ValueError(f"{name}: expected a non-empty 'gpu_types' table mapping GPU type to {{nodes, gpus_per_node}}")
    groups = []
    for gpu_type, entry in types.items():
        if not isinstance(entry, dict) or "nodes" not in entry or "gpus_per_node" not in entry:
            raise ValueError(f"{name}: gpu_types.{gpu_type} needs integer 'nodes' and 'gpus_per_node'")
        nodes, per_node = entry["nodes"], entry["gpus_per_node"]
        if not (isinstance(nodes, int) and isinstance(per_node, int)) or nodes < 1 or not is_power_of_two(per_node):
            raise ValueError(f"{name}: gpu_types.{gpu_type}: nodes must be >= 1 and gpus_per_node a power of two")
        groups.append(
            NodeGroup(
                GpuType(str(gpu_type).lower()),
                nodes,
                per_node,
                float(entry.get("intra_node_gbps", 0.0)),
                float(entry.get("inter_node_gbps", 0.0)),
            )
        )
    return ClusterSpec(str(data.get("name", name)), tuple(groups))


def load_cluster(spec: str) -> ClusterSpec:
    """A preset name (``arena-1280``, ``testbed-64``, ``tiny``) or a JSON/TOML file path."""
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.is_file():
        raise ValueError(f"unknown cluster {spec!r}: not a file; presets are {', '.join(PRESETS)}")
    text = path.read_text()
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (ValueError, ImportError) as exc:
        raise ValueError(f"{path}: cannot parse cluster file: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a cluster file must hold a table/object")
    return cluster_from_dict(data, path.stem)
