"""The ClusterBackend contract, for every backend built on the shared cluster core.

Each test takes a backend from ``BACKENDS``: invariants after every decision (random, often
invalid ones, and real policies), atomic rejection of invalid decisions, snapshots that go stale
when the backend moves on, the episode ending at its last real event, and metrics that agree with
the backend's own job accounting. The simulator runs on the two-type ``tiny`` cluster; the live
backend on a one-type testbed (2 nodes x 2 a40), its jobs as fake generations
(:mod:`tests.fake_live`) of the dense models the runner trains. A backend joins by adding its
case to ``BACKENDS``; backends expose their :class:`arena_gym.core.ClusterState` as ``state``.
The last tests run one trace on both backends, on the same one-type cluster, and
compare when they decide: the same points at the same times, but where a live job moved mid-step
frees its GPUs at the end of that step.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.fcfs import FCFS
from agents.srtf import SRTF
from arena_gym.cluster import PRESETS
from arena_gym.loop import run_episode
from arena_gym.metrics import WALL_CLOCK_KEYS, compute_metrics, job_outcomes, timeline
from arena_gym.protocols import ClusterBackend, InvalidDecision
from arena_gym.records import EventKind
from arena_gym.registry import make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    Decision,
    GpuType,
    Grid,
    JobStatus,
    JobViews,
    ModelRef,
    NodeGroup,
    Placement,
    ResourceShape,
    Snapshot,
)
from tests.fake_live import fake_live_backend
from tests.helpers import GPT, MOE, CheckedBackend, job, uniform_model

TINY = PRESETS["tiny"]
A40 = ClusterSpec("a40-2x2", (NodeGroup(GpuType("a40"), 2, 2),))
PERF = uniform_model()


def make_sim(overhead_class: str, round_s: float | None, run_dir: Path) -> ClusterBackend:
    """The simulator on ``tiny``."""
    return SimBackend(TINY, PERF, config=SimConfig(round_s=round_s, overhead_class=overhead_class))


def make_live(overhead_class: str, round_s: float | None, run_dir: Path) -> ClusterBackend:
    """The live backend on fake generations that step and restart as the simulator would."""
    return fake_live_backend(A40, PERF, run_dir, SimConfig(round_s=round_s, overhead_class=overhead_class))


@dataclasses.dataclass(frozen=True)
class Case:
    """A backend for (overhead class, decision round or None, a directory of its own), its cluster, the GPU types
    and models of its jobs, and how many random episodes it runs."""

    make: Callable[[str, float | None, Path], ClusterBackend]
    cluster: ClusterSpec
    types: tuple[str, ...]
    models: tuple[ModelRef, ...]
    examples: int  # random episodes per run (a live backend's are dearer: every stop writes a checkpoint)


BACKENDS: dict[str, Case] = {
    "sim": Case(make_sim, TINY, ("a40", "a10"), (GPT, MOE), 25),
    "live": Case(make_live, A40, ("a40",), (GPT,), 10),
}


@pytest.fixture(params=sorted(BACKENDS))
def case(request) -> Case:
    return BACKENDS[request.param]


def random_decision(snap: Snapshot, rng: np.random.Generator) -> Decision:
    """Allocations and preemptions drawn at random: many break invariants on purpose."""
    allocs, preempt = [], []
    views = [*snap.pending, *snap.running]
    rng.shuffle(views)
    for view in views[: rng.integers(0, 4)]:
        if view.allocation is not None and rng.random() < 0.3:
            preempt.append(view.job_id)
            continue
        gpu_type = GpuType(str(rng.choice(["a40", "a10", "a40"])))
        per_node = int(rng.choice([1, 2]))
        n_nodes = int(rng.choice([1, 1, 2]))
        nodes = tuple(int(x) for x in rng.choice(3, size=n_nodes, replace=False))  # node 2 does not exist
        shape = ResourceShape(gpu_type, n_nodes, per_node)
        allocs.append((view.job_id, Allocation(Grid(shape, 1), Placement(gpu_type, nodes, per_node))))
    if views and rng.random() < 0.05:
        allocs.append(allocs[0] if allocs else (views[0].job_id, None))  # duplicate or malformed
    return Decision(tuple(a for a in allocs if a[1] is not None), tuple(preempt))


def workload(seed: int, n: int = 40, case: Case = BACKENDS["sim"]):
    """``n`` jobs over 3,000 s requesting 1, 2 or 4 GPUs of the case's types, of its models."""
    rng = np.random.default_rng(seed)
    return [
        job(
            f"j{i}",
            float(t),
            int(rng.integers(10, 400)),
            str(rng.choice(case.types)),
            int(rng.choice([1, 2, 4])),
            model=case.models[0] if rng.random() < 0.5 else case.models[-1],
        )
        for i, t in enumerate(np.sort(rng.integers(0, 3000, n)))
    ]


def test_invariants_and_atomic_rejection_under_random_decisions(case):
    @settings(max_examples=case.examples, deadline=None)
    @given(seed=st.integers(0, 2**32 - 1))
    def episode(seed):
        rng = np.random.default_rng(seed)
        models = case.models
        jobs = [
            job(
                f"j{i}", float(rng.integers(0, 500)), int(rng.integers(1, 200)), "a40", 2, model=models[i % len(models)]
            )
            for i in range(12)
        ]
        # periodic rounds keep decision points coming while random decisions leave jobs waiting
        with tempfile.TemporaryDirectory() as run_dir:
            steps, backend, snap = _random_episode(case.make("pruned", 50.0, Path(run_dir)), jobs, rng)
        assert backend.decisions + backend.rejected == steps
        assert steps >= 50 or snap is None

    episode()


def _random_episode(
    backend: ClusterBackend, jobs: list, rng: np.random.Generator
) -> tuple[int, CheckedBackend, Snapshot | None]:
    """Random decisions, at most 400 of them: (decisions taken, the checked backend, the last snapshot)."""
    checked = CheckedBackend(backend)
    snap = checked.reset(jobs)
    steps = 0
    while snap is not None and steps < 400:
        try:
            checked.apply(random_decision(snap, rng))  # CheckedBackend: rejected => unchanged
        except InvalidDecision:
            pass
        snap = checked.advance()
        steps += 1
    return steps, checked, snap


@pytest.mark.parametrize("policy", [FCFS, SRTF])
def test_policies_keep_invariants_and_finish_every_job(case, policy, tmp_path):
    for seed in range(5):
        p = policy()
        backend = CheckedBackend(case.make(p.ap_search, None, tmp_path / str(seed)))
        record = run_episode(backend, p, workload(seed, 25, case))
        assert compute_metrics(record)["jobs_finished"] == 25
        assert backend.rejected == 0 and backend.decisions == record.decisions


@pytest.mark.parametrize("policy", [FCFS, SRTF])
def test_same_workload_same_trajectory(case, policy, tmp_path):
    a = run_episode(case.make("full", None, tmp_path / "a"), policy(), workload(3, case=case))
    b = run_episode(case.make("full", None, tmp_path / "b"), policy(), workload(3, case=case))
    assert a.events == b.events
    ma, mb = compute_metrics(a), compute_metrics(b)
    assert {k: v for k, v in ma.items() if k not in WALL_CLOCK_KEYS} == {
        k: v for k, v in mb.items() if k not in WALL_CLOCK_KEYS
    }
    assert ma["jobs_finished"] == 40


def test_every_rejection_names_its_problem_and_changes_nothing(case, tmp_path):
    backend = CheckedBackend(case.make("pruned", None, tmp_path))
    snap = backend.reset([job("A", 0, 10, "a40", 2), job("B", 0, 10, "a40", 2), job("later", 99, 10, "a40", 2)])
    a40 = Allocation(Grid(ResourceShape(GpuType("a40"), 1, 2), 1), Placement(GpuType("a40"), (0,), 2))
    bad = [
        (Decision((("A", a40), ("B", a40))), "too few free GPUs"),
        (Decision((("later", a40),)), "not yet submitted"),
        (Decision((("A", a40), ("A", a40))), "appears twice"),
        (Decision(preemptions=("A",)), "holds no GPUs"),
    ]
    for decision, message in bad:
        with pytest.raises(InvalidDecision, match=message):
            backend.apply(decision)  # CheckedBackend asserts the state is unchanged
    assert backend.rejected == len(bad) and len(snap.pending) == 2  # the snapshot is still current


def test_snapshot_views_go_stale_when_the_backend_moves_on(case, tmp_path):
    backend = case.make("pruned", None, tmp_path)
    snap = backend.reset([job("A", 0, 10, "a40", 2), job("B", 5, 10, "a40", 2)])
    kept = tuple(snap.pending)
    assert [v.job_id for v in kept] == ["A"] and snap.job("A") is kept[0]
    a40 = Allocation(Grid(ResourceShape(GpuType("a40"), 1, 2), 1), Placement(GpuType("a40"), (0,), 2))
    backend.apply(Decision((("A", a40),)))
    with pytest.raises(RuntimeError, match="stale snapshot"):
        len(snap.pending)
    with pytest.raises(RuntimeError, match="stale snapshot"):
        list(snap.running)
    assert kept[0].status is JobStatus.PENDING  # views already read stay valid: they are frozen
    nxt = backend.advance()
    assert [v.job_id for v in nxt.running] == ["A"] and [v.job_id for v in nxt.pending] == ["B"]


def test_episode_ends_at_its_last_real_event(case, tmp_path):
    # No overhead; 4 a40 GPUs run 1 iteration/s. L starts at 0; S arrives at 30 and SRTF preempts
    # L for it (S: 30..40; L is at a step boundary, so live stops it at once), L resumes at 40 and
    # finishes at 110. Rounds every 50 s: the one due at 150 comes after the last job and must not
    # stretch the episode (nor its metrics).
    jobs = [job("L", 0, 100, "a40", 4), job("S", 30, 10, "a40", 4)]
    record = run_episode(case.make("none", 50.0, tmp_path), SRTF(), jobs)
    finishes = sorted(e.time for e in record.events if e.kind is EventKind.FINISH)
    assert finishes == pytest.approx([40.0, 110.0])
    assert record.end_time == max(e.time for e in record.events) == pytest.approx(110.0)
    m = compute_metrics(record)
    assert m["end_time_s"] == m["makespan_s"] == pytest.approx(110.0)
    assert m["gpu_util"] == pytest.approx(4 * 110 / (case.cluster.total_gpus * 110))


def test_metrics_agree_with_the_backends_own_accounting(case, tmp_path):
    # Per job: JCT and queueing from the event log equal the backend's own job views; the
    # timeline's integral of GPUs making progress equals the attained GPU-seconds of all jobs.
    policy = SRTF()
    backend = case.make(policy.ap_search, None, tmp_path)
    jobs = workload(5, 30, case)
    record = run_episode(backend, policy, jobs)
    outcomes = {o.job_id: o for o in job_outcomes(record)}
    attained = 0.0
    for spec in jobs:
        view = backend.state.view(spec.job_id)
        out = outcomes[spec.job_id]
        assert view.status is JobStatus.FINISHED and out.finish is not None
        assert out.first_start == view.first_start
        assert out.queued_s == pytest.approx(view.queued_s_at_mark, abs=1e-6)
        assert out.preemptions == view.preemptions and out.reconfigurations == view.reconfigurations
        attained += view.attained_gpu_s
    tl = timeline(record)
    assert tl.integral(tl.running_gpus) == pytest.approx(attained, rel=1e-9)
    m = compute_metrics(record)
    span = record.end_time - record.start_time
    assert m["gpu_util"] == pytest.approx(attained / (span * case.cluster.total_gpus), rel=1e-9)


def materialised(snap: Snapshot) -> Snapshot:
    """The same snapshot with its job views copied into plain tuples (no backend index behind them)."""
    return dataclasses.replace(snap, pending=JobViews(snap.pending), running=JobViews(snap.running))


@pytest.mark.parametrize("name", ["fcfs", "srtf", "arena", "arena-no"])
def test_policies_decide_the_same_on_lazy_and_materialised_snapshots(case, name, tmp_path):
    # the backend's per-type and per-configuration queue indexes must give what a scan gives
    lazy, plain = make_policy(name), make_policy(name)
    lazy.reset(), plain.reset()
    backend = case.make(lazy.ap_search, None, tmp_path)
    snap = backend.reset(workload(11, 30, case))
    decisions = 0
    while snap is not None:
        copy = materialised(snap)
        assert [v.job_id for v in copy.pending.requesting("a40")] == [v.job_id for v in snap.pending.requesting("a40")]
        assert {c: [v.job_id for v in vs] for c, vs in copy.pending.by_config().items()} == {
            c: [v.job_id for v in vs] for c, vs in snap.pending.by_config().items()
        }
        expected = plain.decide(copy)
        decision = lazy.decide(snap)
        assert decision == expected
        backend.apply(decision)
        decisions += 1
        snap = backend.advance()
    assert decisions > 20


# ---------------------------------------------------------------------- decision times on both backends
class Recorder:
    """A policy that notes every decision point it is shown (time, arrivals, departures, round) and defers to another."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.name, self.ap_search, self.clairvoyant = policy.name, policy.ap_search, policy.clairvoyant
        self.points: list[tuple[float, tuple[str, ...], tuple[str, ...], int]] = []

    def reset(self) -> None:
        self.policy.reset()
        self.points = []

    def decide(self, snapshot: Snapshot) -> Decision:
        self.points.append(
            (snapshot.now, tuple(sorted(snapshot.arrivals)), tuple(sorted(snapshot.departures)), snapshot.round_index)
        )
        return self.policy.decide(snapshot)


def decision_points(make, policy: str, jobs, sim: SimConfig, tmp_path: Path):
    """The decision points of one episode of ``policy`` on ``jobs`` (its overheads as ``sim`` says), and its record."""
    recorder = Recorder(make_policy(policy))
    record = run_episode(make(sim, tmp_path), recorder, jobs)
    return recorder.points, record


def on_sim(config: SimConfig, run_dir: Path) -> ClusterBackend:
    return SimBackend(A40, PERF, config=config)


def on_live(config: SimConfig, run_dir: Path) -> ClusterBackend:
    return fake_live_backend(A40, PERF, run_dir, config)


def assert_same_points(sim_points, live_points, within_s: float = 1e-9) -> None:
    """The same decision points (arrivals, departures, round index) in the same order, at times within ``within_s``."""
    assert [p[1:] for p in live_points] == [p[1:] for p in sim_points]
    assert [p[0] for p in live_points] == pytest.approx([p[0] for p in sim_points], rel=1e-12, abs=within_s)


def assert_same_job_events(sim_record, live_record) -> None:
    """Every job's events, in order and at the same times, but for what only the live backend knows: its measured
    rates (PROGRESS), and a RUN logged once the first step is read, in order with the core's other operations
    (at the latest when that step ends)."""
    for spec in sim_record.jobs:
        sim = [e for e in sim_record.events if e.job_id == spec.job_id]
        live = [e for e in live_record.events if e.job_id == spec.job_id and e.kind is not EventKind.PROGRESS]
        assert [e.kind for e in live] == [e.kind for e in sim]
        for s, v in zip(sim, live):
            if s.kind is EventKind.RUN:
                assert s.time - 1e-9 <= v.time <= s.time + LONGEST_STEP_S
            else:
                assert v.time == pytest.approx(s.time, rel=1e-12, abs=1e-9)


#: The schedules compared: event-driven, with rounds, rounds only.
SCHEDULES = {
    "event decisions": {},
    "and rounds": {"round_s": 300.0},
    "rounds only": {"round_s": 600.0, "event_decisions": False},
}
#: The longest step on the cluster (one GPU): what a job stopped mid-step still runs.
LONGEST_STEP_S = 2.0


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_both_backends_decide_at_the_same_times(schedule, tmp_path):
    # 40 jobs over 50 minutes that keep the cluster busy for about three hours, under FCFS (which
    # never moves a running job): the live backend's jobs step and restart exactly as simulated
    # (fake generations on the same performance model and overheads), its clock jumping from one
    # due time to the next. Both backends decide at the same points, at the same times.
    jobs = workload(7, 40, BACKENDS["live"])
    config = SimConfig(**SCHEDULES[schedule], overhead_class="full")
    sim_points, sim_record = decision_points(on_sim, "fcfs", jobs, config, tmp_path / "sim")
    live_points, live_record = decision_points(on_live, "fcfs", jobs, config, tmp_path / "live")
    assert len(sim_points) > 10 and sim_record.end_time > 2.5 * 3600
    assert_same_points(sim_points, live_points)
    assert live_record.end_time == pytest.approx(sim_record.end_time, rel=1e-12)
    assert_same_job_events(sim_record, live_record)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("policy", ["srtf", "arena"])
def test_a_job_moved_mid_step_frees_its_gpus_at_the_end_of_that_step(policy, schedule, tmp_path):
    # The one difference: a live job that is preempted or moved finishes the step it is in and
    # checkpoints before its processes exit (the worker stops at step boundaries), so the job that
    # takes its GPUs starts up to a step later, and the moved job keeps that step's work. The
    # decision points are the same, each within one step of the simulated time.
    jobs = workload(7, 40, BACKENDS["live"])
    config = SimConfig(**SCHEDULES[schedule], overhead_class=make_policy(policy).ap_search)
    sim_points, sim_record = decision_points(on_sim, policy, jobs, config, tmp_path / "sim")
    live_points, live_record = decision_points(on_live, policy, jobs, config, tmp_path / "live")
    assert_same_points(sim_points, live_points, within_s=LONGEST_STEP_S)
    metrics = compute_metrics(sim_record)
    shifted = sum(abs(a[0] - b[0]) > 1e-9 for a, b in zip(sim_points, live_points))
    assert not shifted or metrics["preemptions"] + metrics["reconfigurations"] > 0  # only moves shift decisions


def test_a_preempted_job_frees_its_gpus_at_the_end_of_its_step(tmp_path):
    # 4 GPUs run 1 step/s. S arrives at 30.5 and SRTF preempts L, in its step 31: simulated, S runs
    # 30.5..40.5 and L, 30.5 steps done, resumes then; live, L's processes finish step 31 and exit at
    # 31, S runs 31..41 and L resumes from its checkpoint of step 31. Both finish L at 110.
    jobs = [job("L", 0, 100, "a40", 4), job("S", 30.5, 10, "a40", 4)]
    config = SimConfig(overhead_class="none")
    sim_points, _ = decision_points(on_sim, "srtf", jobs, config, tmp_path / "sim")
    live_points, live_record = decision_points(on_live, "srtf", jobs, config, tmp_path / "live")
    assert [p[0] for p in sim_points] == [0.0, 30.5, 40.5, 110.0]
    assert [p[0] for p in live_points] == [0.0, 30.5, 41.0, 110.0]
    assert [p[1:] for p in live_points] == [p[1:] for p in sim_points]


def test_the_first_round_comes_at_the_first_submission_on_both_backends(tmp_path):
    jobs = [job("A", 100, 50, "a40", 2), job("B", 250, 50, "a40", 2)]
    config = SimConfig(round_s=300.0, event_decisions=False, overhead_class="none")
    sim_points, _ = decision_points(on_sim, "fcfs", jobs, config, tmp_path / "sim")
    live_points, _ = decision_points(on_live, "fcfs", jobs, config, tmp_path / "live")
    assert [p[0] for p in sim_points] == [100.0, 400.0]  # A is decided at once, B at the next round
    assert_same_points(sim_points, live_points)


@pytest.mark.timeout(60)
def test_rounds_stop_after_two_stalled_ones_on_both_backends(tmp_path):
    # the big job asks for 8 GPUs of a 4-GPU cluster: FCFS never starts it; with rounds and no
    # horizon both backends must end after two stalled rounds (A is done at 14 s)
    jobs = [job("A", 0, 10, "a40", 2), job("big", 5, 10, "a40", 8)]
    config = SimConfig(round_s=300.0, overhead_class="none")
    sim_points, sim_record = decision_points(on_sim, "fcfs", jobs, config, tmp_path / "sim")
    live_points, live_record = decision_points(on_live, "fcfs", jobs, config, tmp_path / "live")
    assert [p[0] for p in sim_points][-2:] == [300.0, 600.0] and sim_record.end_time == 600.0
    assert_same_points(sim_points, live_points)
    assert live_record.end_time == 600.0 and compute_metrics(live_record)["jobs_finished"] == 1


def test_at_the_horizon_the_live_backend_stops_its_jobs_at_their_next_step_boundary(tmp_path):
    # the same decisions up to the horizon; the simulator ends there, the live backend once its
    # running job has saved at the end of the step it is in (4 GPUs: 1 s a step, from 0.5 s)
    jobs = [job("L", 0.5, 5000, "a40", 4), job("S", 10, 20, "a40", 2)]
    config = SimConfig(horizon_s=100.25, overhead_class="none")
    sim_points, sim_record = decision_points(on_sim, "fcfs", jobs, config, tmp_path / "sim")
    live_points, live_record = decision_points(on_live, "fcfs", jobs, config, tmp_path / "live")
    assert_same_points(sim_points, live_points)
    assert sim_record.end_time == 100.25 and live_record.end_time == 100.5
    assert compute_metrics(live_record)["jobs_finished"] == compute_metrics(sim_record)["jobs_finished"] == 0
