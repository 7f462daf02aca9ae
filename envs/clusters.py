"""Cluster specs of the envs: presets, files, and presets with other node counts (``testbed-64[a40=8,a10=24]``).

The suffix ``[type=nodes,...]`` keeps the base cluster's GPU types, GPUs per node and links and
changes how many nodes some types have; the variant is named after the spec. Variants let an
env draw a different cluster per episode while its spaces stay the same (same GPU types and
grid cells, checked by :func:`check_same_grid`).
"""

from __future__ import annotations

import dataclasses
import re

from arena_gym.cluster import load_cluster
from arena_gym.types import ClusterSpec

_VARIANT = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<body>[^\[\]]*)\]$")


def resolve_cluster(cluster: str | ClusterSpec) -> ClusterSpec:
    """A ClusterSpec as given, or loaded from a preset name / file, with optional node-count overrides."""
    if isinstance(cluster, ClusterSpec):
        return cluster
    match = _VARIANT.match(cluster.strip())
    if match is None:
        return load_cluster(cluster)
    base = load_cluster(match["base"].strip())
    nodes: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in match["body"].split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in base.gpu_types:
            raise ValueError(
                f"cluster {cluster!r}: {item!r} is not TYPE=NODES with TYPE one of {', '.join(base.gpu_types)}"
            )
        try:
            count = int(value)
        except ValueError:
            raise ValueError(f"cluster {cluster!r}: node count {value.strip()!r} of {key} is not an integer") from None
        if not 1 <= count <= 100_000:
            raise ValueError(f"cluster {cluster!r}: node count of {key} must be in 1..100000, got {count}")
        nodes[key] = count
    groups = tuple(dataclasses.replace(g, nodes=nodes.get(g.gpu_type, g.nodes)) for g in base.groups)
    return ClusterSpec(cluster.strip(), groups)


def check_same_grid(clusters: list[ClusterSpec], cells_of: dict[str, tuple]) -> None:
    """ValueError unless every cluster has the same GPU types (in order) and grid cells as the first."""
    first = clusters[0]
    for other in clusters[1:]:
        if other.gpu_types != first.gpu_types or cells_of[other.name] != cells_of[first.name]:
            raise ValueError(
                f"cluster variant {other.name!r} has other GPU types or grid cells than {first.name!r}; "
                "variants must keep the observation and action spaces (same types, >= 16 GPUs each "
                "where the base has them)"
            )
