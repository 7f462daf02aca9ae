"""Adversarial tests of the information sets: every door a probe policy might try leads nowhere.

Each door is first shown open on the truth (a clairvoyant snapshot, a declared deadline), so
a test that finds nothing is a test that could have found something.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena_gym.cluster import load_cluster
from arena_gym.core.job import JobState
from arena_gym.core.state import ClusterState
from arena_gym.harness import load_jobs
from arena_gym.loop import run_episode
from arena_gym.registry import make_perf
from arena_gym.sim import SimBackend
from arena_gym.types import DeadlineSource, Decision, HiddenSpec, JobSpec, JobView, Snapshot
from tests.probes import DeadlineArena, WeightedDeadlineArena, reachable

CLUSTER = load_cluster("testbed-64")
PERF = make_perf("estimator", CLUSTER)


def itp_file(path: Path, factors: np.ndarray | None = None, n: int = 40) -> str:
    """A small ITP-format trace (deadlines derived by the loader); ``factors`` scale its durations."""
    rng = np.random.default_rng(7)
    submits = np.cumsum(rng.exponential(60.0, n)).round()
    durations = rng.lognormal(8.0, 1.0, n).clip(300, 80_000)
    if factors is not None:
        durations = durations * factors
    rows = [
        f"j{i:03d},{int(s)},{int(d)},{int(g)}"
        for i, (s, d, g) in enumerate(zip(submits, durations, rng.choice([1, 2, 4, 8], n)))
    ]
    path.write_text("job_id,submission_time,duration,num_gpu\n" + "\n".join(rows) + "\n")
    return f"{path}?seed=0"


def itp_jobs(tmp_path: Path, factors: np.ndarray | None = None, name: str = "trace.csv") -> tuple[JobSpec, ...]:
    """The jobs of :func:`itp_file`, made to fit testbed-64."""
    return load_jobs(itp_file(tmp_path / name, factors), CLUSTER, PERF, seed=0)


def truths(root: Any, jobs: tuple[JobSpec, ...], now: float) -> list[str]:
    """What ``root`` leads to that a non-clairvoyant policy must not see, described one line each."""
    future = {j.job_id for j in jobs if j.submit_time > now}
    found = []
    for obj in reachable(root):
        if isinstance(obj, (JobState, ClusterState, SimBackend)):
            found.append(f"a {type(obj).__name__}")
        elif isinstance(obj, JobSpec) and not isinstance(obj, HiddenSpec):
            found.append(f"the true spec of {obj.job_id}")
        elif isinstance(obj, HiddenSpec) and obj.deadline is not None:
            found.append(f"the derived deadline of {obj.job_id}")
        elif isinstance(obj, JobView) and not isinstance(obj.spec, HiddenSpec):
            found.append(f"the true view of {obj.job_id}")
        elif isinstance(obj, str) and obj in future:
            found.append(f"the id of the future arrival {obj}")
    return found


class Prober:
    """A non-clairvoyant policy that walks every snapshot it is shown; starts the oldest job on one GPU."""

    name, ap_search = "prober", "pruned"

    def __init__(self, jobs: tuple[JobSpec, ...]) -> None:
        self.jobs = jobs
        self.found: list[str] = []
        self.decisions = 0

    def reset(self) -> None:
        self.found, self.decisions = [], 0

    def decide(self, snapshot: Snapshot) -> Decision:
        self.decisions += 1
        if self.decisions % 5 == 1:  # every fifth: a walk costs a few ms
            self.found += truths(snapshot, self.jobs, snapshot.now)
        return Decision()


def test_the_walk_finds_the_truth_behind_a_raw_snapshot(tmp_path: Path) -> None:
    jobs = itp_jobs(tmp_path)
    snapshot = SimBackend(CLUSTER, PERF).reset(jobs)
    found = truths(snapshot, jobs, snapshot.now)
    assert "a ClusterState" in found and "a JobState" in found  # through the lazy views and the fork
    assert any(f.startswith("the id of the future arrival") for f in found)  # every future job is loaded


def test_nothing_reachable_from_an_observed_snapshot_leads_to_the_truth(tmp_path: Path) -> None:
    jobs = itp_jobs(tmp_path)
    assert all(j.deadline is not None and j.deadline_source is DeadlineSource.DERIVED for j in jobs)
    prober = Prober(jobs)
    from agents.arena.policy import ArenaPolicy

    arena = ArenaPolicy()

    class Both(Prober):  # Arena decides, so jobs run, queue, finish and get preempted under the probe's eyes
        def decide(self, snapshot: Snapshot) -> Decision:
            super().decide(snapshot)
            return arena.decide(snapshot)

    both = Both(jobs)
    record = run_episode(SimBackend(CLUSTER, PERF), both, jobs)
    assert both.decisions > 20 and record.clairvoyant is False
    assert both.found == []
    run_episode(SimBackend(CLUSTER, PERF), prober, jobs[:5])
    assert prober.found == []


def test_an_observed_snapshot_withholds_the_fork_and_the_observer(tmp_path: Path) -> None:
    jobs = itp_jobs(tmp_path)
    raw = SimBackend(CLUSTER, PERF).reset(jobs)
    shown = raw.observe("p")
    assert raw.observe is not None and not hasattr(raw, "fork")  # no snapshot carries the backend's fork
    assert shown.observe is None and not hasattr(shown, "fork")
    view = shown.pending[0]
    assert view.spec.deadline is None and raw.pending[0].spec.deadline is not None
    for door in ("_inner", "_hide", "_state"):
        assert not hasattr(shown.pending, door)


def test_a_declared_deadline_is_seen_and_a_derived_one_is_not(tmp_path: Path) -> None:
    jobs = tuple(dataclasses.replace(j, submit_time=0.0) for j in itp_jobs(tmp_path)[:3])  # all queued at once
    declared = tuple(dataclasses.replace(j, deadline_source=DeadlineSource.DECLARED) for j in jobs)
    for workload, expected in ((jobs, [None] * 3), (declared, [j.deadline for j in jobs])):
        shown = SimBackend(CLUSTER, PERF).reset(workload).observe("p")
        assert [shown.pending.get(j.job_id).spec.deadline for j in workload] == expected
    assert all(d is not None for d in expected)


def _events(policy: Any, jobs: tuple[JobSpec, ...]) -> list[tuple]:
    record = run_episode(SimBackend(CLUSTER, PERF), policy, jobs)
    return [(e.time, e.kind, e.job_id, e.shape) for e in record.events]


@pytest.mark.parametrize("probe", [DeadlineArena, WeightedDeadlineArena])
def test_a_deadline_ordered_arena_learns_nothing_from_derived_deadlines(tmp_path: Path, probe: type) -> None:
    jobs = itp_jobs(tmp_path)
    without = tuple(dataclasses.replace(j, deadline=None) for j in jobs)
    assert _events(probe(), jobs) == _events(probe(), without)
    declared = tuple(dataclasses.replace(j, deadline_source=DeadlineSource.DECLARED) for j in jobs)
    assert _events(probe(), declared) != _events(probe(), without)  # the door is real when the deadline is declared


def test_the_agents_observation_shows_no_derived_slack(tmp_path: Path) -> None:
    from envs import ArenaSchedEnv, EnvConfig
    from envs.encoder import JOB_FEATURES

    slack, has = JOB_FEATURES.index("slack"), JOB_FEATURES.index("has_deadline")
    jobs = itp_jobs(tmp_path)
    declared = tuple(dataclasses.replace(j, deadline_source=DeadlineSource.DECLARED) for j in jobs)
    seen = {}
    for label, workload, oracle in (("derived", jobs, False), ("declared", declared, False), ("oracle", jobs, True)):
        env = ArenaSchedEnv(EnvConfig(cluster="testbed-64", oracle_remaining=oracle))
        obs, info = env.reset(options={"jobs": workload})
        seen[label] = obs["jobs"][:, [has, slack]].copy()
        assert truths(info, jobs, 0.0) == []
    assert not seen["derived"].any()  # no deadline reaches the agent
    assert seen["declared"][:, 0].any() and seen["oracle"][:, 0].any()  # where it may see one, it does
