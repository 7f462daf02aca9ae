"""The operation log: a simulated episode replayed from its log is the same episode, to the bit."""

from __future__ import annotations

import dataclasses

import pytest

from arena_gym.cluster import load_cluster
from arena_gym.core import ClusterState
from arena_gym.core.information import information_set
from arena_gym.core.oplog import OP_KINDS, Close, Commit, Submit, replay
from arena_gym.harness import load_jobs
from arena_gym.loop import run_episode
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import JobId


@pytest.fixture(scope="module")
def workload():
    cluster = load_cluster("testbed-64")
    perf = make_perf("estimator", cluster)
    return cluster, perf, load_jobs("synthetic:mix=testbed,n_jobs=40,rate_per_h=60", cluster, perf, seed=2)


def replayed(backend: SimBackend) -> ClusterState:
    """A fresh state of the backend's cluster and models, loaded with its workload, with the backend's log replayed."""
    state = ClusterState(backend.cluster, backend.truth, backend.belief, backend.config.horizon_s)
    state.load(backend.state.jobs)
    replay(backend.state.ops, state)
    return state


def assert_same(a: ClusterState, b: ClusterState) -> None:
    assert a.events == b.events and a.ops == b.ops
    assert all(a.view(j.job_id) == b.view(j.job_id) for j in a.jobs)
    assert all(a.free(t).tolist() == b.free(t).tolist() for t in a.cluster.gpu_types)
    assert (a.queued, a.active, a.unfinished, a.unsubmitted) == (b.queued, b.active, b.unfinished, b.unsubmitted)
    b.check_invariants()


@pytest.mark.parametrize(
    "name, round_s, horizon_s",
    [("arena", None, float("inf")), ("srtf", None, float("inf")), ("arena", 300.0, 40_000.0), ("tiresias", 600.0, 1e9)],
)
def test_a_simulated_episode_replays_from_its_log_exactly(workload, name, round_s, horizon_s) -> None:
    cluster, perf, jobs = workload
    policy = make_policy(name)
    config = SimConfig(round_s=round_s, horizon_s=horizon_s, overhead_class=policy.ap_search)
    backend = SimBackend(cluster, perf, config=config)
    record = run_episode(backend, policy, jobs)
    ops = backend.state.ops
    kinds = {op.kind for op in ops}
    assert {"submit", "commit", "run", "finish", "close"} <= kinds
    assert isinstance(ops[-1], Close) and ops[-1].t == record.end_time
    if name != "tiresias":
        assert any(isinstance(op, Commit) and op.preemptions for op in ops)
    rebuilt = replayed(backend)
    assert_same(backend.state, rebuilt)
    assert rebuilt.record(name, record.start_time, record.end_time) == dataclasses.replace(
        record, decisions=0, decide_wall_s=0.0, clairvoyant=False
    )


def test_a_fork_logs_its_own_continuation_and_a_restore_starts_a_new_log(workload) -> None:
    cluster, perf, jobs = workload
    policy = make_policy("arena")
    policy.reset()
    shown = information_set(policy)
    backend = SimBackend(cluster, perf, config=SimConfig(overhead_class=policy.ap_search))
    snapshot = backend.reset(jobs)
    for _ in range(10):
        backend.apply(policy.decide(shown(snapshot)))
        snapshot = backend.advance()
    twin = backend.fork()
    assert twin.state.ops == backend.state.ops
    while snapshot is not None:
        twin.apply(policy.decide(shown(snapshot)))
        snapshot = twin.advance()
    assert twin.state.ops[: backend.state.n_ops] == backend.state.ops and twin.state.n_ops > backend.state.n_ops
    assert_same(twin.state, replayed(twin))
    # a restored episode (a sampled world) logs from the moment it starts
    view = backend.state.view(jobs[0].job_id)
    backend.restore(backend.now(), [] if view.status.value == "finished" else [(jobs[0], view)])
    assert backend.state.ops == ()


def test_records_are_frozen_and_named_by_kind() -> None:
    op = Submit(1.0, JobId("a"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.t = 2.0  # type: ignore[misc]
    assert {kind: cls.kind for kind, cls in OP_KINDS.items()} == {k: k for k in OP_KINDS}
    assert list(OP_KINDS) == ["submit", "commit", "run", "progress", "fail", "finish", "close"]
