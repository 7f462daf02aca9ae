"""Vectorised placement feasibility of every grid cell and locality on a free-GPU state.

The cluster's free GPUs are kept as one integer vector over all nodes (types concatenated in
cluster order, plus a trailing dummy node that is always 0). A locality of ``q`` nodes x ``p``
GPUs per node fits iff at least ``q`` nodes of its type have ``>= p`` free GPUs, which is
exactly when :func:`arena_gym.placement.place_shape` finds nodes; so the counts of nodes with
``>= p`` free, per (type, p), decide every (cell, locality) at once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from arena_gym.types import ClusterSpec, Placement
from envs.codec import ActionCodec

#: "Needs more nodes than any cluster has": the padding value of unused localities.
_NEVER = np.iinfo(np.int64).max


class OwnNodes(NamedTuple):
    """Nodes held per slot: indices ``(M, S)``, GPUs per node ``(M, 1, S)``, column membership ``(M, J, S)``.

    The node axis comes first so that the reduction over it is a fast contiguous sum.
    """

    idx: np.ndarray
    add: np.ndarray
    member: np.ndarray


class CapacityIndex:
    """Static index arrays of one codec; the methods evaluate them on a free-GPU vector."""

    def __init__(self, codec: ActionCodec) -> None:
        cluster: ClusterSpec = codec.cluster
        self.offsets: dict[str, int] = {}
        columns: list[tuple[int, int]] = []  # (type index, GPUs per node p)
        col_of: dict[tuple[str, int], int] = {}
        node = 0
        for t, group in enumerate(cluster.groups):
            self.offsets[group.gpu_type] = node
            node += group.nodes
            p = 1
            while p <= group.gpus_per_node:
                col_of[(group.gpu_type, p)] = len(columns)
                columns.append((t, p))
                p *= 2
        self.n_nodes = node
        node_type = np.concatenate([np.full(g.nodes, t) for t, g in enumerate(cluster.groups)] + [np.array([-1])])
        col_type = np.array([t for t, _ in columns])
        self.p_row = np.array([p for _, p in columns], dtype=np.int64)
        self.p_col = self.p_row[:, None]
        self.member = node_type[:, None] == col_type[None, :]  # (nodes + 1, J); the dummy row is all False
        n_loc = max((len(s) for s in codec.shapes), default=1)
        self.need = np.full((n_loc, codec.n_cells, 1), _NEVER, dtype=np.int64)  # (L, C, 1)
        self.column = np.zeros((n_loc, codec.n_cells), dtype=np.int64)  # (L, C)
        for c, shapes in enumerate(codec.shapes):
            for loc, shape in enumerate(shapes):
                self.need[loc, c, 0] = shape.n_nodes
                self.column[loc, c] = col_of[(shape.gpu_type, shape.gpus_per_node)]

    def free_vector(self, free: dict[str, np.ndarray] | object) -> np.ndarray:
        """A writable copy of a snapshot's free arrays as one vector (dummy node appended)."""
        parts = [np.asarray(free[t], dtype=np.int64) for t in self.offsets]  # type: ignore[index]
        return np.concatenate(parts + [np.zeros(1, dtype=np.int64)])

    def counts(self, free: np.ndarray) -> np.ndarray:
        """Per (type, p) column: how many nodes have at least p free GPUs. Shape ``(J,)``."""
        return ((free[:, None] >= self.p_row) & self.member).sum(0)

    def own_nodes(self, placements: list[Placement | None]) -> OwnNodes:
        """The nodes each slot holds, as dummy-padded arrays for :meth:`add_back`."""
        width = max((len(p.nodes) for p in placements if p is not None), default=1)
        idx = np.full((width, len(placements)), self.n_nodes, dtype=np.int64)
        add = np.zeros((width, len(placements)), dtype=np.int64)
        for s, p in enumerate(placements):
            if p is not None:
                off = self.offsets[p.gpu_type]
                idx[: len(p.nodes), s] = [off + n for n in p.nodes]
                add[: len(p.nodes), s] = p.gpus_per_node
        return OwnNodes(idx, add[:, None, :], self.member[idx].transpose(0, 2, 1))

    def add_back(self, free: np.ndarray, own: OwnNodes) -> np.ndarray:
        """Change of :meth:`counts` ``(J, S)`` if each slot gave back its own GPUs first."""
        before = free[own.idx][:, None, :]
        p = self.p_col
        crossed = (before + own.add >= p) & (before < p) & own.member
        return crossed.sum(0)

    def fits(self, counts: np.ndarray) -> np.ndarray:
        """Which (locality, cell, slot) fit, for per-slot counts ``(J, S)``: ``(L, C, S)`` bool."""
        return counts[self.column] >= self.need
