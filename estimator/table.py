"""Performance tables: best iteration time, plan and feasibility of every (model, batch, GPU
type) x resource shape x stage count, precomputed in one vectorised pass and cached on disk.

A :class:`TypeTable` answers in O(1): it holds Python lists for the hot lookups and numpy
arrays for everything else. The disk cache is one ``.npy`` file per table (one float64 array,
never pickled), named by a hash of the estimator version, its parameters, the planner settings,
the model's cost table, the batch, the GPU spec, its links and the shapes; files are written
under a unique temporary name and renamed into place, so concurrent runs share a cache safely.
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

from arena_gym.types import GpuType, PipeSchedule, Plan, ResourceShape
from estimator.costmodel import GIB, Infeasible, rates_for
from estimator.hardware import GpuSpec, NodeLinks
from estimator.params import ESTIMATOR_VERSION, EstimatorParams
from estimator.planner import PlanGroup, PlannerConfig, PreparedGroups, decode_plan, dp_view
from estimator.zoo import ModelArch

log = logging.getLogger(__name__)

MAX_STAGES = 16
#: Suffix of a cached table: ``KEY.npy``, where KEY hashes every input of the table.
CACHE_SUFFIX = ".npy"


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
        text = json.dumps(
            [
                ESTIMATOR_VERSION,
                params.fingerprint(),
                cfg.key(),
                self.arch.fingerprint(),
                self.batch,
                self.gpu_type,
                astuple(self.gpu),
                astuple(self.links),
                [[s.n_nodes, s.gpus_per_node] for s in self.shapes],
            ]
        )
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
    _plans: dict[tuple[int, int, PipeSchedule], Plan | None] = field(init=False, repr=False)  # decoded plans

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "index", {s: i for i, s in enumerate(self.shapes)})
        cols = np.argmin(self.time, axis=1) if self.time.size else np.zeros(0, dtype=int)
        set_(self, "best_stage", [int(c) for c in cols])
        set_(self, "best", [float(self.time[i, c]) for i, c in enumerate(cols)])
        set_(self, "grid", self.time.tolist())
        set_(self, "dp_list", self.dp_time.tolist())
        set_(self, "stage_col", {s: j for j, s in enumerate(self.stage_counts)})
        set_(self, "_plans", {})

    def plan(self, row: int, col: int, cfg: PlannerConfig) -> Plan | None:
        """The plan of one grid (None when infeasible); decoded once per grid and schedule."""
        key = (row, col, cfg.schedule)
        if key in self._plans:
            return self._plans[key]
        plan = None
        if math.isfinite(self.grid[row][col]):
            S = self.stage_counts[col]
            plan = decode_plan(
                self.bounds[row, col, : S + 1],
                self.dp[row, col, :S],
                self.tp[row, col, :S],
                int(self.micro_batches[row, col]),
                cfg.schedule,
            )
        self._plans[key] = plan
        return plan


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


def build_tables(
    requests: Sequence[TableRequest], params: EstimatorParams, cfg: PlannerConfig, cache_dir: str | Path | None = None
) -> list[TypeTable]:
    """Build (or load from ``cache_dir``) one table per request, planning all missing ones together."""
    out: list[TypeTable | None] = [None] * len(requests)
    keys = [r.key(params, cfg) for r in requests] if cache_dir is not None else []
    if cache_dir is not None:
        for i, (req, key) in enumerate(zip(requests, keys)):
            out[i] = _load(Path(cache_dir) / f"{key}{CACHE_SUFFIX}", req, cfg)
    todo = [i for i, t in enumerate(out) if t is None]
    if todo:
        built = _build([requests[i] for i in todo], params, cfg)
        for i, table in zip(todo, built):
            out[i] = table
            if cache_dir is not None:
                _save(Path(cache_dir) / f"{keys[i]}{CACHE_SUFFIX}", table)
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
        for k, v in (
            ("compute", res.times.compute),
            ("intra", res.times.intra),
            ("inter", res.times.inter),
            ("bubble", res.times.bubble),
            ("mem_gb", res.times.mem / GIB),
        ):
            parts[k][rows, col] = v
        micro[rows, col] = res.micro_batches
        bounds[rows, col, : S + 1] = res.bounds
        dp[rows, col, :S] = res.dp
        tp[rows, col, :S] = res.tp
    # grids that cannot exist (more stages than GPUs or units) stay inf with reason 0
    tables = []
    dp_views = dp_view(
        [(r.arch, r.batch, r.gpu, rt, r.shapes) for r, rt in zip(requests, rates)], params, cfg.micro_batches[0]
    )
    for i, r in enumerate(requests):
        sl = slice(offsets[i], offsets[i + 1])
        dpt, dpm = dp_views[i]
        tables.append(
            TypeTable(
                r.arch.name,
                r.batch,
                r.gpu_type,
                r.shapes,
                cfg.stage_counts,
                time=time[sl],
                reason=reason[sl],
                **{k: v[sl] for k, v in parts.items()},
                micro_batches=micro[sl],
                bounds=bounds[sl],
                dp=dp[sl],
                tp=tp[sl],
                dp_time=dpt,
                dp_mem_gb=dpm,
            )
        )
    return tables


#: Fields of a table packed into one float64 array [shapes, stage counts, ...] for the disk cache
#: (every integer field fits a float64 exactly): name -> width along the last axis.
_PACKED = (
    ("time", 1),
    ("reason", 1),
    ("compute", 1),
    ("intra", 1),
    ("inter", 1),
    ("bubble", 1),
    ("mem_gb", 1),
    ("micro_batches", 1),
    ("dp_time", 1),
    ("dp_mem_gb", 1),
    ("bounds", MAX_STAGES + 1),
    ("dp", MAX_STAGES),
    ("tp", MAX_STAGES),
)
_PACKED_WIDTH = sum(w for _, w in _PACKED)
#: Fields stored per shape only (the same in every stage-count column of the packed array).
_PER_SHAPE = ("dp_time", "dp_mem_gb")
_DTYPES = {"reason": np.int8, "micro_batches": np.int32, "bounds": np.int32, "dp": np.int32, "tp": np.int32}


def pack(table: TypeTable) -> np.ndarray:
    """A table as one float64 array [shapes, stage counts, fields] (one ``.npy`` file loads in one read)."""
    rows, cols = table.time.shape
    out = np.empty((rows, cols, _PACKED_WIDTH))
    at = 0
    for name, width in _PACKED:
        value = getattr(table, name)
        if name in _PER_SHAPE:
            value = np.broadcast_to(value[:, None], (rows, cols))
        out[:, :, at : at + width] = value.reshape(rows, cols, width)
        at += width
    return out


def unpack(packed: np.ndarray, req: TableRequest, stage_counts: tuple[int, ...]) -> TypeTable:
    """The table :func:`pack` packed; ValueError when the array does not fit ``req`` and ``stage_counts``."""
    rows, cols = len(req.shapes), len(stage_counts)
    if packed.dtype != np.float64 or packed.shape != (rows, cols, _PACKED_WIDTH):
        raise ValueError(f"array of {packed.dtype} {packed.shape}, expected float64 {(rows, cols, _PACKED_WIDTH)}")
    arrays: dict[str, np.ndarray] = {}
    at = 0
    for name, width in _PACKED:
        value = packed[:, :, at] if width == 1 else packed[:, :, at : at + width]
        if name in _PER_SHAPE:
            value = packed[:, 0, at] if cols else np.zeros(rows)
        arrays[name] = value.astype(_DTYPES.get(name, np.float64))
        at += width
    return TypeTable(req.arch.name, req.batch, req.gpu_type, req.shapes, stage_counts, **arrays)


def _save(path: Path, table: TypeTable) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a unique temporary name, then an atomic rename: concurrent runs never see a partial file
        fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                np.save(handle, pack(table), allow_pickle=False)
            Path(name).replace(path)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("cannot write performance-table cache %s: %s", path, exc)


def _load(path: Path, req: TableRequest, cfg: PlannerConfig) -> TypeTable | None:
    """The cached table at ``path`` (its name is the request's key), None when absent or unreadable."""
    try:
        packed = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, EOFError) as exc:
        log.warning("ignoring unreadable performance-table cache %s: %s", path, exc)
        return None
    try:
        return unpack(packed, req, cfg.stage_counts)
    except (ValueError, TypeError) as exc:
        log.warning("ignoring performance-table cache %s that does not fit its request: %s", path, exc)
        return None


def reason_text(code: int) -> str:
    """Text of an Infeasible code."""
    return Infeasible(int(code)).describe()
