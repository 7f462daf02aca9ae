"""The links a job sees on a GPU type; the catalogue itself is :mod:`arena_gym.hardware`, re-exported here.

Every GPU figure is a vendor datasheet number; see :mod:`arena_gym.hardware` for the entries, their
sources and :func:`~arena_gym.hardware.register_gpu`, which adds a type.
"""

from __future__ import annotations

from dataclasses import dataclass

from arena_gym.hardware import (
    ALIASES,
    DUAL_ISSUE_FP32_FACTOR,
    GPUS,
    LINKS,
    NETWORKS,
    GpuSpec,
    LinkSpec,
    canonical_gpu_name,
    get_gpu,
    known_gpus,
    register_gpu,
)
from arena_gym.types import NodeGroup

__all__ = [
    "ALIASES",
    "DUAL_ISSUE_FP32_FACTOR",
    "GPUS",
    "LINKS",
    "NETWORKS",
    "GpuSpec",
    "LinkSpec",
    "NodeLinks",
    "canonical_gpu_name",
    "get_gpu",
    "known_gpus",
    "node_links",
    "register_gpu",
]


@dataclass(frozen=True, slots=True)
class NodeLinks:
    """The links a job on one GPU type sees: intra-node per GPU and inter-node per node (GB/s)."""

    intra_gbs: float
    intra_latency_us: float
    inter_gbs: float
    inter_latency_us: float


def node_links(gpu: GpuSpec, group: NodeGroup | None = None) -> NodeLinks:
    """Links of ``gpu`` from its preset, overridden by a cluster group's non-zero bandwidths."""
    intra, inter = LINKS[gpu.intra_link], NETWORKS[gpu.network]
    intra_gbs = group.intra_node_gbps if group is not None and group.intra_node_gbps > 0 else intra.gbs
    inter_gbs = group.inter_node_gbps if group is not None and group.inter_node_gbps > 0 else inter.gbs
    return NodeLinks(intra_gbs, intra.latency_us, inter_gbs, inter.latency_us)
