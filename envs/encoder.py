"""ObservationEncoder: a decision point (snapshot + builder scratch state) as fixed-shape arrays.

Every value lies in ``[0, 1]``. Unbounded quantities are squashed with ``x / (x + scale)``
(so ``scale`` maps to 0.5); counts of GPUs and stages are encoded as ``(log2(n) + 1) / 5``
(1 GPU -> 0.2, 16 GPUs -> 1.0, 0 = none). See :data:`JOB_FEATURES` for the per-slot columns.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

import numpy as np
from gymnasium import spaces

from arena_gym.types import ClusterSpec, JobSpec, JobStatus, JobView, Snapshot
from envs.advisor import advice_matrix
from envs.builder import DecisionBuilder
from envs.codec import ActionCodec
from envs.config import EnvConfig

HOUR_S = 3600.0
DAY_S = 86400.0
#: The families with a one-hot column of their own. This is part of the observation space (version 1)
#: that trained agents were fitted to, so it is fixed: every other family, built in or registered
#: later, is seen as ``family_other`` (the space never changes with the family catalogue).
OBSERVED_FAMILIES: tuple[str, ...] = ("gpt", "moe", "wide_resnet")

#: Per-slot job columns of the default (non-clairvoyant) observation, before the two GPU-type
#: one-hots (requested type, then current type). Nothing here depends on a job's total
#: iterations: only on what a scheduler observes (its request, its history so far, and belief
#: estimates of its speed). The first 18 change over time; the rest depend only on the job.
JOB_FEATURES: tuple[str, ...] = (
    "present",  # 1 if the slot holds a job
    "holds_gpus",  # running or reconfiguring (a running slot)
    "reconfiguring",  # paying its reconfiguration overhead
    "touched",  # already got a sub-action at this decision point
    "waiting",  # queued seconds, squashed by 1 h
    "age",  # seconds since submission, squashed by 1 h
    "attained_iterations",  # iterations done so far, log10(1 + n) / 6, clipped
    "attained",  # attained GPU-seconds, squashed by 8 GPU-hours
    "attained_rank",  # share of the other slot jobs with less attained GPU service
    "age_rank",  # share of the other slot jobs submitted later
    "gpus",  # current allocation's GPUs, (log2 + 1) / 5, 0 if none
    "stages",  # current grid's pipeline stages, (log2 + 1) / 5, 0 if none
    "speed",  # belief throughput of the current allocation / the job's best on the grid (0 if none)
    "preemptions",  # n / (n + 1)
    "reconfigurations",  # n / (n + 1)
    "has_deadline",
    "slack",  # max(0, deadline - now), squashed by 1 h
    "best_iter_time",  # fastest belief seconds per iteration on the grid, squashed by 1 s (1 if infeasible)
    "requested_gpus",  # (log2 + 1) / 5, 0 if no request
    "batch",  # log2(global batch) / 12, clipped
    "model_size",  # (log10(parameters) - 8) / 4, clipped (100M .. 1T)
    "family_gpt",
    "family_moe",
    "family_wide_resnet",
    "family_other",
)
#: Columns the clairvoyant ablation (``EnvConfig.oracle_remaining``) appends after the one-hots.
ORACLE_FEATURES: tuple[str, ...] = (
    "progress",  # iterations done / iterations
    "remaining",  # remaining iterations x fastest belief time on the grid, squashed by 1 h (1 if infeasible)
)
_N_DYNAMIC = JOB_FEATURES.index("requested_gpus")
CLUSTER_FEATURES: tuple[str, ...] = ("free", "whole_nodes_free", "fragmentation", "pending_demand")
CLOCK_FEATURES: tuple[str, ...] = ("time", "horizon_progress", "substeps", "queue_length", "running_count")
_TOUCHED = JOB_FEATURES.index("touched")
_ITER_LOG_SCALE = 6.0
_SUBSTEPS = CLOCK_FEATURES.index("substeps")
_PENDING, _RECONFIGURING, _RUNNING = 0.0, 1.0, 2.0
_STATUS = {
    JobStatus.PENDING: _PENDING,
    JobStatus.RECONFIGURING: _RECONFIGURING,
    JobStatus.RUNNING: _RUNNING,
    JobStatus.FINISHED: -1.0,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmbt]?)\s*$", re.IGNORECASE)
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def squash(x: float, scale: float) -> float:
    """``x / (x + scale)`` for ``x >= 0``: 0 at 0, 0.5 at ``scale``, towards 1 at infinity."""
    if not math.isfinite(x):
        return 1.0
    x = max(0.0, x)
    return x / (x + scale)


def log_count(n: int | None) -> float:
    """``(log2(n) + 1) / 5`` clipped to 1 (a power-of-two count), 0 for None or 0."""
    if not n:
        return 0.0
    return min(1.0, (math.log2(n) + 1.0) / 5.0)


@lru_cache(maxsize=256)
def model_size_feature(size: str) -> float:
    """``(log10(parameters) - 8) / 4`` clipped to [0, 1] for labels like ``1.3B`` / ``760M`` (0 if unparsable)."""
    m = _SIZE.match(size)
    if m is None:
        return 0.0
    params = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    return float(np.clip((math.log10(max(params, 1.0)) - 8.0) / 4.0, 0.0, 1.0))


class ObservationEncoder:
    """Encodes decision points of one cluster/codec/config into :attr:`space` (a ``spaces.Dict``).

    Keys: ``jobs`` ``(S, F)`` per-slot job features (:attr:`job_features`: :data:`JOB_FEATURES`,
    the requested and the current GPU type one-hot over the cluster's types, and with
    ``config.oracle_remaining`` the clairvoyant :data:`ORACLE_FEATURES`); ``grid`` ``(S, C)`` each job's belief
    throughput on each cell (best locality), relative to its best cell (0 = infeasible);
    ``mask`` ``(S, C + 1)`` the builder's action mask without "done" (last column = preempt); ``cluster``
    ``(T, 4)`` per GPU type after the sub-actions so far (:data:`CLUSTER_FEATURES`;
    fragmentation = share of free GPUs on partly used nodes; pending demand = requested GPUs of
    all queued jobs, squashed by the type's size); ``clock`` ``(5,)`` (:data:`CLOCK_FEATURES`);
    with ``config.advisor`` also ``advice`` ``(S, C + 1)``: 1 on the advisor's still-valid sub-actions.
    """

    def __init__(self, cluster: ClusterSpec, codec: ActionCodec, config: EnvConfig) -> None:
        self.cluster = cluster
        self.codec = codec
        self.config = config
        self.types = cluster.gpu_types
        self._type_index = {t: i for i, t in enumerate(self.types)}
        n_types = len(self.types)
        self.oracle = config.oracle_remaining
        self.job_features = (
            JOB_FEATURES
            + tuple(f"requested_{t}" for t in self.types)
            + tuple(f"current_{t}" for t in self.types)
            + (ORACLE_FEATURES if self.oracle else ())
        )
        self.n_job_features = len(self.job_features)
        shapes = {
            "jobs": (codec.n_slots, self.n_job_features),
            "grid": (codec.n_slots, codec.n_cells),
            "mask": (codec.n_slots, codec.width),
            "cluster": (n_types, len(CLUSTER_FEATURES)),
            "clock": (len(CLOCK_FEATURES),),
        }
        if config.advisor is not None:
            shapes["advice"] = (codec.n_slots, codec.width)
        self.space = spaces.Dict({k: spaces.Box(0.0, 1.0, shape=s, dtype=np.float32) for k, s in shapes.items()})
        self._capacity = np.array([g.gpus_per_node for g in cluster.groups], dtype=np.float64)
        self._nodes = np.array([g.nodes for g in cluster.groups], dtype=np.float64)
        self._starts = np.cumsum([0] + [g.nodes for g in cluster.groups[:-1]])
        self._total = self._capacity * self._nodes
        self._node_capacity = np.concatenate([np.full(g.nodes, g.gpus_per_node) for g in cluster.groups])
        self._static_for: DecisionBuilder | None = None
        self._static: tuple[np.ndarray, ...] | None = None
        self._spec_rows: dict[tuple, list[float]] = {}

    def encode(
        self, snapshot: Snapshot, builder: DecisionBuilder, advice: tuple[int, ...] = ()
    ) -> dict[str, np.ndarray]:
        """The observation of ``builder``'s current scratch state at ``snapshot`` (``advice``: the advisor's sub-actions)."""
        if self._static_for is not builder:
            self._static = self._static_parts(snapshot, builder)
            self._static_for = builder
        jobs_static, grid, demand, clock_static = self._static  # type: ignore[misc]
        jobs = jobs_static.copy()
        jobs[:, _TOUCHED] = builder.touched
        mask = builder.mask()[:-1].reshape(self.codec.n_slots, self.codec.width).astype(np.float32)
        nodes_free = builder.free[:-1]
        free = np.add.reduceat(nodes_free, self._starts).astype(np.float64)
        whole = np.add.reduceat(nodes_free == self._node_capacity, self._starts)
        cluster = np.empty((len(self.types), len(CLUSTER_FEATURES)), dtype=np.float32)
        cluster[:, 0] = free / self._total
        cluster[:, 1] = whole / self._nodes
        cluster[:, 2] = (free - self._capacity * whole) / np.maximum(free, 1.0)
        cluster[:, 3] = demand
        clock = clock_static.copy()
        clock[_SUBSTEPS] = min(1.0, builder.substeps / self.config.max_substeps)
        obs = {"jobs": jobs, "grid": grid.copy(), "mask": mask, "cluster": cluster, "clock": clock}
        if self.config.advisor is not None:
            obs["advice"] = advice_matrix(advice, builder)
        return obs

    def blank(self) -> dict[str, np.ndarray]:
        """An all-zero observation (used after the episode has ended)."""
        return {k: np.zeros(s.shape, dtype=np.float32) for k, s in self.space.spaces.items()}

    # ------------------------------------------------------------------ internals
    def _static_parts(self, snapshot: Snapshot, builder: DecisionBuilder) -> tuple[np.ndarray, ...]:
        now = snapshot.now
        best = builder.times.min(-1)  # (S, C): fastest locality per cell
        fastest = best.min(-1)  # (S,)
        current_time = np.full(len(builder.slots), math.inf)
        held = builder.current_cells()
        rows = np.flatnonzero(held >= 0)
        current_time[rows] = best[rows, held[rows]]
        jobs = self._job_matrix(builder.slots, now, fastest, current_time)
        with np.errstate(divide="ignore", invalid="ignore"):
            grid = np.where(np.isfinite(best), fastest[:, None] / best, 0.0).astype(np.float32)
        demand = np.zeros(len(self.types))
        for view in snapshot.pending:
            t = view.spec.requested_gpu_type
            if t in self._type_index:
                demand[self._type_index[t]] += view.spec.requested_gpus or 1
        cfg = self.config
        n_pending, n_running = len(snapshot.pending), len(snapshot.running)
        horizon = snapshot.horizon
        clock = np.array(
            [
                squash(now, DAY_S),
                min(1.0, now / horizon) if math.isfinite(horizon) else 0.0,
                0.0,
                n_pending / (n_pending + cfg.max_pending),
                n_running / (n_running + cfg.max_running) if n_running else 0.0,
            ],
            dtype=np.float32,
        )
        return jobs, grid, demand / (demand + self._total), clock

    def _job_matrix(
        self, slots: tuple[JobView | None, ...], now: float, fastest: np.ndarray, current_time: np.ndarray
    ) -> np.ndarray:
        """Per-slot job features (:attr:`job_features`), ``(S, F)``; empty slots all 0.

        ``fastest`` is each slot's best belief time on the grid, ``current_time`` the belief
        time of the cell it holds (inf if none).
        """
        jobs = np.zeros((len(slots), self.n_job_features), dtype=np.float32)
        rows = [s for s, v in enumerate(slots) if v is not None]
        if not rows:
            return jobs
        views = [slots[s] for s in rows]
        raw = np.array([self._raw(v) for v in views], dtype=np.float64)  # type: ignore[arg-type]
        (
            queued,
            mark,
            submit,
            done_mark,
            rate,
            run_start,
            attained,
            gpus,
            stages,
            preempts,
            reconfigs,
            deadline,
            status,
            current,
        ) = raw.T
        running = status == _RUNNING
        elapsed = np.where(running, now - np.maximum(mark, run_start), 0.0)
        done = done_mark + rate * elapsed
        service = attained + gpus * elapsed
        has_deadline = ~np.isnan(deadline)
        best = fastest[rows]
        out = np.empty((len(rows), _N_DYNAMIC), dtype=np.float64)
        out[:, 0] = 1.0
        out[:, 1] = gpus > 0
        out[:, 2] = status == _RECONFIGURING
        out[:, 3] = 0.0
        out[:, 4] = _squash(queued + np.where(status == _PENDING, now - mark, 0.0), HOUR_S)
        out[:, 5] = _squash(now - submit, HOUR_S)
        out[:, 6] = np.minimum(1.0, np.log10(1.0 + done) / _ITER_LOG_SCALE)
        out[:, 7] = _squash(service, 8 * HOUR_S)
        out[:, 8] = _rank(service, less=True)
        out[:, 9] = _rank(submit, less=False)
        out[:, 10] = _log_counts(gpus)
        out[:, 11] = _log_counts(stages)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, 12] = np.where((gpus > 0) & np.isfinite(current_time[rows]), best / current_time[rows], 0.0)
        out[:, 13] = preempts / (preempts + 1.0)
        out[:, 14] = reconfigs / (reconfigs + 1.0)
        out[:, 15] = has_deadline
        out[:, 16] = np.where(has_deadline, _squash(np.nan_to_num(deadline - now, nan=0.0), HOUR_S), 0.0)
        out[:, 17] = _squash(best, 1.0)
        jobs[rows, :_N_DYNAMIC] = out
        n = len(JOB_FEATURES) + len(self.types)
        jobs[rows, _N_DYNAMIC:n] = [self._spec_row(v.spec) for v in views]  # type: ignore[union-attr]
        holding = np.flatnonzero(current >= 0)
        jobs[np.asarray(rows)[holding], n + current[holding].astype(np.int64)] = 1.0
        if self.oracle:
            iterations = np.array([v.spec.iterations for v in views], dtype=np.float64)  # type: ignore[union-attr]
            done = np.minimum(iterations, done)
            jobs[rows, -2] = np.minimum(1.0, done / iterations)
            jobs[rows, -1] = _squash(np.maximum(0.0, iterations - done) * best, HOUR_S)
        return jobs

    def _raw(self, view: JobView) -> tuple[float, ...]:
        """The numbers of a JobView the features are computed from (see :meth:`_job_matrix`); no total iterations."""
        spec, alloc = view.spec, view.allocation
        return (
            view.queued_s_at_mark,
            view.mark_time,
            spec.submit_time,
            view.done_at_mark,
            view.rate,
            view.run_start if view.run_start is not None else view.mark_time,
            view.attained_gpu_s,
            alloc.num_gpus if alloc is not None else 0,
            alloc.grid.n_stages if alloc is not None else 0,
            view.preemptions,
            view.reconfigurations,
            spec.deadline if spec.deadline is not None else math.nan,
            _STATUS[view.status],
            self._type_index[alloc.shape.gpu_type] if alloc is not None else -1,
        )

    def _spec_row(self, spec: JobSpec) -> list[float]:
        """The columns that depend only on the job's configuration (requested_gpus .. requested type), cached."""
        key = (spec.model.family, spec.model.size, spec.global_batch, spec.requested_gpu_type, spec.requested_gpus)
        row = self._spec_rows.get(key)
        if row is None:
            family = spec.model.family
            requested = [0.0] * len(self.types)
            if spec.requested_gpu_type in self._type_index:
                requested[self._type_index[spec.requested_gpu_type]] = 1.0
            row = [
                log_count(spec.requested_gpus),
                min(1.0, math.log2(spec.global_batch) / 12.0),
                model_size_feature(spec.model.size),
                *(1.0 if family == f else 0.0 for f in OBSERVED_FAMILIES),
                0.0 if family in OBSERVED_FAMILIES else 1.0,
                *requested,
            ]
            self._spec_rows[key] = row
        return row


def _squash(x: np.ndarray, scale: float) -> np.ndarray:
    """Vectorised :func:`squash`."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(x), np.maximum(x, 0.0) / (np.maximum(x, 0.0) + scale), 1.0)


def _rank(x: np.ndarray, less: bool) -> np.ndarray:
    """Per entry: the share of the other entries strictly below (``less``) or above it (0 for a single entry)."""
    if len(x) < 2:
        return np.zeros(len(x))
    below = (x[None, :] < x[:, None]) if less else (x[None, :] > x[:, None])
    return below.sum(1) / (len(x) - 1)


def _log_counts(n: np.ndarray) -> np.ndarray:
    """Vectorised :func:`log_count`."""
    with np.errstate(divide="ignore"):
        return np.where(n > 0, np.minimum(1.0, (np.log2(np.maximum(n, 1.0)) + 1.0) / 5.0), 0.0)
