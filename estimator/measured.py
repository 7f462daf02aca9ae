"""A table-backed PerfModel over measured iteration times (the artifact's CSV format).

Format (header row, one row per measured point)::

    family,size,global_batch,gpu_type,num_nodes,gpus_per_node,num_gpus,iter_time_s,oom

``oom`` = 1 marks an infeasible point (``iter_time_s`` empty). Lookup fallbacks follow the
artifact's database querier:

* a locality that was not measured takes the best measured locality of the same GPU count
  and type, slowed by 1/0.9 per halving of GPUs per node (``LOCALITY_SCALE_FACTOR``);
* a time above ``max_iter_time_s`` (300 s, one scheduling round) counts as infeasible;
* a (model, batch, type, count) never measured is infeasible (``math.inf``).

The data-parallel view applies the artifact's DP memory rule when a DP memory table
(``family,size,global_batch,num_gpus,mem_per_gpu_gb,oom``) is given:
``need * 1.2 > 0.8 * GPU memory`` means infeasible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from arena_gym.hardware import get_gpu
from arena_gym.types import Grid, ModelRef, Plan, ResourceShape, is_power_of_two
from estimator.dpmemory import dp_rule_fits

LOCALITY_SCALE_FACTOR = 0.9
MEASURED_COLUMNS = ("family", "size", "global_batch", "gpu_type", "num_nodes", "gpus_per_node", "iter_time_s", "oom")
DP_MEMORY_COLUMNS = ("family", "size", "global_batch", "num_gpus", "mem_per_gpu_gb", "oom")

#: The GPU types of the artifact's simulated cluster (docs/arena.md §12), by their trace names.
ARTIFACT_GPU_TYPES = ("a100", "v100", "a40", "a10")
#: Their memory from the hardware catalogue, for the DP memory rule.
ARTIFACT_GPU_MEMORY_GB: Mapping[str, float] = {t: get_gpu(t).memory_gb for t in ARTIFACT_GPU_TYPES}

ConfigKey = tuple[str, str, int]  # family, size, global batch
PointKey = tuple[str, str, int, str, int, int]  # + gpu type, nodes, gpus per node


def _require_columns(frame: pd.DataFrame, columns: tuple[str, ...], path: Path) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(columns)}")


def _family(name: str) -> str:
    return ModelRef.parse(f"{name}__x").family


@dataclass(frozen=True)
class MeasuredTable:
    """Measured best-plan iteration times keyed by (family, size, batch, type, nodes, gpus/node)."""

    times: Mapping[PointKey, float]  # math.inf where measured OOM
    source: str = ""

    @staticmethod
    def load(path: str | Path) -> MeasuredTable:
        """Read a measured-iteration-time CSV; one-line ValueError naming file, row and problem."""
        path = Path(path)
        frame = pd.read_csv(path)
        _require_columns(frame, MEASURED_COLUMNS, path)
        times: dict[PointKey, float] = {}
        for i, row in enumerate(frame.itertuples(index=False), start=2):
            where = f"{path}:{i}"
            try:
                nodes, per_node, batch = int(row.num_nodes), int(row.gpus_per_node), int(row.global_batch)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: num_nodes, gpus_per_node and global_batch must be integers") from None
            if not (is_power_of_two(nodes) and is_power_of_two(per_node)) or batch < 1:
                raise ValueError(f"{where}: nodes {nodes} x gpus_per_node {per_node} must be powers of two, batch >= 1")
            oom = int(row.oom) == 1
            value = float(row.iter_time_s) if not oom else math.inf
            if not oom and not (value > 0):
                raise ValueError(
                    f"{where}: iter_time_s must be a positive number when oom is 0, got {row.iter_time_s!r}"
                )
            times[(_family(str(row.family)), str(row.size), batch, str(row.gpu_type).lower(), nodes, per_node)] = value
        return MeasuredTable(times, str(path))

    def configs(self) -> list[ConfigKey]:
        """Distinct (family, size, batch) configurations, sorted."""
        return sorted({k[:3] for k in self.times})


@dataclass(frozen=True)
class DpMemoryTable:
    """Per-GPU memory need (GB) of one data-parallel replica, keyed by (family, size, batch, gpus)."""

    need_gb: Mapping[tuple[str, str, int, int], float]  # math.inf where the artifact says OOM

    @staticmethod
    def load(path: str | Path) -> DpMemoryTable:
        """Read a DP-memory CSV (``dp_memory_gb.csv`` format)."""
        path = Path(path)
        frame = pd.read_csv(path)
        _require_columns(frame, DP_MEMORY_COLUMNS, path)
        need: dict[tuple[str, str, int, int], float] = {}
        for i, row in enumerate(frame.itertuples(index=False), start=2):
            oom = int(row.oom) == 1
            value = math.inf if oom else float(row.mem_per_gpu_gb)
            if not oom and not (value > 0):
                raise ValueError(f"{path}:{i}: mem_per_gpu_gb must be positive when oom is 0")
            need[(_family(str(row.family)), str(row.size), int(row.global_batch), int(row.num_gpus))] = value
        return DpMemoryTable(need)

    def feasible(self, model: ModelRef, global_batch: int, num_gpus: int, gpu_memory_gb: float) -> bool:
        """The artifact's rule: infeasible when ``need * 1.2 > 0.8 * memory`` (unknown rows are feasible)."""
        need = self.need_gb.get((model.family, model.size, global_batch, num_gpus))
        return need is None or bool(dp_rule_fits(need, gpu_memory_gb))


@dataclass(frozen=True)
class MeasuredPerfModel:
    """PerfModel answering from a :class:`MeasuredTable` with the artifact's fallbacks.

    Measurements record only the AP-optimal plan, so every stage count of a grid gets the
    same time and ``proxy_plan`` is None.
    """

    table: MeasuredTable
    dp_memory: DpMemoryTable | None = None
    gpu_memory_gb: Mapping[str, float] = field(default_factory=dict)
    max_iter_time_s: float = 300.0
    name: str = "measured"

    def iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """Measured time at ``shape``, else the best measured locality slowed 1/0.9 per halving."""
        base = (model.family, model.size, global_batch, shape.gpu_type)
        exact = self.table.times.get(base + (shape.n_nodes, shape.gpus_per_node))
        if exact is None:
            exact = self._relaxed(base, shape)
        return exact if exact <= self.max_iter_time_s else math.inf

    def _relaxed(self, base: tuple[str, str, int, str], shape: ResourceShape) -> float:
        n = shape.num_gpus
        per_node = n
        while per_node > shape.gpus_per_node:
            t = self.table.times.get(base + (n // per_node, per_node))
            if t is not None:
                halvings = int(round(math.log2(per_node / shape.gpus_per_node)))
                return t / LOCALITY_SCALE_FACTOR**halvings
            per_node //= 2
        return math.inf

    def grid_iter_time(self, model: ModelRef, global_batch: int, grid: Grid) -> float:
        """Stage-agnostic: the measured best time of the grid's shape."""
        return self.iter_time(model, global_batch, grid.shape)

    def dp_iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """The measured time, masked by the DP memory rule when a DP table and GPU memory are known."""
        memory = self.gpu_memory_gb.get(shape.gpu_type)
        if self.dp_memory is not None and memory is not None:
            if not self.dp_memory.feasible(model, global_batch, shape.num_gpus, memory):
                return math.inf
        return self.iter_time(model, global_batch, shape)

    def proxy_plan(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> Plan | None:
        """Measurements carry no plan."""
        return None


def measured_perf_model(path: str, dp_memory: str | None = None) -> MeasuredPerfModel:
    """A MeasuredPerfModel from ``ITER.csv`` or ``ITER.csv,DP_MEMORY.csv`` (the ``measured:`` spec).

    With a DP-memory table the data-parallel view applies the artifact's memory rule with the
    artifact's GPU memory sizes.
    """
    if dp_memory is None and "," in path:
        path, dp_memory = (p.strip() for p in path.split(",", 1))
    return MeasuredPerfModel(
        MeasuredTable.load(path),
        DpMemoryTable.load(dp_memory) if dp_memory else None,
        ARTIFACT_GPU_MEMORY_GB,
    )
