"""The estimator as a :class:`~arena_gym.protocols.PerfModel`: calibrated, planned, tabulated.

The first query of a (model, batch, GPU type) plans every shape of that type in the cluster
(counts 1..16, every locality up to the node size) for every stage count in one vectorised pass
(tens of milliseconds); every later query is a dictionary lookup. Shapes outside the cluster
(larger counts, wider nodes) are planned on first use and memoised the same way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from arena_gym.fields import check
from arena_gym.restarts import RestartCost
from arena_gym.types import GPU_COUNTS, ClusterSpec, Grid, ModelRef, NodeGroup, Plan, ResourceShape
from estimator.costmodel import PlanEstimate, estimate_plan, rates_for
from estimator.hardware import GpuSpec, canonical_gpu_name, get_gpu, node_links
from estimator.params import EstimatorParams, default_params
from estimator.planner import PlannerConfig, dp_estimate, grid_candidates, pareto_front
from estimator.restart_costs import RestartTable, read_restart_table
from estimator.table import TableRequest, TypeTable, build_tables, shapes_for
from estimator.zoo import ModelArch, get_model

log = logging.getLogger(__name__)

#: Largest global batch the estimator answers for (the trace loaders accept the same range).
MAX_GLOBAL_BATCH = 2**24


def check_batch(global_batch: object) -> int:
    """``global_batch`` as an int in ``1..MAX_GLOBAL_BATCH``; TypeError/ValueError naming it otherwise."""
    batch: int = global_batch if type(global_batch) is int else check(global_batch, int, "global_batch")
    if not 1 <= batch <= MAX_GLOBAL_BATCH:
        raise ValueError(f"global_batch must be in 1..{MAX_GLOBAL_BATCH}, got {batch}")
    return batch


def check_arg(value: object, kind: type, name: str) -> None:
    """TypeError naming the argument when ``value`` is not a ``kind``."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, got {value!r:.60}")


@dataclass(frozen=True)
class GridPlans:
    """A grid's best plan and a small Pareto set on (iteration time, memory per GPU)."""

    grid: Grid
    best: PlanEstimate | None
    pareto: tuple[PlanEstimate, ...]


class EstimatorPerfModel:
    """AP-tailored performance estimator (``PerfModel``): proxy plans from the pruned planner.

    Arguments: ``cluster`` (node sizes and links per GPU type; types not in it use catalogue
    presets), ``params`` (efficiencies; the committed calibration by default), ``config``
    (planner knobs), ``models`` (extra user models by name), ``cache_dir`` (optional disk
    cache of the tables), ``restarts`` (measured (re)start costs, which the simulator then charges:
    :meth:`restart_cost`). Unknown models or GPU types raise ValueError listing valid names.
    """

    name = "estimator"

    def __init__(
        self,
        cluster: ClusterSpec | None = None,
        params: EstimatorParams | None = None,
        config: PlannerConfig | None = None,
        models: Mapping[str, ModelArch] | None = None,
        cache_dir: str | Path | None = None,
        restarts: RestartTable | None = None,
    ) -> None:
        self.cluster = cluster
        self.restarts = restarts
        self.params = params or default_params()
        self.config = config or PlannerConfig()
        self.models = dict(models or {})
        self.cache_dir = cache_dir
        self._groups: dict[str, NodeGroup] = {}
        if cluster is not None:
            for g in cluster.groups:
                get_gpu(g.gpu_type)  # fail early on an unknown type
                self._groups[g.gpu_type] = g
        self._tables: dict[tuple[ModelRef, int, str], TypeTable] = {}
        self._single: dict[tuple[ModelRef, int, ResourceShape], TypeTable] = {}

    def restart_cost(self, model: ModelRef, gpu_type: str) -> RestartCost | None:
        """Measured (re)start costs of ``model`` on ``gpu_type`` (:class:`arena_gym.restarts.RestartCosts`);
        None without them: the simulator charges its constants."""
        return self.restarts.lookup(model, gpu_type) if self.restarts is not None else None

    # -- resolution -------------------------------------------------------------------------

    def arch(self, model: ModelRef) -> ModelArch:
        """The architecture of a model (zoo or user models)."""
        return get_model(model, self.models)

    @staticmethod
    def _check(model: object, global_batch: object, shape: object) -> None:
        check_arg(model, ModelRef, "model")
        check_batch(global_batch)
        check_arg(shape, ResourceShape, "shape")

    def _gpu(self, gpu_type: str) -> tuple[GpuSpec, NodeGroup | None]:
        return get_gpu(gpu_type), self._groups.get(gpu_type)

    def _request(
        self, model: ModelRef, batch: int, gpu_type: str, shapes: tuple[ResourceShape, ...] | None = None
    ) -> TableRequest:
        check_arg(model, ModelRef, "model")
        batch = check_batch(batch)
        check_arg(gpu_type, str, "gpu_type")
        arch = self.arch(model)
        gpu, group = self._gpu(gpu_type)
        if shapes is None:
            capacity = group.gpus_per_node if group else gpu.gpus_per_node
            total = group.total_gpus if group else max(GPU_COUNTS)
            shapes = shapes_for(gpu_type, capacity, total, GPU_COUNTS)
        return TableRequest(arch, batch, gpu_type, gpu, node_links(gpu, group), shapes)

    def table(self, model: ModelRef, global_batch: int, gpu_type: str) -> TypeTable:
        """The (memoised) table of a model and batch on every cluster shape of a GPU type."""
        check_arg(model, ModelRef, "model")
        global_batch = check_batch(global_batch)
        check_arg(gpu_type, str, "gpu_type")
        key = (model, global_batch, gpu_type)
        table = self._tables.get(key)
        if table is None:
            table = self._build_tables([self._request(model, global_batch, gpu_type)])[0]
            self._tables[key] = table
        return table

    def _build_tables(self, requests: list[TableRequest]) -> list[TypeTable]:
        """Build (or load from the disk cache) one table per request (subclasses hook in here)."""
        return build_tables(requests, self.params, self.config, self.cache_dir)

    def prebuild(self, configs: Iterable[tuple[ModelRef, int]], gpu_types: Iterable[str] | None = None) -> int:
        """Plan many (model, batch) configurations on many types in one vectorised pass; returns tables built."""
        types = list(gpu_types if gpu_types is not None else self._groups)
        wanted = [(m, b, t) for m, b in configs for t in types if (m, b, t) not in self._tables]
        if not wanted:
            return 0
        tables = self._build_tables([self._request(m, b, t) for m, b, t in wanted])
        for key, table in zip(wanted, tables):
            self._tables[key] = table
        return len(tables)

    def _locate(self, model: ModelRef, batch: int, shape: ResourceShape) -> tuple[TypeTable, int]:
        """The table and row answering a shape (planned on first use); checks the arguments."""
        if type(model) is ModelRef and type(batch) is int and type(shape) is ResourceShape:
            # the hot path: a planned table exists only for valid arguments, so its key checks them
            hit = self._tables.get((model, batch, shape.gpu_type))
            if hit is not None:
                row = hit.index.get(shape)
                if row is not None:
                    return hit, row
        check_arg(model, ModelRef, "model")
        batch = check_batch(batch)
        check_arg(shape, ResourceShape, "shape")
        table = self._tables.get((model, batch, shape.gpu_type)) or self.table(model, batch, shape.gpu_type)
        row = table.index.get(shape)
        if row is not None:
            return table, row
        key = (model, batch, shape)
        single = self._single.get(key)
        if single is None:
            single = self._build_tables([self._request(model, batch, shape.gpu_type, (shape,))])[0]
            self._single[key] = single
        return single, 0

    # -- PerfModel ----------------------------------------------------------------------------

    def iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """Proxy-plan iteration time (best over stage counts); inf when no plan fits."""
        table, row = self._locate(model, global_batch, shape)
        return table.best[row]

    def grid_iter_time(self, model: ModelRef, global_batch: int, grid: Grid) -> float:
        """Best iteration time with the grid's stage count; inf when no plan fits."""
        check_arg(grid, Grid, "grid")
        table, row = self._locate(model, global_batch, grid.shape)
        col = table.stage_col.get(grid.n_stages)
        return math.inf if col is None else table.grid[row][col]

    def dp_iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """Data-parallel-only time (pp = tp = 1), inf when the artifact's DP memory rule fails."""
        table, row = self._locate(model, global_batch, shape)
        return table.dp_list[row]

    def proxy_plan(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> Plan | None:
        """The plan behind :meth:`iter_time` (None when infeasible)."""
        table, row = self._locate(model, global_batch, shape)
        return table.plan(row, table.best_stage[row], self.config)

    # -- richer queries -----------------------------------------------------------------------

    def grid_plan(self, model: ModelRef, global_batch: int, grid: Grid) -> Plan | None:
        """The best plan of one grid (None when infeasible)."""
        check_arg(grid, Grid, "grid")
        table, row = self._locate(model, global_batch, grid.shape)
        col = table.stage_col.get(grid.n_stages)
        return None if col is None else table.plan(row, col, self.config)

    def estimate(self, model: ModelRef, global_batch: int, shape: ResourceShape, plan: Plan) -> PlanEstimate:
        """Cost breakdown of a concrete plan on a shape (tensor parallelism across nodes allowed)."""
        self._check(model, global_batch, shape)
        check_arg(plan, Plan, "plan")
        arch = self.arch(model)
        gpu, group = self._gpu(shape.gpu_type)
        return estimate_plan(arch, global_batch, shape, plan, rates_for(arch, gpu, node_links(gpu, group), self.params))

    def dp_estimate(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> PlanEstimate:
        """The data-parallel-only plan's estimate, with the DP memory rule applied."""
        self._check(model, global_batch, shape)
        arch = self.arch(model)
        gpu, group = self._gpu(shape.gpu_type)
        rates = rates_for(arch, gpu, node_links(gpu, group), self.params)
        return dp_estimate(arch, global_batch, shape, gpu, rates, self.params, self.config.micro_batches[0])

    def plan_grid(self, model: ModelRef, global_batch: int, grid: Grid) -> GridPlans:
        """Best plan and Pareto set (time vs memory) of one grid."""
        check_arg(grid, Grid, "grid")
        self._check(model, global_batch, grid.shape)
        arch = self.arch(model)
        gpu, group = self._gpu(grid.shape.gpu_type)
        rates = rates_for(arch, gpu, node_links(gpu, group), self.params)
        cands = grid_candidates(arch, global_batch, gpu, rates, grid.shape, grid.n_stages, self.config)
        front = pareto_front(cands, self.config.pareto_size)
        ests = tuple(
            estimate_plan(arch, global_batch, grid.shape, plan, rates, self.config.allow_cross_node_tp)
            for _, _, plan in front
        )
        return GridPlans(grid, ests[0] if ests else None, ests)

    def gpu_memory_gb(self, gpu_type: str) -> float:
        """Memory of a GPU type (GB), from the catalogue."""
        check_arg(gpu_type, str, "gpu_type")
        return get_gpu(canonical_gpu_name(gpu_type)).memory_gb


def default_perf_model(
    cluster: ClusterSpec | None = None,
    cache_dir: str | Path | None = None,
    models: Mapping[str, ModelArch] | None = None,
) -> EstimatorPerfModel:
    """The calibrated estimator (committed parameters, default planner) for ``cluster``.

    ``cache_dir``: a directory of performance tables shared between runs (None: no disk cache);
    ``models``: user-defined architectures by name, besides the zoo (``estimator.zoo.load_models``).
    """
    return EstimatorPerfModel(cluster, cache_dir=cache_dir, models=models)


def calibrated_perf_model(
    path: str,
    cluster: ClusterSpec | None = None,
    cache_dir: str | Path | None = None,
    models: Mapping[str, ModelArch] | None = None,
) -> EstimatorPerfModel:
    """The estimator with the parameters of a JSON file (the ``calibrated:PARAMS.json`` spec), e.g. written by
    ``arena-gym estimate calibrate --profile PROFILE.json --out PARAMS.json`` (with the profile's measured
    (re)start costs, when it has them)."""
    return EstimatorPerfModel(
        cluster,
        params=EstimatorParams.load(path),
        cache_dir=cache_dir,
        models=models,
        restarts=read_restart_table(path),
    )
