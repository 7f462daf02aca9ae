"""Lower bounds on the average JCT: LB1 and the LP sit below the brute-force optimum, which sits below every policy.

The brute force (:func:`brute_force`) searches the simulator's own decision tree on toy clusters
with one node per GPU type. At every decision point (arrivals and completions, the only points
where a policy is asked) it tries every combination of per-job choices:

- a pending job: wait, or start on any (GPU type, GPU count, stage count) whose grid the truth
  calls feasible;
- a job holding GPUs: keep, preempt, restart in place (the same grid with another plan: the
  overhead again), or move to any other feasible grid;

subject to each type's GPUs. With one node per type a (type, count) has exactly one placement,
and grids of equal iteration time on the same shape differ only by the restart they cost (the
restart-in-place choice), so these are all the decisions a policy can take there, up to
equivalence. Branch and bound prunes a subtree only when a valid lower bound on its average JCT
(finished JCTs, and for every other job ``now`` plus its fastest way to finish what is left, or
LB1 before its release) reaches the best complete episode found so far; children are explored
best-bound first. No policy result seeds the search.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import math
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from arena_gym.cluster import PRESETS
from arena_gym.harness.bounds import LPConfig, _build, lp_bound, run_times, slot_boundaries, workload_bounds
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.records import EventKind
from arena_gym.registry import make_policy, policy_registry
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    Decision,
    GpuType,
    Grid,
    JobSpec,
    JobStatus,
    NodeGroup,
    OverheadModel,
    PerfModel,
    Placement,
    Plan,
    ResourceShape,
    Snapshot,
    StagePlan,
)
from tests.helpers import GPT, MOE, job, table_model, uniform_model

#: Two GPU types of one 2-GPU node each: every (type, count) has one placement.
TOY = ClusterSpec("toy", (NodeGroup(GpuType("a40"), 1, 2), NodeGroup(GpuType("a10"), 1, 2)))
#: One type, one 2-GPU node.
ONE_NODE = ClusterSpec("one", (NodeGroup(GpuType("a40"), 1, 2),))
PERF = uniform_model(counts=(1, 2), models=(GPT, MOE))
#: Arena's pruned class as in the artifact, a smaller unpruned one so that restarts stay comparable to the jobs.
OVERHEADS = OverheadModel(full_per_gpu_s=30.0, full_cap_s=120.0)
CLASSES = ("pruned", "full")
PRESET_TINY = PRESETS["tiny"]


def sim_config(overhead_class: str) -> SimConfig:
    return SimConfig(overhead=OVERHEADS, overhead_class=overhead_class)


# ---------------------------------------------------------------------- brute force
def _options(snapshot: Snapshot, truth: PerfModel, spec: JobSpec) -> list[Allocation]:
    """Every feasible allocation of ``spec`` on the cluster (one placement per shape), one grid per distinct time."""
    out = []
    for group in snapshot.cluster.groups:
        assert group.nodes == 1, "the brute force enumerates placements only on one-node groups"
        n = 1
        while n <= group.gpus_per_node:
            shape = ResourceShape(group.gpu_type, 1, n)
            seen: set[float] = set()
            stages = 1
            while stages <= n:
                grid = Grid(shape, stages)
                t = truth.grid_iter_time(spec.model, spec.global_batch, grid)
                if math.isfinite(t) and t > 0 and t not in seen:
                    seen.add(t)
                    out.append(Allocation(grid, Placement(group.gpu_type, (0,), n)))
                stages *= 2
            n *= 2
    return out


def _restart(alloc: Allocation) -> Allocation:
    """The same grid and placement with another plan: applying it restarts the job in place."""
    if alloc.plan is not None:
        return dataclasses.replace(alloc, plan=None)
    n = alloc.num_gpus
    return dataclasses.replace(alloc, plan=Plan((StagePlan(0, 1, n, 1),), 1))


def _choices(snapshot: Snapshot, truth: PerfModel) -> list[list[tuple[str, Allocation | None]]]:
    """Per job of the snapshot: (what, allocation held afterwards) for each of its choices."""
    per_job = []
    for view in snapshot.pending:
        per_job.append([("wait", None)] + [("start", a) for a in _options(snapshot, truth, view.spec)])
    for view in snapshot.running:
        current = view.allocation
        assert current is not None
        moves = [("move", a) for a in _options(snapshot, truth, view.spec) if a.grid != current.grid]
        per_job.append([("keep", current), ("preempt", None), ("restart", _restart(current)), *moves])
    return per_job


def _decisions(snapshot: Snapshot, truth: PerfModel) -> list[Decision]:
    """Every combination of per-job choices that fits each type's GPUs, as decisions."""
    views = [*snapshot.pending, *snapshot.running]
    capacity = {g.gpu_type: g.total_gpus for g in snapshot.cluster.groups}
    out = []
    for combo in itertools.product(*_choices(snapshot, truth)):
        used = dict.fromkeys(capacity, 0)
        for _, alloc in combo:
            if alloc is not None:
                used[alloc.placement.gpu_type] += alloc.num_gpus
        if any(used[t] > capacity[t] for t in capacity):
            continue
        allocations = tuple(
            (v.job_id, a) for v, (what, a) in zip(views, combo) if what in ("start", "restart", "move") and a
        )
        preemptions = tuple(v.job_id for v, (what, _) in zip(views, combo) if what == "preempt")
        out.append(Decision(allocations, preemptions))
    return out


class _SharingPickler(pickle.Pickler):
    """Pickles a backend, naming the objects of ``shared`` by their index instead of copying them."""

    def __init__(self, file: io.BytesIO, shared: list[object]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.ids = {id(obj): i for i, obj in enumerate(shared)}

    def persistent_id(self, obj: object) -> int | None:
        return self.ids.get(id(obj))


class _SharingUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, shared: list[object]) -> None:
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: int) -> object:
        return self.shared[pid]


def _frozen_state(backend: SimBackend, shared: list[object]) -> bytes:
    """The backend's state as bytes (a fork is cheaper thawed from them than deep-copied)."""
    buffer = io.BytesIO()
    _SharingPickler(buffer, shared).dump(backend)
    return buffer.getvalue()


def _thaw(frozen: bytes, shared: list[object]) -> SimBackend:
    """A fresh, independent backend in the frozen state."""
    return _SharingUnpickler(io.BytesIO(frozen), shared).load()


class BruteForce:
    """The smallest average JCT of any decision sequence at the simulator's decision points (see the module)."""

    def __init__(self, cluster: ClusterSpec, truth: PerfModel, config: SimConfig) -> None:
        self.cluster, self.truth, self.config = cluster, truth, config
        self.best = math.inf
        self.nodes = 0

    def solve(self, jobs: list[JobSpec]) -> float:
        """The optimum over the whole tree."""
        self.jobs = {j.job_id: j for j in jobs}
        self.fastest = self._fastest(jobs)
        backend = SimBackend(self.cluster, self.truth, config=self.config)
        snapshot = backend.reset(jobs)
        self._search(backend, snapshot)
        return self.best

    def _fastest(self, jobs: list[JobSpec]) -> dict:
        """Per job: (overhead, iteration time, GPU count) of every feasible grid."""
        out = {}
        for spec in jobs:
            options = []
            for group in self.cluster.groups:
                n = 1
                while n <= group.gpus_per_node:
                    shape = ResourceShape(group.gpu_type, 1, n)
                    for stages in (s for s in (1, 2, 4, 8, 16) if s <= n):
                        t = self.truth.grid_iter_time(spec.model, spec.global_batch, Grid(shape, stages))
                        if math.isfinite(t) and t > 0:
                            options.append((self.config.overhead_s(n), t, n))
                    n *= 2
            out[spec.job_id] = options
        return out

    def _bound(self, backend: SimBackend, snapshot: Snapshot | None) -> float:
        """A lower bound on the average JCT of every episode through this state (exact once it has ended)."""
        if snapshot is None:
            metrics = compute_metrics(backend.record("brute-force"))
            return metrics["avg_jct_s"] if metrics["jobs_finished"] == len(self.jobs) else math.inf
        now = snapshot.now
        done, ends, areas = 0.0, [], []
        finished = {e.job_id: e.time for e in backend.events if e.kind is EventKind.FINISH}
        for job_id, spec in self.jobs.items():
            if job_id in finished:
                done += finished[job_id] - spec.submit_time
                continue
            view = backend.state.view(job_id)
            left = view.remaining_iterations(now)
            start = max(now, spec.submit_time)
            end = min(start + o + left * t for o, t, _ in self.fastest[job_id])
            if view.status in (JobStatus.RUNNING, JobStatus.RECONFIGURING) and view.allocation is not None:
                t_cur = self.truth.grid_iter_time(spec.model, spec.global_batch, view.allocation.grid)
                end = min(end, max(now, view.run_start or now) + left * t_cur)
            ends.append(end - spec.submit_time)
            areas.append(left * min(n * t for _, t, n in self.fastest[job_id]))
        # the cluster does at most ``gpus`` GPU-seconds of work per second: the i-th of the remaining jobs to
        # finish does so no earlier than the i smallest areas take at that rate
        fluid = np.cumsum(np.sort(areas)) / self.cluster.total_gpus + now
        pending_release = sum(self.jobs[j].submit_time for j in self.jobs if j not in finished)
        return (done + max(sum(ends), float(np.sum(fluid)) - pending_release)) / len(self.jobs)

    def _search(self, backend: SimBackend, snapshot: Snapshot | None) -> None:
        self.nodes += 1
        if snapshot is None:
            self.best = min(self.best, self._bound(backend, None))
            return
        children = []
        # the forks share what never changes: models, settings, job specs and the logged events
        shared = [self.truth, self.cluster, self.config, *self.jobs.values(), *backend.events]
        frozen = _frozen_state(backend, shared)
        for decision in _decisions(snapshot, self.truth):
            child = _thaw(frozen, shared)
            child.apply(decision)
            child_snapshot = child.advance()
            children.append((self._bound(child, child_snapshot), len(children), child, child_snapshot))
        children.sort(key=lambda c: (c[0], c[1]))
        for bound, _, child, child_snapshot in children:
            if bound >= self.best * (1 - 1e-12):
                break
            self._search(child, child_snapshot)


def brute_force(jobs: list[JobSpec], cluster: ClusterSpec, truth: PerfModel, config: SimConfig) -> float:
    """The optimal average JCT of ``jobs`` in the simulator (see :class:`BruteForce`)."""
    return BruteForce(cluster, truth, config).solve(jobs)


def policy_jct(name: str, jobs: list[JobSpec], cluster: ClusterSpec, truth: PerfModel) -> tuple[float, str]:
    """A registered policy's average JCT on the simulator, charged its own overhead class."""
    policy = make_policy(name, 0)
    backend = SimBackend(cluster, truth, config=sim_config(str(policy.ap_search)))
    metrics = compute_metrics(run_episode(backend, policy, jobs))
    assert metrics["jobs_finished"] == len(jobs), f"{name} left jobs unfinished"
    return metrics["avg_jct_s"], str(policy.ap_search)


#: Toy workloads: three jobs on TOY, four on ONE_NODE. They request shapes whose reference times ship with the
#: belief of the search policies, so that every registered policy can run them.
TOY_WORKLOADS = {
    "toy-staggered": (
        TOY,
        [job("a", 0.0, 300, "a40", 2), job("b", 100.0, 30, "a10", 2), job("c", 150.0, 80, "a40", 1)],
    ),
    "toy-burst": (
        TOY,
        [job("a", 0.0, 50, "a40", 1), job("b", 0.0, 50, "a40", 1), job("c", 0.0, 200, "a10", 2)],
    ),
    "one-node-contended": (
        ONE_NODE,
        [
            job("a", 0.0, 120, "a40", 2),
            job("b", 0.0, 60, "a40", 1),
            job("c", 20.0, 200, "a40", 2),
            job("d", 90.0, 40, "a40", 1),
        ],
    ),
}
#: Relative slack for solver tolerances when comparing a bound with an exact value.
TOL = 1e-6


@pytest.mark.parametrize("overhead_class", CLASSES)
@pytest.mark.parametrize("name", list(TOY_WORKLOADS))
def test_lp_below_brute_force_below_every_policy(name: str, overhead_class: str) -> None:
    cluster, jobs = TOY_WORKLOADS[name]
    bounds = workload_bounds(jobs, cluster, PERF, sim_config(overhead_class))
    optimum = brute_force(jobs, cluster, PERF, sim_config(overhead_class))
    assert bounds.lb1_avg_jct_s <= bounds.lp_avg_jct_s * (1 + TOL)
    assert bounds.lp_avg_jct_s <= optimum * (1 + TOL)
    charged = 0
    for policy in policy_registry().names():
        value, paid = policy_jct(policy, jobs, cluster, PERF)
        if paid == overhead_class:
            charged += 1
            assert optimum <= value * (1 + TOL), f"{policy} ({value:.2f} s) beat the brute force ({optimum:.2f} s)"
    assert charged >= 3  # each class is paid by several registered policies


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 200), st.integers(10, 200), st.booleans(), st.sampled_from(["a40", "a10"])),
        min_size=2,
        max_size=3,
    )
)
def test_lp_never_exceeds_the_brute_force_optimum(specs: list[tuple[int, int, bool, str]]) -> None:
    jobs = [
        job(f"j{i}", float(submit), iters, gpu_type, 1, model=MOE if moe else GPT)
        for i, (submit, iters, moe, gpu_type) in enumerate(specs)
    ]
    config = sim_config("pruned")
    bounds = workload_bounds(jobs, TOY, PERF, config)
    assert bounds.lp_avg_jct_s <= brute_force(jobs, TOY, PERF, config) * (1 + TOL)


@pytest.mark.parametrize("submit", [0.0, 37.5])
def test_single_job_bound_is_its_best_run(submit: float) -> None:
    spec = job("solo", submit, 150, "a10", 1, model=MOE)
    config = sim_config("pruned")
    bounds = workload_bounds([spec], TOY, PERF, config)
    # by hand: a40 x 2 is the fastest (2 s / sqrt 2 per iteration), after its 20 s overhead
    best = 20.0 + 150 * 2.0 / math.sqrt(2)
    assert bounds.lb1_avg_jct_s == pytest.approx(best, rel=1e-12)
    assert bounds.lp_avg_jct_s == pytest.approx(best, rel=TOL)
    # and the simulator reaches it by starting the job there at once
    backend = SimBackend(TOY, PERF, config=config)
    snapshot = backend.reset([spec])
    assert snapshot is not None
    best_alloc = Allocation(Grid(ResourceShape(GpuType("a40"), 1, 2), 1), Placement(GpuType("a40"), (0,), 2))
    backend.apply(Decision(((spec.job_id, best_alloc),)))
    while backend.advance() is not None:
        pass
    assert compute_metrics(backend.record("by-hand"))["avg_jct_s"] == pytest.approx(best, rel=1e-12)


def test_lp_sees_contention_that_lb1_ignores() -> None:
    # four equal jobs on one GPU: alone each takes 10 s + 100 s; one after another they average 275 s
    single = ClusterSpec("single", (NodeGroup(GpuType("a40"), 1, 1),))
    perf = table_model({(GPT, 128, "a40", 1, 1): 1.0})
    jobs = [job(f"j{i}", 0.0, 100, "a40", 1) for i in range(4)]
    config = sim_config("pruned")
    bounds = workload_bounds(jobs, single, perf, config)
    assert bounds.lb1_avg_jct_s == pytest.approx(110.0)
    assert bounds.lp_avg_jct_s >= 1.9 * bounds.lb1_avg_jct_s
    # with fine slots the LP reaches the mean-busy-time bound of sharing the GPU (250 s), and more
    fine = workload_bounds(jobs, single, perf, config, LPConfig(growth=0.05, first_slot_frac=0.01))
    assert fine.lp_avg_jct_s >= 250.0
    fcfs = compute_metrics(run_episode(SimBackend(single, perf, config=config), make_policy("fcfs"), jobs))
    assert fcfs["avg_jct_s"] == pytest.approx(275.0)
    assert bounds.lp_avg_jct_s <= fine.lp_avg_jct_s <= fcfs["avg_jct_s"]
    assert all(lp >= lb1 * (1 - TOL) for lp, lb1 in zip(bounds.lp_jct_s, bounds.lb1_jct_s))


def test_lp_is_never_below_lb1_per_job() -> None:
    rng = np.random.default_rng(3)
    perf = uniform_model(counts=(1, 2, 4, 8))
    jobs = [
        job(f"j{i}", float(t), int(rng.integers(20, 2000)), "a40", 1, model=GPT if rng.random() < 0.5 else MOE)
        for i, t in enumerate(np.sort(rng.integers(0, 4000, 30)))
    ]
    bounds = workload_bounds(jobs, PRESET_TINY, perf, sim_config("pruned"))
    assert all(lp >= lb1 * (1 - TOL) for lp, lb1 in zip(bounds.lp_jct_s, bounds.lb1_jct_s))
    assert bounds.lp_avg_jct_s > bounds.lb1_avg_jct_s  # 30 jobs on 8 GPUs contend
    lp = bounds.lp
    assert 0 < lp.n_active <= lp.n_vars and lp.n_rows > 0 and lp.n_nonzeros >= lp.n_vars
    assert lp.solves >= 1 and bounds.lp_solve_s == lp.solve_s >= 0 and bounds.overhead_class == "pruned"


def test_infeasible_job_makes_the_bound_infinite() -> None:
    perf = table_model({(GPT, 128, "a40", 1, 1): 1.0})  # MoE runs nowhere
    bounds = workload_bounds([job("a", 0.0, 10, "a40", 1), job("b", 0.0, 10, "a40", 1, model=MOE)], TOY, perf)
    assert math.isinf(bounds.lb1_avg_jct_s) and math.isinf(bounds.lp_avg_jct_s)


def test_slot_boundaries_start_at_releases_and_cover_a_serial_schedule() -> None:
    release = np.array([0.0, 50.0, 50.0, 400.0])
    lb1 = np.array([100.0, 30.0, 80.0, 200.0])
    b = slot_boundaries(release, lb1, LPConfig(growth=0.5, first_slot_frac=0.1))
    assert np.all(np.diff(b) > 0)
    assert set(release) <= set(b)
    assert b[0] == 0.0 and b[-1] == pytest.approx(400.0 + lb1.sum())
    # after a release: d = 0.1 x median LB1 = 9 s steps, then each slot 1.5 times the one before
    assert b[1] - b[0] == pytest.approx(9.0)
    after = b[(b > 400.0)]
    steps = np.diff(np.concatenate([[400.0], after[:-1]]))
    assert steps[1] == pytest.approx(9.0) and steps[2] == pytest.approx(13.5) and steps[3] == pytest.approx(20.25)
    # up to max_slot_frac x median LB1 (27 s by default)
    assert steps[4] == pytest.approx(27.0) and np.diff(b).max() == pytest.approx(27.0)


def test_finer_slots_tighten_the_lp() -> None:
    rng = np.random.default_rng(5)
    jobs = [
        job(f"j{i}", float(t), int(rng.integers(50, 600)), "a40", 1) for i, t in enumerate(rng.integers(0, 600, 12))
    ]
    coarse = lp_bound(
        run_times(jobs, TOY, PERF, sim_config("pruned")), LPConfig(growth=2.0, first_slot_frac=0.5, max_slot_frac=4.0)
    )
    fine = lp_bound(run_times(jobs, TOY, PERF, sim_config("pruned")), LPConfig(growth=0.1, first_slot_frac=0.02))
    assert fine.n_slots > coarse.n_slots
    assert fine.avg_jct_s >= coarse.avg_jct_s * (1 - TOL)


def test_workload_bounds_needs_jobs() -> None:
    with pytest.raises(ValueError, match="at least one job"):
        workload_bounds([], TOY, PERF)


def test_column_generation_reaches_the_full_lp_optimum() -> None:
    rng = np.random.default_rng(11)
    perf = uniform_model(counts=(1, 2, 4))
    jobs = [
        job(f"j{i}", float(t), int(rng.integers(50, 1500)), "a40", 1, model=GPT if rng.random() < 0.5 else MOE)
        for i, t in enumerate(np.sort(rng.integers(0, 3000, 14)))
    ]
    times = run_times(jobs, PRESET_TINY, perf, sim_config("pruned"))
    solution = lp_bound(times)
    assert solution.n_active < solution.n_vars  # the restricted LP ended smaller than the full one
    # the full LP, every column at once, through scipy's linprog
    lb1 = times.lb1_s()
    unit, origin = float(np.median(lb1)), float(times.release_s.min())
    slots = (slot_boundaries(times.release_s, lb1, LPConfig()) - origin) / unit
    full = _build(times, slots, (times.release_s - origin) / unit, lb1 / unit, unit, LPConfig().job_window)
    upper = np.isinf(full.row_lower)
    result = linprog(
        full.cost,
        A_ub=full.matrix[upper],
        b_ub=full.row_upper[upper],
        A_eq=full.matrix[~upper],
        b_eq=full.row_upper[~upper],
        bounds=np.column_stack([full.col_lower, full.col_upper]),
        method="highs",
    )
    assert result.status == 0
    full_avg = (result.fun - float(np.mean((times.release_s - origin) / unit))) * unit
    assert solution.avg_jct_s == pytest.approx(full_avg, rel=1e-7)
