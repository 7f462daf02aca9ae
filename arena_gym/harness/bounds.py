"""Lower bounds on the average JCT of a workload: every schedule the simulator allows does at least this well.

Two bounds, both for schedules that finish every job (no horizon) under one reconfiguration
overhead class, the one ``SimConfig.overhead_s`` charges (Arena's ``pruned`` class by default:
``min(10 s x GPUs, 40 s)``):

- **LB1**: each job alone on the cluster, on its best configuration.
- **LP**: a time-indexed linear relaxation of the whole cluster (:func:`lp_bound`), which adds
  what LB1 ignores: the jobs share each GPU type's capacity.

The configurations of a job are (GPU type, GPU count) pairs, the count any power of two up to
the type's GPUs (so every count a policy may ask for, :data:`arena_gym.types.GPU_COUNTS` and
beyond). A configuration's run time is the job's iterations times the ground truth's best
iteration time over every grid the cluster can hold with that type and count (every uniform
locality that fits the node group, every stage count): the simulator runs a job at
``truth.grid_iter_time`` of the grid it is given, so no allocation of that type and count is
faster. A (re)start on ``n`` GPUs holds them ``overhead_s(n)`` seconds without progress.

**LB1 is valid.** Let a schedule make the fraction ``f_k > 0`` of job ``j``'s work on
configuration ``k`` (run time ``p_k``, overhead ``o_k``). Progress on ``k`` follows a full
overhead ``o_k`` on ``k``, at or after the release ``r_j``, and a job is in one state at a
time, so ``C_j - r_j >= sum_k (o_k + f_k p_k) >= sum_k f_k (o_k + p_k) >= min_k (o_k + p_k)``
(using ``f_k <= 1`` and ``sum_k f_k = 1``).

**The LP is valid.** Time after the first release is cut into slots ``[b_l, b_l+1)`` (release
dates are boundaries; lengths grow geometrically after each release, capped while jobs are
released and queued, see :class:`LPConfig`, up to a horizon ``b_L`` after which one unbounded
tail slot follows). Variable ``x_jkl`` is the run time of job ``j``
on configuration ``k`` in slot ``l``, ``y_j`` the fraction of its work done after ``b_L`` and
``C_j`` its completion time. Map any simulator schedule to them (``x`` = its run seconds,
``y`` = its work after ``b_L``, ``C`` = its completion times). Then every constraint holds:

1. work: ``sum_kl x_jkl / p_jk + y_j = 1``;
2. capacity: ``sum_{j, k of type g} n_k x_jkl <= G_g (b_l+1 - b_l)`` (GPUs held during
   overheads are left out of the capacity: a relaxation);
3. one configuration at a time: ``sum_k x_jkl <= |slot l after r_j + min_k o_k|``, and
   ``0 <= x_jkl <= |slot l after r_j + o_k|`` (progress on ``k`` starts ``o_k`` after the
   release at the earliest);
4. mean busy time: the work fraction of job ``j`` runs with density at most ``1 / p_j^min``
   (its fastest configuration) and ends by ``C_j``, so its work-weighted mean time ``M_j`` is at
   most ``C_j - p_j^min / 2``; every bit of work in slot ``l`` on ``k`` is done at or after
   ``a_jkl = max(b_l, r_j + o_k)``, so
   ``C_j >= sum_kl a_jkl x_jkl / p_jk + b_L y_j + p_j^min / 2``;
5. ``C_j >= r_j + LB1_j`` (above), so the LP bound is never below LB1.

So the LP optimum of ``mean_j (C_j - r_j)`` is at most any schedule's average JCT. Coarser
slots only weaken constraint 4 (the slot start stands for the true time), never validity.
Configurations dominated by fewer GPUs of the same type that are at least as fast are dropped
(moving their work there satisfies every constraint at no higher objective: the overhead
grows with the GPU count), which leaves the optimum unchanged. :func:`lp_bound` solves the LP
to optimality by column generation.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np
from scipy.sparse import coo_array, csc_array

from arena_gym.sim.config import SimConfig
from arena_gym.types import ClusterSpec, GpuType, Grid, JobSpec, ModelRef, NodeGroup, PerfModel, localities

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunTimes:
    """Every job's best run time on every (GPU type, GPU count) configuration of a cluster.

    ``run_s[j, k]`` is job ``j``'s iterations times its best iteration time on configuration
    ``k`` (``inf``: no feasible grid); configuration ``k`` is ``gpus[k]`` GPUs of
    ``gpu_types[type_index[k]]``, whose group has ``type_gpus[type_index[k]]`` GPUs in all,
    and a (re)start on it costs ``overhead_s[k]``. ``release_s`` holds the submit times.
    """

    gpu_types: tuple[GpuType, ...]
    type_gpus: np.ndarray
    type_index: np.ndarray
    gpus: np.ndarray
    overhead_s: np.ndarray
    release_s: np.ndarray
    run_s: np.ndarray

    @property
    def n_jobs(self) -> int:
        """Jobs of the workload."""
        return len(self.release_s)

    def lb1_s(self) -> np.ndarray:
        """Per job: the shortest overhead + run time over its configurations (LB1 of its JCT)."""
        return np.min(self.overhead_s[None, :] + self.run_s, axis=1)

    def dominated(self) -> np.ndarray:
        """(jobs x configurations) mask: a configuration with fewer GPUs of the same type is at least as fast."""
        out = np.zeros(self.run_s.shape, dtype=bool)
        for t in range(len(self.gpu_types)):
            cols = np.flatnonzero(self.type_index == t)
            cols = cols[np.argsort(self.gpus[cols], kind="stable")]
            best_before = np.minimum.accumulate(self.run_s[:, cols], axis=1)
            out[:, cols[1:]] = self.run_s[:, cols[1:]] >= best_before[:, :-1]
        return out


def run_times(jobs: Sequence[JobSpec], cluster: ClusterSpec, truth: PerfModel, sim_config: SimConfig) -> RunTimes:
    """The :class:`RunTimes` of ``jobs`` on ``cluster`` under ``truth``, overheads from ``sim_config``."""
    types, type_index, gpus = [], [], []
    for t, group in enumerate(cluster.groups):
        types.append(group.gpu_type)
        n = 1
        while n <= group.total_gpus:
            type_index.append(t)
            gpus.append(n)
            n *= 2
    best: dict[tuple[ModelRef, int], np.ndarray] = {}  # per (model, batch): best iteration time per configuration
    for spec in jobs:
        key = (spec.model, spec.global_batch)
        if key not in best:
            best[key] = np.array(
                [_best_iter_time(truth, spec, cluster.groups[t], n) for t, n in zip(type_index, gpus)], dtype=float
            )
    iterations = np.array([spec.iterations for spec in jobs], dtype=float)
    per_iter = np.array([best[(spec.model, spec.global_batch)] for spec in jobs], dtype=float).reshape(
        len(jobs), len(gpus)
    )
    return RunTimes(
        gpu_types=tuple(types),
        type_gpus=np.array([g.total_gpus for g in cluster.groups], dtype=float),
        type_index=np.array(type_index, dtype=np.int64),
        gpus=np.array(gpus, dtype=np.int64),
        overhead_s=np.array([sim_config.overhead_s(n) for n in gpus], dtype=float),
        release_s=np.array([spec.submit_time for spec in jobs], dtype=float),
        run_s=iterations[:, None] * per_iter,
    )


def _best_iter_time(truth: PerfModel, spec: JobSpec, group: NodeGroup, num_gpus: int) -> float:
    """The fastest ``truth.grid_iter_time`` of ``spec`` over every grid of ``num_gpus`` GPUs that fits ``group``."""
    best = math.inf
    for shape in localities(group.gpu_type, num_gpus, group.gpus_per_node):
        if shape.n_nodes > group.nodes:
            continue
        stages = 1
        while stages <= num_gpus:
            t = truth.grid_iter_time(spec.model, spec.global_batch, Grid(shape, stages))
            if t > 0:
                best = min(best, t)
            stages *= 2
    return best


@dataclass(frozen=True)
class LPConfig:
    """How the LP cuts time into slots, and how far each job's slots reach at first.

    Let ``d = first_slot_frac x`` (the workload's median LB1). After every release date come
    ``ceil(1 / growth)`` slots of length ``d``, then each slot is ``1 + growth`` times as long as
    the one before up to ``max_slot_frac x`` the median LB1, then slots of that length, until
    the next release; after the last release, past ``job_window x`` the median LB1, the slots
    grow again by ``1 + growth`` each. The last
    bounded slot ends at the last release plus every job's LB1 one after another (a makespan
    some schedule achieves); an unbounded tail slot follows. Smaller slots tighten the bound
    and grow the LP. The column generation of :func:`lp_bound` starts from job ``j``'s columns
    up to ``LB1_j + job_window x`` the median LB1 past its release.
    """

    growth: float = 0.5
    first_slot_frac: float = 0.15
    max_slot_frac: float = 0.3
    job_window: float = 8.0

    def __post_init__(self) -> None:
        if not (0 < self.growth <= 10 and math.isfinite(self.growth)):
            raise ValueError(f"LPConfig.growth must be in (0, 10], got {self.growth}")
        if not (0 < self.first_slot_frac <= 1):
            raise ValueError(f"LPConfig.first_slot_frac must be in (0, 1], got {self.first_slot_frac}")
        if not (self.first_slot_frac <= self.max_slot_frac and math.isfinite(self.max_slot_frac)):
            raise ValueError(f"LPConfig.max_slot_frac must be finite and >= first_slot_frac, got {self.max_slot_frac}")
        if not (0 < self.job_window and math.isfinite(self.job_window)):
            raise ValueError(f"LPConfig.job_window must be finite and > 0, got {self.job_window}")


def slot_boundaries(release_s: np.ndarray, lb1_s: np.ndarray, config: LPConfig) -> np.ndarray:
    """The slot boundaries ``b_0 < ... < b_L`` of a workload (see :class:`LPConfig`); ``b_0`` is the first release."""
    releases = np.unique(release_s)
    median = float(np.median(lb1_s))
    horizon = releases[-1] + float(np.sum(lb1_s))
    gaps = np.diff(np.append(releases, horizon))
    step, cap = config.first_slot_frac * median, config.max_slot_frac * median
    # slot lengths after a release: ceil(1 / growth) of ``step``, then each 1 + growth times the one before up
    # to ``cap``, then ``cap`` until the next release; after the last release, once the busy period a job
    # window covers is over, they grow again up to the horizon
    n_linear = math.ceil(1 / config.growth)
    n_growing = max(0, math.ceil(math.log(cap / step) / math.log1p(config.growth)))
    growing = np.minimum(cap, step * (1 + config.growth) ** np.arange(1, n_growing + 1))
    lengths = np.concatenate([np.full(n_linear, step), growing])
    busy = max(float(gaps[:-1].max(initial=0.0)), config.job_window * median)
    n_flat = max(0, math.ceil((busy - float(lengths.sum())) / cap))
    offsets = np.concatenate([[0.0], np.cumsum(np.concatenate([lengths, np.full(n_flat, cap)]))])
    n_tail = max(0, math.ceil(math.log(max(gaps[-1], offsets[-1]) / offsets[-1]) / math.log1p(config.growth)))
    offsets = np.concatenate([offsets, offsets[-1] * (1 + config.growth) ** np.arange(1, n_tail + 1)])
    points = releases[:, None] + offsets[None, :]
    return np.unique(np.append(points[offsets[None, :] < gaps[:, None]], horizon))


@dataclass(frozen=True)
class LPSolution:
    """The LP bound of a workload: per-job completion-time bounds, the LP's size and what solving it took.

    ``n_vars`` / ``n_rows`` / ``n_nonzeros`` are the full LP's; ``n_active`` the columns of the
    last restricted LP of the column generation (:func:`lp_bound`), solved ``solves`` times.
    """

    avg_jct_s: float
    jct_s: tuple[float, ...]
    n_slots: int
    n_vars: int
    n_rows: int
    n_nonzeros: int
    n_active: int
    solves: int
    build_s: float
    solve_s: float


#: Reduced costs below minus this let a column into the restricted LP (objective units: median LB1 per job).
PRICE_TOL = 1e-9


@dataclass(frozen=True)
class _Problem:
    """The full LP: minimise ``cost @ v`` s.t. ``row_lower <= matrix @ v <= row_upper``, ``col_lower <= v <= col_upper``.

    Columns: the run times ``x`` (the first ``n_x``), then per job its tail fraction ``y`` and
    its completion time ``C``. ``seed`` marks the run-time columns the column generation starts
    from. ``matrix`` is column-wise (CSC).
    """

    cost: np.ndarray
    matrix: csc_array
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    n_x: int
    seed: np.ndarray


def lp_bound(times: RunTimes, config: LPConfig | None = None) -> LPSolution:
    """Solve the time-indexed LP relaxation of the module docstring (HiGHS); its optimum bounds the average JCT.

    By column generation on HiGHS' dual simplex (``highspy``, HiGHS' own Python interface,
    warm-started after each new batch of columns): the restricted LP holds the tails, the completion
    times and each job's fastest and, per GPU type, most GPU-efficient configurations in the slots
    up to ``LB1_j + job_window x`` the median LB1 past its release; after each solve every run-time
    column whose reduced cost is below ``-PRICE_TOL`` joins. When none is left the restricted
    optimum is the full LP's (LP duality).
    """
    config = config if config is not None else LPConfig()
    t0 = time.perf_counter()
    lb1 = times.lb1_s()
    n_jobs = times.n_jobs
    if not np.all(np.isfinite(lb1)):
        log.warning("%d job(s) cannot run on any configuration: the bound is infinite", int(np.sum(~np.isfinite(lb1))))
        return LPSolution(math.inf, (math.inf,) * n_jobs, 0, 0, 0, 0, 0, 0, time.perf_counter() - t0, 0.0)
    unit = max(float(np.median(lb1)), 1.0)  # a time unit of about a job's length keeps the coefficients near 1
    origin = float(times.release_s.min())
    bounds = (slot_boundaries(times.release_s, lb1, config) - origin) / unit
    problem = _build(times, bounds, (times.release_s - origin) / unit, lb1 / unit, unit, config.job_window)
    build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    completion, n_active, solves = _column_generation(problem, n_jobs)
    jct = completion * unit + origin - times.release_s
    return LPSolution(
        avg_jct_s=float(np.mean(jct)),
        jct_s=tuple(float(v) for v in jct),
        n_slots=len(bounds) - 1,
        n_vars=len(problem.cost),
        n_rows=problem.matrix.shape[0],
        n_nonzeros=problem.matrix.nnz,
        n_active=n_active,
        solves=solves,
        build_s=build_s,
        solve_s=time.perf_counter() - t1,
    )


def _column_generation(problem: _Problem, n_jobs: int) -> tuple[np.ndarray, int, int]:
    """(completion times, columns of the last restricted LP, solves) of the full LP's optimum."""
    active = problem.seed.copy()
    columns = np.concatenate([np.flatnonzero(active), problem.n_x + np.arange(2 * n_jobs)])
    first_c = int(active.sum()) + n_jobs  # the completion columns' position in the restricted LP
    highs = _highs()
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = len(columns), problem.matrix.shape[0]
    model.col_cost_ = problem.cost[columns]
    model.col_lower_, model.col_upper_ = _finite(problem.col_lower[columns]), _finite(problem.col_upper[columns])
    model.row_lower_, model.row_upper_ = _finite(problem.row_lower), _finite(problem.row_upper)
    restricted = problem.matrix[:, columns]
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_, model.a_matrix_.index_ = restricted.indptr, restricted.indices
    model.a_matrix_.value_ = restricted.data
    highs.passModel(model)
    x_rows = problem.matrix[:, : problem.n_x].T.tocsr()  # run-time columns as rows, for pricing
    solves = 0
    while True:
        highs.run()
        solves += 1
        status = highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"the bound LP was not solved: {highs.modelStatusToString(status)}")
        solution = highs.getSolution()
        reduced = -(x_rows @ np.asarray(solution.row_dual))  # run-time columns cost nothing themselves
        enter = np.flatnonzero(~active & (reduced < -PRICE_TOL))
        if len(enter) == 0:
            return np.asarray(solution.col_value)[first_c : first_c + n_jobs], int(active.sum()) + 2 * n_jobs, solves
        active[enter] = True
        new = problem.matrix[:, enter]
        highs.addCols(
            len(enter),
            problem.cost[enter],
            _finite(problem.col_lower[enter]),
            _finite(problem.col_upper[enter]),
            new.nnz,
            new.indptr[:-1].astype(np.int32),
            new.indices.astype(np.int32),
            new.data,
        )


def _highs() -> highspy.Highs:
    """A quiet HiGHS instance."""
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    return highs


def _finite(values: np.ndarray) -> np.ndarray:
    """Infinite bounds as HiGHS' infinity."""
    return np.clip(values, -highspy.kHighsInf, highspy.kHighsInf)


def _build(
    times: RunTimes, b: np.ndarray, release: np.ndarray, lb1: np.ndarray, unit: float, seed_window: float
) -> _Problem:
    """The full LP of the module docstring in units of ``unit`` (slot boundaries ``b``, releases, LB1 in those units)."""
    n_jobs = times.n_jobs
    usable = np.isfinite(times.run_s) & ~times.dominated()
    run = np.where(usable, times.run_s / unit, np.inf)
    overhead = times.overhead_s / unit
    first_progress = release + np.min(np.where(usable, overhead[None, :], np.inf), axis=1)
    lo, hi = b[:-1], b[1:]
    n_slots = len(lo)
    # run-time columns x_jkl: usable configuration, room in the slot after the configuration's first progress
    earliest = np.maximum(lo[None, None, :], (release[:, None] + overhead[None, :])[:, :, None])  # a_jkl
    room = hi[None, None, :] - earliest
    jj, kk, ll = np.nonzero(usable[:, :, None] & (room > 0))
    n_x = len(jj)
    inv_run = 1.0 / run[jj, kk]
    jobs = np.arange(n_jobs)
    col_x, col_y, col_c = np.arange(n_x), n_x + jobs, n_x + n_jobs + jobs
    # rows: one configuration at a time per (job, slot); capacity per (GPU type, slot); completion; work
    pair, pair_of = np.unique(jj * n_slots + ll, return_inverse=True)
    pair_rhs = np.clip(hi[pair % n_slots] - np.maximum(lo[pair % n_slots], first_progress[pair // n_slots]), 0.0, None)
    cap, cap_of = np.unique(times.type_index[kk] * n_slots + ll, return_inverse=True)
    cap_rhs = times.type_gpus[cap // n_slots] * (hi - lo)[cap % n_slots]
    done_row = len(pair) + len(cap)
    work_row = done_row + n_jobs
    p_min = np.min(run, axis=1)
    rows = np.concatenate(
        [pair_of, len(pair) + cap_of, done_row + jj, done_row + jobs, done_row + jobs, work_row + jj, work_row + jobs]
    )
    cols = np.concatenate([col_x, col_x, col_x, col_y, col_c, col_x, col_y])
    data = np.concatenate(
        [
            np.ones(n_x),  # sum_k x_jkl <= room after the first progress
            times.gpus[kk].astype(float),  # sum n_k x_jkl <= G_g x slot length
            earliest[jj, kk, ll] * inv_run,  # sum a x / p + b_L y - C <= -p_min / 2
            np.full(n_jobs, b[-1]),
            -np.ones(n_jobs),
            inv_run,  # sum x / p + y = 1
            np.ones(n_jobs),
        ]
    )
    matrix = coo_array((data, (rows, cols)), shape=(work_row + n_jobs, n_x + 2 * n_jobs)).tocsc()
    # the first columns: each job's fastest and per type most GPU-efficient configurations, early slots
    area = np.where(usable, times.gpus[None, :] * run, np.inf)
    first = np.zeros_like(usable)
    for t in range(len(times.gpu_types)):
        in_type = np.where(times.type_index[None, :] == t, area, np.inf)
        first[jobs, in_type.argmin(axis=1)] |= np.isfinite(in_type.min(axis=1))
    first[jobs, run.argmin(axis=1)] = True
    return _Problem(
        cost=np.concatenate([np.zeros(n_x + n_jobs), np.full(n_jobs, 1.0 / n_jobs)]),
        matrix=matrix,
        row_lower=np.concatenate([np.full(done_row + n_jobs, -np.inf), np.ones(n_jobs)]),
        row_upper=np.concatenate([pair_rhs, cap_rhs, -p_min / 2, np.ones(n_jobs)]),
        col_lower=np.concatenate([np.zeros(n_x + n_jobs), release + lb1]),
        col_upper=np.concatenate([room[jj, kk, ll], np.ones(n_jobs), np.full(n_jobs, np.inf)]),
        n_x=n_x,
        seed=first[jj, kk] & (lo[ll] < (release + lb1 + seed_window)[jj]),
    )


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on the average JCT of one workload (seconds): LB1 and the LP (with its size and cost in ``lp``).

    ``lb1_jct_s`` / ``lp_jct_s`` are the per-job bounds in workload order (a job's LP value is
    its completion-time variable, never below its LB1); ``overhead_class`` is the
    reconfiguration overhead class both bounds charge.
    """

    lb1_avg_jct_s: float
    lb1_jct_s: tuple[float, ...]
    lp: LPSolution
    overhead_class: str

    @property
    def lp_avg_jct_s(self) -> float:
        """The LP bound on the average JCT."""
        return self.lp.avg_jct_s

    @property
    def lp_jct_s(self) -> tuple[float, ...]:
        """The LP's per-job bounds."""
        return self.lp.jct_s

    @property
    def lp_solve_s(self) -> float:
        """Seconds HiGHS took, every solve of the column generation together."""
        return self.lp.solve_s


def workload_bounds(
    jobs: Sequence[JobSpec],
    cluster: ClusterSpec,
    truth: PerfModel,
    sim_config: SimConfig | None = None,
    lp: LPConfig | None = None,
) -> Bounds:
    """LB1 and the LP bound of ``jobs`` on ``cluster`` run by ``truth``, overheads of ``sim_config`` (default: pruned)."""
    if not jobs:
        raise ValueError("a bound needs at least one job")
    sim_config = sim_config if sim_config is not None else SimConfig()
    times = run_times(jobs, cluster, truth, sim_config)
    lb1 = times.lb1_s()
    return Bounds(
        float(np.mean(lb1)), tuple(float(v) for v in lb1), lp_bound(times, lp), str(sim_config.overhead_class)
    )
