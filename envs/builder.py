"""DecisionBuilder: turns a sequence of sub-actions into one Decision at a decision point."""

from __future__ import annotations

import numpy as np

from arena_gym.placement import place_shape
from arena_gym.types import Allocation, Decision, JobId, JobView, Placement, Snapshot
from envs.capacity import CapacityIndex
from envs.codec import PREEMPT, ActionCodec
from envs.config import EnvConfig
from envs.table import GridTable


class DecisionBuilder:
    """Scratch state of one decision point: which sub-actions are valid, and what they add up to.

    ``slots`` holds the JobViews in slot order, pending first (up to K, first come first served
    or, with ``pending_order="las"``, least attained service first) then running (up to R,
    snapshot order); ``None`` marks an empty slot. A sub-action on a pending slot starts
    the job on the cell; on a running slot it re-places the job (resize, type change, or a new
    stage count; the job's own GPUs are given back first) or preempts it. Placement takes the
    most packed locality of the cell that fits the scratch free GPUs and on which the belief
    model has a finite time (the :func:`arena_gym.placement.place_shape` best-fit node choice).
    Each job can be touched once per decision point; a running job's current cell is masked
    (re-placing it on the same cell would be a pointless migration). Masked actions: empty or
    touched slot, not enough free GPUs for any locality, out of memory / no plan on every
    locality that fits, preempting a pending job, and the running job's current cell.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        codec: ActionCodec,
        config: EnvConfig,
        table: GridTable | None = None,
        capacity: CapacityIndex | None = None,
    ) -> None:
        if table is not None and table.perf is not snapshot.perf:
            raise ValueError("DecisionBuilder: the GridTable was built for another PerfModel than the snapshot's")
        self.snapshot = snapshot
        self.codec = codec
        self.config = config
        self.table = table if table is not None else GridTable(codec, snapshot.perf)
        self.capacity = capacity if capacity is not None else CapacityIndex(codec)
        k, r = config.max_pending, config.max_running
        pending = snapshot.pending
        if config.pending_order == "las":  # least attained service first; stable, so FIFO among equals
            pending = tuple(sorted(pending, key=lambda v: v.attained_gpu_s))
        pending, running = pending[:k], snapshot.running[:r]
        self.slots: tuple[JobView | None, ...] = (
            tuple(pending) + (None,) * (k - len(pending)) + tuple(running) + (None,) * (r - len(running))
        )
        row, empty = self.table.row, self.table.empty
        self.times = np.stack(
            [row(v.spec.model, v.spec.global_batch) if v is not None else empty for v in self.slots]
        )  # (S, C, L) belief seconds per iteration
        self._feasible = np.ascontiguousarray(np.isfinite(self.times).transpose(2, 1, 0))  # (L, C, S)
        self.free = self.capacity.free_vector(snapshot.free)
        self._free_of = {
            t: self.free[off : off + g.nodes]
            for (t, off), g in zip(self.capacity.offsets.items(), codec.cluster.groups)
        }
        placements: list[Placement | None] = [
            v.allocation.placement if v is not None and v.allocation is not None else None for v in self.slots
        ]
        self._own = self.capacity.own_nodes(placements)
        self.holds = np.array([p is not None for p in placements], dtype=bool)
        self._any_holds = bool(self.holds.any())
        self.present = np.array([v is not None for v in self.slots], dtype=bool)
        self.open = self.present.copy()
        cur = np.array([self._current_cell(v) for v in self.slots], dtype=np.int64)
        self._current = cur
        self._current_rows = np.flatnonzero(cur >= 0)
        self._current_cols = cur[self._current_rows]
        self.substeps = 0
        self._allocations: list[tuple[JobId, Allocation]] = []
        self._preemptions: list[JobId] = []
        self._mask: np.ndarray | None = None
        self._good = np.zeros((0, 0, 0), dtype=bool)  # (L, C, S): locality fits and is feasible

    # ------------------------------------------------------------------ queries
    def mask(self) -> np.ndarray:
        """Boolean mask over all actions (a fresh copy); "done" is always valid."""
        return self._valid().copy()

    def has_choice(self) -> bool:
        """Whether any action other than "done" is valid."""
        return bool(self._valid()[:-1].any())

    @property
    def touched(self) -> np.ndarray:
        """Per slot: a job that already got a sub-action at this decision point."""
        return self.present & ~self.open

    def running_after(self) -> int:
        """Jobs that would hold GPUs if the decision so far were applied (starts in, preemptions out)."""
        started = int(self.touched[: self.config.max_pending].sum())
        return len(self.snapshot.running) - len(self._preemptions) + started

    def current_cells(self) -> np.ndarray:
        """Per slot: the column of the grid cell its job holds at the snapshot (-1 if none); do not modify."""
        return self._current

    def free_of(self, gpu_type: str) -> np.ndarray:
        """Scratch free GPUs per node of a type (after the sub-actions so far); do not modify."""
        return self._free_of[gpu_type]

    def preview(self, action: int) -> Allocation | str | None:
        """What a valid action would do (an Allocation, or PREEMPT); None if invalid or "done"."""
        if action == self.codec.done_action or not 0 <= action < self.codec.n_actions or not self._valid()[action]:
            return None
        slot, col = divmod(action, self.codec.width)
        view = self.slots[slot]
        assert view is not None
        if col == self.codec.n_cells:
            return PREEMPT
        shape = self.codec.shapes[col][int(self._good[:, col, slot].argmax())]  # most packed fitting feasible locality
        free = self._free_of[shape.gpu_type].copy()
        own = view.allocation
        if own is not None and own.placement.gpu_type == shape.gpu_type:
            for node in own.placement.nodes:
                free[node] += own.placement.gpus_per_node
        placement = place_shape(free, shape)
        assert placement is not None, "mask and placement disagree"
        return self.table.allocation(view.spec, placement, self.codec.cells[col][2])

    # ------------------------------------------------------------------ updates
    def apply(self, action: int) -> bool:
        """Apply one sub-action; False (and no change) if it is invalid. "done" is a valid no-op here."""
        if action == self.codec.done_action:
            return True
        self.substeps += 1
        result = self.preview(action)
        if result is None:
            return False
        slot = action // self.codec.width
        view = self.slots[slot]
        assert view is not None
        if view.allocation is not None:
            self._give_back(view.allocation.placement, +1)
        if result == PREEMPT:
            self._preemptions.append(view.job_id)
        else:
            assert isinstance(result, Allocation)
            self._give_back(result.placement, -1)
            self._allocations.append((view.job_id, result))
        self.open[slot] = False
        self._mask = None
        return True

    def decision(self) -> Decision:
        """The Decision the sub-actions so far add up to (allocations in the order applied)."""
        return Decision(allocations=tuple(self._allocations), preemptions=tuple(self._preemptions))

    # ------------------------------------------------------------------ internals
    def _valid(self) -> np.ndarray:
        if self._mask is None:
            cap = self.capacity
            counts = cap.counts(self.free)[:, None]  # (J, 1): the same for every slot ...
            if self._any_holds:
                counts = counts + cap.add_back(self.free, self._own)  # ... but those giving GPUs back
            good = cap.fits(counts) & self._feasible  # (L, C, S)
            ok = good.any(0).T
            ok &= self.open[:, None]
            ok[self._current_rows, self._current_cols] = False
            self._good = good
            mask = np.empty(self.codec.n_actions, dtype=bool)
            body = mask[:-1].reshape(self.codec.n_slots, self.codec.width)
            body[:, :-1] = ok
            np.logical_and(self.open, self.holds, out=body[:, -1])
            mask[-1] = True
            self._mask = mask
        return self._mask

    def _current_cell(self, view: JobView | None) -> int:
        """Column of the cell a running job occupies (-1 if none, or a shape outside the grid)."""
        if view is None or view.allocation is None:
            return -1
        cell = self.codec.cell_of(view.allocation)
        return self.codec.cell_index(cell) if cell in self.codec.cells else -1

    def _give_back(self, placement: Placement, sign: int) -> None:
        free = self._free_of[placement.gpu_type]
        for node in placement.nodes:
            free[node] += sign * placement.gpus_per_node
