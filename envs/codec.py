"""ActionCodec: the flat Discrete action space over (job slot, grid cell) pairs plus "done".

Layout: slot ``s`` (``0 .. K-1`` pending, ``K .. K+R-1`` running) owns the ``C + 1`` actions
``s * (C + 1) + c``; ``c < C`` picks grid cell ``cells[c]``, ``c == C`` is "preempt" (only ever
valid for a running slot). The last action, ``n_actions - 1``, is "done".
"""

from __future__ import annotations

from arena_gym.types import GPU_COUNTS, Allocation, ClusterSpec, ResourceShape, localities
from envs.config import EnvConfig

#: The pseudo-cell of a running slot that preempts the job back to the queue.
PREEMPT = "preempt"

Cell = tuple[str, int, int | None]  # (gpu type, GPU count, pipeline stages or None = proxy plan's)


def grid_cells(cluster: ClusterSpec, fold_stages: bool) -> tuple[Cell, ...]:
    """Cells per GPU type (cluster order) x count (powers of two that fit the type) [x stages]."""
    cells: list[Cell] = []
    for group in cluster.groups:
        for n in GPU_COUNTS:
            if n > group.total_gpus:
                continue
            if fold_stages:
                cells.append((group.gpu_type, n, None))
                continue
            stages = 1
            while stages <= n:
                cells.append((group.gpu_type, n, stages))
                stages *= 2
    return tuple(cells)


def cell_localities(cluster: ClusterSpec, cell: Cell) -> tuple[ResourceShape, ...]:
    """The uniform localities of a cell that the type's node count allows, most packed first."""
    group = cluster.group(cell[0])
    return tuple(s for s in localities(cell[0], cell[1], group.gpus_per_node) if s.n_nodes <= group.nodes)


class ActionCodec:
    """Maps between flat action indices and (slot, cell) pairs for one cluster and config.

    ``cells[c]`` is a (gpu type, count, stages or None) tuple and ``shapes[c]`` its
    localities; ``n_cells`` (C), ``width`` (C + 1), ``n_slots`` (K + R), ``n_actions`` and
    ``done_action`` (the last index) are plain integers.
    """

    def __init__(self, cluster: ClusterSpec, config: EnvConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.cells: tuple[Cell, ...] = grid_cells(cluster, config.fold_stages)
        self.shapes: tuple[tuple[ResourceShape, ...], ...] = tuple(cell_localities(cluster, c) for c in self.cells)
        self._index = {c: i for i, c in enumerate(self.cells)}
        self.n_cells = len(self.cells)  # C: grid cells per slot (without the preempt pseudo-cell)
        self.width = self.n_cells + 1  # actions per slot: the C cells plus preempt
        self.n_slots = config.n_slots  # K pending + R running slots
        self.n_actions = self.n_slots * self.width + 1  # size of the Discrete action space
        self.done_action = self.n_actions - 1  # apply the decision and advance time (the last index)

    def is_pending_slot(self, slot: int) -> bool:
        """True for the K queue slots, False for the R running slots."""
        return slot < self.config.max_pending

    def cell_index(self, cell: Cell | str) -> int:
        """Column of a cell (or PREEMPT) inside a slot's block; ValueError if not in the grid."""
        if cell == PREEMPT:
            return self.n_cells
        try:
            return self._index[cell]  # type: ignore[index]
        except KeyError:
            raise ValueError(f"cell {cell!r} is not in the grid of cluster {self.cluster.name!r}") from None

    def cell_of(self, allocation: Allocation) -> Cell:
        """The cell an allocation occupies (stages dropped when stages are folded)."""
        shape = allocation.shape
        stages = None if self.config.fold_stages else allocation.grid.n_stages
        return (shape.gpu_type, shape.num_gpus, stages)

    def encode(self, slot: int, cell: Cell | str) -> int:
        """Flat action of (slot, cell); ``cell`` is a member of ``cells`` or PREEMPT."""
        if not 0 <= slot < self.n_slots:
            raise ValueError(f"slot {slot} out of range 0..{self.n_slots - 1}")
        return slot * self.width + self.cell_index(cell)

    def decode(self, action: int) -> tuple[int, Cell | str] | None:
        """(slot, cell or PREEMPT) of an action; None for "done"; ValueError if out of range."""
        if not 0 <= action < self.n_actions:
            raise ValueError(f"action {action} out of range 0..{self.n_actions - 1}")
        if action == self.done_action:
            return None
        slot, col = divmod(action, self.width)
        return slot, (PREEMPT if col == self.n_cells else self.cells[col])
