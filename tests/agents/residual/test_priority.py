"""The residual on Arena's Gittins order, urgency and sizing: zero weights are arena-gittins-32-f, weights change
decisions, sizing targets bound the upgrade trial, files checked."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from agents.residual.priority import (
    RESIDUAL_FEATURES,
    SIZE_CEILING,
    SIZE_FEATURES,
    ResidualPriority,
    ResidualWeights,
    _squash,
    residual_policy,
    snapshot_features,
)
from arena_gym.cluster import load_cluster
from arena_gym.harness import load_jobs
from arena_gym.loop import run_episode
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import JobStatus, Snapshot
from envs.encoder import log_count, squash

TRACE = "synthetic:mix=testbed,n_jobs=30,rate_per_h=60,iter_log_mean=6.5,iter_log_sigma=1.2,iter_min=50,iter_max=20000"
N = len(RESIDUAL_FEATURES)


@pytest.fixture(scope="module")
def testbed():
    cluster = load_cluster("testbed-64")
    perf = make_perf("estimator", cluster)
    return cluster, perf, load_jobs(TRACE, cluster, perf, seed=3)


def _run(policy, testbed):
    cluster, perf, jobs = testbed
    backend = SimBackend(cluster, perf, config=SimConfig(overhead_class=policy.ap_search))
    return run_episode(backend, policy, jobs)


def _weights(order: dict[str, float] | None = None, urgency: dict[str, float] | None = None) -> ResidualWeights:
    def row(values: dict[str, float] | None) -> tuple[float, ...]:
        return tuple((values or {}).get(name, 0.0) for name in RESIDUAL_FEATURES)

    return ResidualWeights(row(order), row(urgency))


def test_zero_weights_are_the_base_policy_and_weights_change_the_schedule(testbed) -> None:
    base = _run(make_policy("arena-gittins-32-f"), testbed)
    zero = residual_policy(ResidualWeights())
    assert zero.clairvoyant is False  # it runs on hidden job lengths: reading one would raise
    assert _run(zero, testbed).events == base.events
    # waiting jobs first, whatever their index; and every running job's loss weighs 20x more
    moved = _run(residual_policy(_weights({"waiting": 3.0}, {"holds_gpus": 3.0})), testbed)
    assert moved.events != base.events
    assert {e.job_id for e in moved.events} == {e.job_id for e in base.events}


def test_features_are_bounded_and_the_index_is_centred(testbed) -> None:
    cluster, perf, jobs = testbed
    priority = ResidualPriority(make_policy("arena-gittins-32-f").priority.belief, ResidualWeights())
    seen: list[np.ndarray] = []
    by_job: list[np.ndarray] = []  # the columns that read the view alone, each job's by the scalar definitions
    columns = [RESIDUAL_FEATURES.index(c) for c in ("age", "waiting", "holds_gpus", "gpus", "preemptions")]

    def per_job(view, now: float) -> tuple[float, ...]:
        held = view.allocation.num_gpus if view.allocation is not None else None
        holds = view.status in (JobStatus.RUNNING, JobStatus.RECONFIGURING)
        age, waiting = squash(now - view.spec.submit_time, 3600.0), squash(view.queued_s(now), 3600.0)
        return age, waiting, float(holds), log_count(held), view.preemptions / (view.preemptions + 1.0)

    class Probe:
        name, ap_search, clairvoyant = "probe", "pruned", False

        def __init__(self) -> None:
            self.inner = residual_policy(ResidualWeights())

        def reset(self) -> None:
            self.inner.reset()
            priority.reset()

        def decide(self, snapshot: Snapshot):
            views = [*snapshot.pending, *snapshot.running]
            if views:
                seen.append(priority.features(views, snapshot))
                by_job.append(np.array([per_job(v, snapshot.now) for v in views]))
            return self.inner.decide(snapshot)

    run_episode(SimBackend(cluster, perf, config=SimConfig()), Probe(), jobs)
    assert len(seen) > 10
    rows = np.concatenate(seen)
    assert rows.shape[1] == N and np.isfinite(rows).all()
    assert (rows[:, 0] == 1.0).all()
    others = np.delete(rows, RESIDUAL_FEATURES.index("log_index"), axis=1)
    assert others.min() >= 0.0 and others.max() <= 1.0
    unclipped = [m[:, 1] for m in seen if np.abs(m[:, 1]).max() < 3.0]
    assert unclipped and all(abs(col.mean()) < 1e-9 for col in unclipped)
    assert any(col.std() > 0.1 for col in unclipped)  # the index does tell jobs apart
    built = np.concatenate(by_job)
    assert np.array_equal(rows[:, columns], built)  # the column-wise build is the scalar one, to the last bit
    assert built[:, 0].max() > 0.0 and built[:, 3].max() > 0.0  # ages and held GPUs were exercised


def test_the_vectorised_squash_is_the_scalar_one_to_the_last_bit() -> None:
    values = np.array([0.0, -0.0, -5.0, 1e-300, 0.3, 3600.0, 1e12, math.inf, -math.inf, math.nan])
    assert _squash(values, 3600.0).tolist() == [squash(float(v), 3600.0) for v in values]


def test_weights_round_trip_through_a_file_and_the_registry(tmp_path) -> None:
    weights = _weights({"age": 0.5}, {"bias": -1.25, "gpus": 2.0}).with_vector(
        np.arange(2 * N) / 10.0, {"note": "made by a test"}
    )
    path = weights.save(tmp_path / "w.json")
    loaded = ResidualWeights.load(path)
    assert loaded == weights and loaded.vector.tolist() == pytest.approx(list(np.arange(2 * N) / 10.0))
    policy = make_policy(f"residual:{path}")
    assert policy.name == f"residual:{path}" and isinstance(policy.priority, ResidualPriority)
    assert policy.config.max_job_gpus == 32 and policy.config.weighted_fits and policy.priority.adapt


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda body: "{not json", "cannot read"),
        (lambda body: {**body, "format": "something else"}, "not a 'arena-gym residual weights' file"),
        (lambda body: {**body, "features": body["features"][:-1]}, "its features are not"),
        (lambda body: {**body, "order": body["order"][:-1]}, "'order' must be a list of"),
        (lambda body: {**body, "urgency": [math.nan] * N}, "not a finite number"),
        (lambda body: {**body, "order": ["1"] * N}, "'order' must be a list of numbers, got ['1'"),
        (lambda body: {**body, "clip": 0}, "'clip' must be a finite number > 0"),
        (lambda body: {**body, "belief": ""}, "'belief' must be"),
        (lambda body: {**body, "trained": []}, "'trained' must be an object"),
        (lambda body: [1, 2], "not a 'arena-gym residual weights' file"),
        (lambda body: {**body, "clip": True}, "clip must be a number, got True"),
        (lambda body: {**body, "clip": "3"}, "clip must be a number, got '3'"),
        (lambda body: {**body, "urgency": [False] * N}, "'urgency' must be a list of numbers, got [False"),
        (lambda body: {**body, "belief": 3}, "belief must be a string, got 3"),
        (lambda body: {**body, "seed": 1}, "unknown field(s) seed; valid: order, urgency, size, clip, belief, trained"),
        (lambda body: {k: v for k, v in body.items() if k != "order"}, "missing field(s) order"),
    ],
)
def test_bad_weight_files_are_refused_in_one_line(tmp_path, edit, problem: str) -> None:
    path = ResidualWeights().save(tmp_path / "w.json")
    changed = edit(json.loads(path.read_text()))
    path.write_text(changed if isinstance(changed, str) else json.dumps(changed))
    with pytest.raises(ValueError, match="residual weights") as err:
        ResidualWeights.load(path)
    assert problem in str(err.value) and "\n" not in str(err.value)


def test_missing_file_and_bad_vectors_are_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="cannot read"):
        make_policy(f"residual:{tmp_path / 'absent.json'}")
    with pytest.raises(ValueError, match=f"has {2 * N} entries, got 3"):
        ResidualWeights().with_vector(np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        ResidualWeights(order=(math.inf,) + (0.0,) * (N - 1))


def test_the_committed_weight_files_load_and_are_written_back_byte_for_byte(tmp_path) -> None:
    root = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "residual"
    files = sorted(root.glob("**/residual.json"))
    assert files
    for i, path in enumerate(files):
        weights = ResidualWeights.load(path)
        assert weights.belief == "real" and weights.trained
        assert weights.save(tmp_path / f"{i}.json").read_bytes() == path.read_bytes(), path


def _sized(**weights: float) -> ResidualWeights:
    """Zero order and urgency rows; the sizing row's named weights."""
    return ResidualWeights(size=tuple(weights.get(name, 0.0) for name in SIZE_FEATURES))


def _most_gpus_beyond_the_request(run) -> int:
    """The largest allocation of a job that holds more GPUs than it requested (0 if none ever did)."""
    requested = {job.job_id: job.requested_gpus for job in run.jobs}
    return max((e.num_gpus for e in run.events if e.num_gpus > requested[e.job_id]), default=0)


def test_a_sizing_row_bounds_how_far_the_upgrade_trial_grows_a_job(testbed) -> None:
    assert residual_policy(ResidualWeights()).priority.targets(None) is None  # no sizing row: no targets read
    base = _run(residual_policy(ResidualWeights()), testbed)
    assert _most_gpus_beyond_the_request(base) > 4  # idle GPUs let the base grow jobs past 4
    sized = _run(residual_policy(_sized(bias=-3.0)), testbed)  # every job's target: 32 x 2^-3 = 4
    assert 0 < _most_gpus_beyond_the_request(sized) <= 4
    assert {e.job_id for e in sized.events} == {e.job_id for e in base.events}


def test_sizing_targets_above_the_cap_let_a_job_grow_past_it_up_to_the_ceiling() -> None:
    cluster = load_cluster("arena-1280")
    perf = make_perf("estimator", cluster)
    idle = (cluster, perf, load_jobs(TRACE, cluster, perf, seed=3))  # 30 jobs on 1,280 GPUs: room to grow
    grown = {
        bias: max(e.num_gpus for e in _run(residual_policy(_sized(bias=bias)), idle).events)
        for bias in (0.0, 1.0, 1.4, 2.9)  # targets 32 (the base), 64, 64, 256 -> the ceiling, 128
    }
    assert grown == {0.0: 32, 1.0: 64, 1.4: 64, 2.9: 128}
    # a row whose targets all round to 32 is the base, to the event log, under the raised ceiling
    assert _run(residual_policy(_sized(bias=0.3)), idle).events == _run(residual_policy(ResidualWeights()), idle).events
    assert residual_policy(_sized(bias=1.0)).config.max_grow_gpus == SIZE_CEILING == 128
    assert residual_policy(ResidualWeights()).config.max_grow_gpus == 0  # no sizing row: the base's config


def test_sizing_targets_read_the_clusters_size_and_load(testbed) -> None:
    cluster, perf, jobs = testbed
    weights = _sized(cluster_gpus=-1.0)  # r = -log2(64) / 11 rounds to -1: targets 16 for every job
    priority = ResidualPriority(make_policy("arena-gittins-32-f").priority.belief, weights)
    seen: list[dict] = []

    class Recorder(type(residual_policy(weights))):  # the residual policy, recording its targets
        def decide(self, snapshot: Snapshot):
            targets = self.priority.targets(snapshot)
            listed = [*snapshot.pending, *snapshot.running]
            seen.append({v.spec.job_id: targets(v) for v in listed})
            demand = sum(v.spec.requested_gpus for v in listed) / 64
            share = sum(v.allocation is None for v in listed) / max(len(listed), 1)
            assert snapshot_features(listed, snapshot) == pytest.approx([6 / 11, demand / (demand + 1), share])
            return super().decide(snapshot)

    policy = Recorder("sized", priority=priority, max_job_gpus=32, weighted_fits=True)
    _run(policy, testbed)
    assert seen and {t for found in seen for t in found.values()} == {16}


def test_a_sizing_row_round_trips_and_a_zero_one_is_not_written(tmp_path) -> None:
    weights = _sized(bias=-0.75, demand=-1.5).with_vector(np.arange(2 * N) / 10.0)
    assert weights.size[0] == -0.75 and weights.vector.tolist() == pytest.approx(list(np.arange(2 * N) / 10.0))
    assert ResidualWeights.load(weights.save(tmp_path / "w.json")) == weights
    moved = weights.with_heads(("size", "order"), np.arange(len(SIZE_FEATURES) + N))
    assert moved.size == tuple(range(len(SIZE_FEATURES))) and moved.urgency == weights.urgency
    assert moved.head_vector(("size", "order")).tolist() == list(range(len(SIZE_FEATURES) + N))
    with pytest.raises(ValueError, match=f"order\\+size has {N + len(SIZE_FEATURES)} entries, got 3"):
        weights.with_heads(("order", "size"), np.zeros(3))
    assert "size" not in json.loads(ResidualWeights().save(tmp_path / "zero.json").read_text())


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda body: {**body, "size": body["size"][:-1]}, f"'size' must be a list of {len(SIZE_FEATURES)} numbers"),
        (lambda body: {**body, "size_features": body["size_features"][:-1]}, "its size features are not"),
        (lambda body: {k: v for k, v in body.items() if k != "size_features"}, "its size features are not"),
    ],
)
def test_bad_sizing_rows_are_refused_in_one_line(tmp_path, edit, problem: str) -> None:
    path = _sized(bias=-1.0).save(tmp_path / "w.json")
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    with pytest.raises(ValueError, match="residual weights") as err:
        ResidualWeights.load(path)
    assert problem in str(err.value) and "\n" not in str(err.value)
