"""Cluster variants of the envs: an env may draw a different cluster per episode (``testbed-64[a40=8,a10=24]``,
see :func:`arena_gym.cluster.resolve_cluster`) while its spaces stay the same (same GPU types and grid
cells, checked by :func:`check_same_grid`).
"""

from __future__ import annotations

from arena_gym.types import ClusterSpec


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
