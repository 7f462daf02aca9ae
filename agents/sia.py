"""Sia (SOSP'23), as adapted by the Arena artifact: a goodput MILP over GPU type and count per job.

Clean-room reimplementation from the published description and docs/arena.md §8.4,
solved with HiGHS through :mod:`agents.milp`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.common import AssignmentJob, AssignmentPolicy, TypeCount, configure, holding, room_with
from agents.milp import MilpConfig
from arena_gym.types import GPU_COUNTS, Allocation, JobId, JobStatus, JobView, Snapshot


@dataclass(frozen=True)
class SiaConfig:
    """Settings of :class:`Sia` (defaults from the artifact's adaptation, docs/arena.md §8.4).

    ``fairness_p``: utility = normalised goodput ** p. ``restart_penalty_s`` and ``age_clip_s``:
    a running job's re-allocation factor is ``(a - r * restart_penalty_s) / (a + restart_penalty_s)``
    with ``a`` = its age since first start clipped at ``age_clip_s`` ("clip 3,000") and ``r`` its
    reconfiguration count; configurations other than its current one are worth ``factor x
    utility`` (never below 0). ``unallocated_penalty``: objective cost of leaving a job without
    GPUs. ``max_migrations``: running jobs whose configuration may change per event.
    ``max_gpus``: largest count considered. ``max_pending`` / ``max_movable``: jobs per solve
    (pending in submission order among those that fit; running jobs with the largest gain
    first), which keeps the MILP small. ``relax``: placement may spread a job over more nodes when its best locality
    does not fit.
    """

    fairness_p: float = 0.5
    restart_penalty_s: float = 600.0
    age_clip_s: float = 3000.0
    unallocated_penalty: float = 1e3
    max_migrations: int = 3
    max_gpus: int = GPU_COUNTS[-1]
    max_pending: int = 16
    max_movable: int = 6
    relax: bool = True
    milp: MilpConfig = field(default_factory=MilpConfig)

    def __post_init__(self) -> None:
        if not 0 < self.fairness_p <= 1:
            raise ValueError(f"fairness_p must be in (0, 1], got {self.fairness_p}")
        if self.restart_penalty_s < 0 or not self.age_clip_s > 0 or self.unallocated_penalty < 0:
            raise ValueError("restart_penalty_s and unallocated_penalty must be >= 0, age_clip_s > 0")
        if self.max_migrations < 0 or self.max_pending < 1 or self.max_movable < 0:
            raise ValueError("max_migrations and max_movable must be >= 0, max_pending >= 1")
        if self.max_gpus not in GPU_COUNTS:
            raise ValueError(f"max_gpus must be one of {GPU_COUNTS}, got {self.max_gpus}")


class BootstrapThroughput:
    """Sia's bootstrapped throughput model over the data-parallel estimates.

    Sia profiles each job on the smallest configuration of every GPU type when it arrives
    and learns the others online. Here: the DP throughput (``perf.dp_iter_time``) is known
    exactly at each type's smallest DP-feasible count and at every (type, count) the job has
    been seen running on; any other feasible count ``n`` is extrapolated linearly from the
    largest known count ``k < n`` of that type (``thr(k) * n / k``), and becomes exact once
    the job runs there. Feasibility (the DP memory rule) is known up front.
    """

    def __init__(self) -> None:
        self._seen: dict[JobId, set[TypeCount]] = {}
        self._last: dict[JobId, Allocation] = {}  # allocation last recorded per job

    def reset(self) -> None:
        """Forget every observation."""
        self._seen.clear()
        self._last.clear()

    def observe(self, view: JobView) -> None:
        """Record the configuration a job is running on (not while it is still reconfiguring)."""
        alloc = view.allocation
        if view.status is JobStatus.RUNNING and alloc is not None and self._last.get(view.job_id) is not alloc:
            self._last[view.job_id] = alloc
            self._seen.setdefault(view.job_id, set()).add(TypeCount(alloc.shape.gpu_type, alloc.num_gpus))

    def version(self, job_id: JobId) -> int:
        """How many configurations of the job have been observed (changes when the model learns)."""
        return len(self._seen.get(job_id, ()))

    def throughput(self, view: JobView, config: TypeCount, table: Mapping[TypeCount, float]) -> float:
        """Estimated samples/s of ``view`` on ``config``; ``table``: its DP times per feasible configuration."""
        gpu_type, n = config
        counts = [k for t, k in table if t == gpu_type and k <= n]
        seen = self._seen.get(view.job_id, set())
        k = max(k for k in counts if k == counts[0] or (gpu_type, k) in seen)
        return view.spec.global_batch / table[(gpu_type, k)] * n / k


class _Valuation:
    """A job's utilities under one state of the throughput model, with its one-step moves memoised."""

    def __init__(self, version: int, utilities: dict[TypeCount, float]) -> None:
        self.version = version
        self.utilities = utilities
        self._steps: dict[TypeCount, list[tuple[TypeCount, float]]] = {}

    def steps(self, current: TypeCount) -> list[tuple[TypeCount, float]]:
        """Configurations one step from ``current`` (see :func:`_step`), highest utility first."""
        out = self._steps.get(current)
        if out is None:
            out = self._steps[current] = sorted(
                ((c, u) for c, u in self.utilities.items() if _step(c, current)), key=lambda cu: (-cu[1], cu[0])
            )
        return out


class Sia(AssignmentPolicy):
    """Goodput-optimised, heterogeneity-aware allocation of GPU type and count by MILP, non-preemptive.

    Decides with: data-parallel-only estimates (``perf.dp_iter_time``, through Sia's
    bootstrapped throughput model, :class:`BootstrapThroughput`; ``inf`` = ruled out by the DP
    memory rule, never chosen). Executes with: the simulator's ground truth (the AP plan of
    the chosen shape).

    Per job and configuration (type, count in 1..16): goodput G = throughput (statistical
    efficiency 1, the batch is fixed); normalised goodput ``N_min * G / min G`` over the job's
    feasible configurations (``N_min``: its smallest feasible count); value
    ``(normalised goodput) ** p``; for a running job any other configuration is scaled by its
    re-allocation factor; a pending job left out costs ``unallocated_penalty``. The assignment
    outline (:class:`agents.common.AssignmentPolicy`) picks the configurations (MILP, HiGHS):
    running jobs keep one (non-preemptive) and at most ``max_migrations`` of them change, each
    by one step (count halved or doubled, or a type change at half, the same or double the
    count); pending jobs take any configuration that fits. The answer is placed by packing; a
    change that cannot be placed is dropped, a job that cannot be placed waits.
    """

    clairvoyant = False  # goodput only

    def __init__(self, name: str = "sia", config: SiaConfig | None = None, **overrides: Any) -> None:
        super().__init__(name)
        self.config = configure(type(self).__name__, SiaConfig, config, overrides)
        self.model = BootstrapThroughput()
        self._valuations: dict[JobId, _Valuation] = {}

    def reset(self) -> None:
        """Forget estimates, observations and the solve count."""
        super().reset()
        self.model.reset()

    def _forget(self) -> None:
        """Forget the jobs' valuations."""
        self._valuations.clear()

    # ------------------------------------------------------------------ valuation
    def utilities(self, snapshot: Snapshot, view: JobView) -> dict[TypeCount, float]:
        """``(N_min * G / min G) ** p`` for every feasible configuration of the job (empty if none)."""
        return self._valuation(snapshot, view).utilities

    def _valuation(self, snapshot: Snapshot, view: JobView) -> _Valuation:
        version = self.model.version(view.job_id)
        cached = self._valuations.get(view.job_id)
        if cached is not None and cached.version == version:
            return cached
        dp_table = self.belief.dp.configs(snapshot.cluster, view.spec)
        goodput = {
            c: self.model.throughput(view, c, dp_table)
            for c in self.belief.configs(snapshot.cluster, view.spec)
            if c[1] <= self.config.max_gpus
        }
        utilities = {}
        if goodput:
            n_min = min(n for _, n in goodput)
            g_min = min(goodput.values())
            utilities = {c: (n_min * g / g_min) ** self.config.fairness_p for c, g in goodput.items()}
        valuation = self._valuations[view.job_id] = _Valuation(version, utilities)
        return valuation

    def reallocation_factor(self, view: JobView, now: float) -> float:
        """``(age - restarts * penalty) / (age + penalty)``, age clipped at ``age_clip_s``, never below 0."""
        cfg = self.config
        age = min(now - (view.first_start if view.first_start is not None else now), cfg.age_clip_s)
        return max(0.0, (age - view.reconfigurations * cfg.restart_penalty_s) / (age + cfg.restart_penalty_s))

    # ------------------------------------------------------------------ decide
    def _problem(
        self, snapshot: Snapshot, free: dict[str, int]
    ) -> tuple[list[AssignmentJob], list[AssignmentJob]] | None:
        """The pending jobs with a configuration that fits and the running jobs offered a one-step change."""
        for view in snapshot.running:
            self.model.observe(view)
        movers = self._movable(snapshot, free)
        waiting = self._pending(snapshot, room_with(free, (job.current for job in movers)))
        if not waiting:  # moves that gain nothing only ever make room for waiting jobs
            movers = [j for j in movers if max(j.values.values()) > j.values[j.current]]
            if not movers:
                return None
        return waiting, movers

    def _move_order(self, changes: list[tuple[AssignmentJob, TypeCount]]) -> Iterable[tuple[AssignmentJob, TypeCount]]:
        """Shrinks first, then type changes, then grows (by the change of GPU count), ties by job id."""
        return sorted(changes, key=lambda jc: (jc[1][1] - jc[0].current[1], jc[0].job_id))

    def _movable(self, snapshot: Snapshot, free: dict[str, int]) -> list[AssignmentJob]:
        """Running jobs offered a one-step change that fits the free GPUs (factor > 0); largest gain first."""
        if self.config.max_migrations == 0:
            return []
        ranked = []
        for view in snapshot.running:
            if view.status is not JobStatus.RUNNING:
                continue
            factor = self.reallocation_factor(view, snapshot.now)
            if factor <= 0:
                continue
            current = holding(view)
            valuation = self._valuation(snapshot, view)
            u_now = valuation.utilities.get(current)
            if u_now is None:
                continue
            best = next((u for c, u in valuation.steps(current) if _fits(c, current, free)), None)
            if best is not None:
                ranked.append((u_now - factor * best, view.spec.submit_time, view.job_id, factor, current, valuation))
        ranked.sort(key=lambda r: r[:3])
        out = []
        for _, _, job_id, factor, current, valuation in ranked[: self.config.max_movable]:
            values = {c: factor * u for c, u in valuation.steps(current) if _fits(c, current, free)}
            values[current] = valuation.utilities[current]
            out.append(AssignmentJob(job_id, values, current))
        return out

    def _pending(self, snapshot: Snapshot, room: dict[str, int]) -> list[AssignmentJob]:
        """The first ``max_pending`` pending jobs (submission order) with a configuration that fits the room."""
        out = []
        for view in snapshot.pending:  # the queue is in submission order
            values = {
                c: u + self.config.unallocated_penalty
                for c, u in self.utilities(snapshot, view).items()
                if c[1] <= room[c[0]]
            }
            if values:
                out.append(AssignmentJob(view.job_id, values))
                if len(out) == self.config.max_pending:
                    break
        return out


def _fits(config: TypeCount, current: TypeCount, free: Mapping[str, int]) -> bool:
    """Whether a running job on ``current`` could switch to ``config`` with the free GPUs (its own count back)."""
    extra = config[1] - current[1] if config[0] == current[0] else config[1]
    return extra <= free[config[0]]


def _step(config: TypeCount, current: TypeCount) -> bool:
    """One step from ``current``: halve or double the count on its type, or change type at half, the same or double."""
    ratio = config[1] / current[1]
    return ratio in (0.5, 2.0) or (config[0] != current[0] and ratio == 1.0)
