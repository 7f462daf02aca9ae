"""GridTable: per (model, batch), iteration times over every grid cell and locality, cached."""

from __future__ import annotations

import math

import numpy as np

from arena_gym.placement import best_grid
from arena_gym.protocols import PerfModel
from arena_gym.types import Allocation, Grid, JobSpec, ModelRef, Placement, Plan
from envs.codec import ActionCodec


class GridTable:
    """Iteration times of a PerfModel over the codec's grid, one ``(C, L)`` array per job config.

    Entry ``[c, l]`` is the time on cell ``c`` at its ``l``-th locality (most packed first):
    ``iter_time`` of the shape when stages are folded (the proxy plan), ``grid_iter_time`` of
    the cell's grid otherwise. ``inf`` marks infeasible points and padding. Rows are computed
    once per (model, batch) and kept for the table's lifetime, so build one table per PerfModel.
    """

    def __init__(self, codec: ActionCodec, perf: PerfModel) -> None:
        self.codec = codec
        self.perf = perf
        self.n_localities = max((len(s) for s in codec.shapes), default=1)
        # keys are tuples of str / int (hashing frozen dataclasses on every lookup is slow)
        self._rows: dict[tuple[str, str, int], np.ndarray] = {}
        self._grids: dict[tuple[str, str, int, str, int, int, int | None], tuple[Grid, Plan | None]] = {}
        self._empty = np.full((codec.n_cells, self.n_localities), math.inf)
        self._empty.flags.writeable = False

    @property
    def empty(self) -> np.ndarray:
        """The all-infeasible row (for empty slots)."""
        return self._empty

    def row(self, model: ModelRef, global_batch: int) -> np.ndarray:
        """The read-only ``(C, L)`` time array of a job configuration."""
        key = (model.family, model.size, global_batch)
        row = self._rows.get(key)
        if row is None:
            row = self._compute(model, global_batch)
            self._rows[key] = row
        return row

    def best_time(self, model: ModelRef, global_batch: int) -> float:
        """Fastest iteration time anywhere on the grid (``inf`` if the job fits nowhere)."""
        return float(self.row(model, global_batch).min())

    def allocation(self, spec: JobSpec, placement: Placement, stages: int | None) -> Allocation:
        """The allocation of ``spec`` on ``placement``: the proxy plan's grid (``stages`` None) or ``stages``.

        With ``stages`` None this equals :func:`arena_gym.placement.allocation` (grid and plan
        cached per model, batch and shape); the plan is kept only if its stage count matches.
        """
        model = spec.model
        key = (
            model.family,
            model.size,
            spec.global_batch,
            placement.gpu_type,
            len(placement.nodes),
            placement.gpus_per_node,
            stages,
        )
        hit = self._grids.get(key)
        if hit is None:
            shape = placement.shape
            plan = self.perf.proxy_plan(spec.model, spec.global_batch, shape)
            grid = best_grid(self.perf, spec, shape) if stages is None else Grid(shape, stages)
            hit = (grid, plan if plan is not None and plan.n_stages == grid.n_stages else None)
            self._grids[key] = hit
        return Allocation(hit[0], placement, hit[1])

    def _compute(self, model: ModelRef, batch: int) -> np.ndarray:
        row = np.full((self.codec.n_cells, self.n_localities), math.inf)
        fold = self.codec.config.fold_stages
        for c, (cell, shapes) in enumerate(zip(self.codec.cells, self.codec.shapes)):
            stages = cell[2]
            for loc, shape in enumerate(shapes):
                if fold or stages is None:
                    t = self.perf.iter_time(model, batch, shape)
                else:
                    t = self.perf.grid_iter_time(model, batch, Grid(shape, stages))
                row[c, loc] = t if t > 0 and math.isfinite(t) else math.inf
        row.flags.writeable = False
        return row
