"""Performance tables: best iteration time, plan and feasibility of every (model, batch, GPU
type) x resource shape x stage count, precomputed in one vectorised pass and cached on disk.

A :class:`TypeTable` answers in O(1): it holds Python lists for the hot lookups and numpy
arrays for everything else. The disk cache is one ``.npz`` file per table (never pickled),
named by a hash of the estimator version, its parameters, the planner settings, the model's
cost table, the batch, the GPU spec, its links and the shapes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from pathlib import Path

import numpy as np

from arena_gym.types import GpuType, Plan, ResourceShape
from estimator.costmodel import GIB, Infeasible, rates_for
from estimator.hardware import GpuSpec, NodeLinks
from estimator.params import ESTIMATOR_VERSION, EstimatorParams
from estimator.planner import PlanGroup, PlannerConfig, PreparedGroups, decode_plan, dp_view
from estimator.zoo import ModelArch

log = logging.getLogger(__name__)

MAX_STAGES = 16


@dataclass(frozen=True)
class TableRequest:
    """One table to build: a model and batch on one GPU type (as named by the caller) and its shapes."""

    arch: ModelArch
    batch: int
    gpu_type: str
    gpu: GpuSpec
    links: NodeLinks
    shapes: tuple[ResourceShape, ...]

    def key(self, params: EstimatorParams, cfg: PlannerConfig) -> str:
        """Cache key: every input of the table."""
        text = json.dumps([ESTIMATOR_VERSION, params.fingerprint(), cfg.key(), self.arch.fingerprint(), self.batch,
                           self.gpu_type, astuple(self.gpu), astuple(self.links),
                           [[s.n_nodes, s.gpus_per_node] for s in self.shapes]])
        return hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass(frozen=True, eq=False)
class TypeTable:
    """Planned grids of one (model, batch, GPU type) over its shapes (rows) and stage counts (columns)."""

    model: str
    batch: int
    gpu_type: str
    shapes: tuple[ResourceShape, ...]
    stage_counts: tuple[int, ...]
    time: np.ndarray  # [shapes, stage counts], inf when infeasible or impossible
    reason: np.ndarray  # Infeasible code (0 where feasible)
    compute: np.ndarray
    intra: np.ndarray
    inter: np.ndarray
    bubble: np.ndarray
    mem_gb: np.ndarray
    micro_batches: np.ndarray  # int
    bounds: np.ndarray  # [shapes, stage counts, MAX_STAGES + 1] layer bounds, -1 padded
    dp: np.ndarray  # [shapes, stage counts, MAX_STAGES], 0 padded
    tp: np.ndarray
    dp_time: np.ndarray  # [shapes] the data-parallel-only view
    dp_mem_gb: np.ndarray
    index: dict[ResourceShape, int] = field(init=False)
    best: list[float] = field(init=False)  # per shape, min over stage counts
    best_stage: list[int] = field(init=False)  # column of the best grid
    grid: list[list[float]] = field(init=False)
    dp_list: list[float] = field(init=False)
    stage_col: dict[int, int] = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "index", {s: i for i, s in enumerate(self.shapes)})
        cols = np.argmin(self.time, axis=1) if self.time.size else np.zeros(0, dtype=int)
        set_(self, "best_stage", [int(c) for c in cols])
        set_(self, "best", [float(self.time[i, c]) for i, c in enumerate(cols)])
        set_(self, "grid", self.time.tolist())
        set_(self, "dp_list", self.dp_time.tolist())
        set_(self, "stage_col", {s: j for j, s in enumerate(self.stage_counts)})

    def plan(self, row: int, col: int, cfg: PlannerConfig) -> Plan | None:
        """The plan of one grid (None when infeasible)."""
        if not math.isfinite(self.time[row, col]):
            return None
        S = self.stage_counts[col]
        return decode_plan(self.bounds[row, col, :S + 1], self.dp[row, col, :S], self.tp[row, col, :S],
                           int(self.micro_batches[row, col]), cfg.schedule)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array field (for saving)."""
        names = ("time", "reason", "compute", "intra", "inter", "bubble", "mem_gb", "micro_batches", "bounds", "dp", "tp",
                 "dp_time", "dp_mem_gb")
        return {n: getattr(self, n) for n in names}


def shapes_for(gpu_type: str, capacity: int, total_gpus: int, counts: Sequence[int]) -> tuple[ResourceShape, ...]:
    """Every uniform locality of each count (up to ``total_gpus``) with at most ``capacity`` GPUs per node."""
    out = []
    for n in counts:
        if n > total_gpus:
            continue
        per_node = min(n, capacity)
        while per_node >= 1:
            if n % per_node == 0:
                out.append(ResourceShape(GpuType(gpu_type), n // per_node, per_node))
            per_node //= 2
    return tuple(out)


def build_tables(requests: Sequence[TableRequest], params: EstimatorParams, cfg: PlannerConfig,
                 cache_dir: str | Path | None = None) -> list[TypeTable]:
    """Build (or load from ``cache_dir``) one table per request, planning all missing ones together."""
    out: list[TypeTable | None] = [None] * len(requests)
    keys = [r.key(params, cfg) for r in requests] if cache_dir is not None else []
    if cache_dir is not None:
        for i, (req, key) in enumerate(zip(requests, keys)):
            out[i] = _load(Path(cache_dir) / f"{key}.npz", req, key, cfg)
    todo = [i for i, t in enumerate(out) if t is None]
    if todo:
        built = _build([requests[i] for i in todo], params, cfg)
        for i, table in zip(todo, built):
            out[i] = table
            if cache_dir is not None:
                _save(Path(cache_dir) / f"{keys[i]}.npz", table, keys[i])
    return [t for t in out if t is not None]


def _build(requests: Sequence[TableRequest], params: EstimatorParams, cfg: PlannerConfig) -> list[TypeTable]:
    groups = [PlanGroup(r.arch, r.batch, r.gpu, r.shapes) for r in requests]
    rates = [rates_for(r.arch, r.gpu, r.links, params) for r in requests]
    n_s = len(cfg.stage_counts)
    shape_counts = [len(r.shapes) for r in requests]
    offsets = np.concatenate([[0], np.cumsum(shape_counts)])
    total = int(offsets[-1])
    time = np.full((total, n_s), np.inf)
    reason = np.zeros((total, n_s), dtype=np.int8)
    parts = {k: np.zeros((total, n_s)) for k in ("compute", "intra", "inter", "bubble", "mem_gb")}
    micro = np.zeros((total, n_s), dtype=np.int32)
    bounds = np.full((total, n_s, MAX_STAGES + 1), -1, dtype=np.int32)
    dp = np.zeros((total, n_s, MAX_STAGES), dtype=np.int32)
    tp = np.zeros((total, n_s, MAX_STAGES), dtype=np.int32)
    for S, res in PreparedGroups(groups, cfg).solve(rates).items():
        col = cfg.stage_counts.index(S)
        rows = offsets[res.group] + res.shape
        time[rows, col] = res.times.total
        reason[rows, col] = res.times.reason
        for k, v in (("compute", res.times.compute), ("intra", res.times.intra), ("inter", res.times.inter),
                     ("bubble", res.times.bubble), ("mem_gb", res.times.mem / GIB)):
            parts[k][rows, col] = v
        micro[rows, col] = res.micro_batches
        bounds[rows, col, :S + 1] = res.bounds
        dp[rows, col, :S] = res.dp
        tp[rows, col, :S] = res.tp
    # grids that cannot exist (more stages than GPUs or units) stay inf with reason 0
    tables = []
    dp_views = dp_view([(r.arch, r.batch, r.gpu, rt, r.shapes) for r, rt in zip(requests, rates)], params,
                       cfg.micro_batches[0])
    for i, r in enumerate(requests):
        sl = slice(offsets[i], offsets[i + 1])
        dpt, dpm = dp_views[i]
        tables.append(TypeTable(r.arch.name, r.batch, r.gpu_type, r.shapes, cfg.stage_counts, time[sl], reason[sl],
                                *(parts[k][sl] for k in ("compute", "intra", "inter", "bubble", "mem_gb")),
                                micro[sl], bounds[sl], dp[sl], tp[sl], dpt, dpm))
    return tables


def _save(path: Path, table: TypeTable, key: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a unique temporary name, then an atomic rename: concurrent runs never see a partial file
        fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npz", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.savez_compressed(handle, key=np.array(key), **table.arrays())
            Path(name).replace(path)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("cannot write performance-table cache %s: %s", path, exc)


def _load(path: Path, req: TableRequest, key: str, cfg: PlannerConfig) -> TypeTable | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key:
                return None
            arrays = {k: data[k] for k in data.files if k != "key"}
        return TypeTable(req.arch.name, req.batch, req.gpu_type, req.shapes, cfg.stage_counts, **arrays)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable performance-table cache %s: %s", path, exc)
        return None


def reason_text(code: int) -> str:
    """Text of an Infeasible code."""
    return Infeasible(int(code)).describe()
