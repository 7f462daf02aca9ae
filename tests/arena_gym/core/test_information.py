"""Information sets: a non-clairvoyant policy cannot read a job's true length; its decisions cannot depend on it."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from agents.search.lookahead import Lookahead
from arena_gym.core.information import Masker, information_set, is_clairvoyant
from arena_gym.loop import run_episode
from arena_gym.records import EventKind
from arena_gym.registry import make_policy, policy_registry
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Decision, ForkableSnapshot, HiddenInformation, HiddenSpec, JobSpec, JobStatus, Snapshot
from tests.agents.baseline_cases import TINY
from tests.arena_gym.core.test_doors import CLUSTER, PERF, itp_jobs
from tests.conftest import REPO
from tests.helpers import job, uniform_model


def registered_non_clairvoyant() -> list[str]:
    """Every registered policy that does not declare clairvoyance, sorted."""
    return sorted(name for name in policy_registry().names() if not is_clairvoyant(make_policy(name)))


#: Every registered policy that does not declare clairvoyance, the deadline probes (registered nowhere), and every
#: documented learned agent: the residual (tuned and first run, and the tuned one with its sizing head) and the slot agent.
NON_CLAIRVOYANT = [
    *registered_non_clairvoyant(),
    "tests.probes:DeadlineArena",
    "tests.probes:WeightedDeadlineArena",
    f"residual:{REPO / 'benchmarks' / 'results' / 'residual' / 'train' / 'residual.json'}",
    f"residual:{REPO / 'benchmarks' / 'results' / 'residual' / 'train-tuned' / 'residual.json'}",
    f"residual:{REPO / 'benchmarks' / 'results' / 'residual' / 'train-sizing' / 'residual.json'}",
    f"sb3:{REPO / 'benchmarks' / 'results' / 'train_run' / 'best_model.zip'}",
]


class Recorder:
    """Declares nothing (non-clairvoyant) and keeps the first snapshot's views; decides nothing."""

    name, ap_search = "recorder", "pruned"

    def __init__(self) -> None:
        self.seen: list[Snapshot] = []

    def reset(self) -> None:
        self.seen.clear()

    def decide(self, snapshot: Snapshot) -> Decision:
        self.seen.append(snapshot)
        view = next(iter(snapshot.pending))
        with pytest.raises(HiddenInformation, match="policy 'recorder' is not clairvoyant: JobSpec.iterations"):
            _ = view.spec.iterations
        with pytest.raises(HiddenInformation, match="JobView.remaining_iterations"):
            view.remaining_iterations(snapshot.now)
        with pytest.raises(HiddenInformation):  # not an AttributeError: a default cannot hide the read
            getattr(view.spec, "iterations", None)
        assert isinstance(view.spec, JobSpec) and view.spec.global_batch == 128 and view.spec.requested_gpus == 2
        assert view.iterations_done(snapshot.now) == 0.0 and view.attained_gpu_seconds(snapshot.now) == 0.0
        assert not hasattr(snapshot, "fork")  # the true backend is withheld
        return Decision()


def test_a_non_clairvoyant_policy_cannot_read_the_true_length() -> None:
    policy = Recorder()
    run_episode(SimBackend(TINY, uniform_model()), policy, [job("a", 0.0, 50, "a40", 2)])
    assert policy.seen


def test_a_clairvoyant_policy_sees_the_truth() -> None:
    class Oracle(Recorder):
        clairvoyant = True

        def decide(self, snapshot: Snapshot) -> Decision:
            view = next(iter(snapshot.pending))
            assert view.spec.iterations == 50 and view.remaining_iterations(snapshot.now) == 50
            assert snapshot.fork(None).state.view(view.job_id).spec.iterations == 50
            self.seen.append(snapshot)
            return Decision()

    policy = Oracle()
    run_episode(SimBackend(TINY, uniform_model()), policy, [job("a", 0.0, 50, "a40", 2)])
    assert policy.seen and information_set(policy)(policy.seen[0]) is policy.seen[0]  # no backend: no fork to add


def test_the_fork_is_shown_only_to_a_clairvoyant_policy_of_a_backend_that_can_fork() -> None:
    class Seer(Recorder):
        clairvoyant = True

    backend = SimBackend(TINY, uniform_model())
    snapshot = backend.reset([job("a", 0.0, 50, "a40", 2)])
    assert snapshot is not None and not hasattr(snapshot, "fork")  # the backend's own snapshot carries none
    assert not hasattr(information_set(Recorder(), backend)(snapshot), "fork")  # not even given the backend
    shown = information_set(Seer(), backend)(snapshot)
    assert isinstance(shown, ForkableSnapshot) and shown.pending is snapshot.pending and shown.now == snapshot.now
    assert shown.fork(None).state.view("a").spec.iterations == 50
    masked = Masker("m").snapshot(shown.plain(pending=tuple(shown.pending), observe=None))  # by hand, from it
    assert type(masked) is Snapshot and not hasattr(masked, "fork")
    assert information_set(Seer(), None)(snapshot) is snapshot  # a backend that cannot fork: the snapshot itself


def test_observed_views_keep_what_a_scheduler_sees_and_progress_uncapped() -> None:
    backend = SimBackend(TINY, uniform_model())
    snapshot = backend.reset([job("a", 0.0, 50, "a40", 2)])
    assert snapshot is not None
    view = snapshot.pending[0]
    shown = Masker("m").snapshot(snapshot)
    hidden = shown.pending[0]
    assert shown.pending[0] is hidden and shown.pending.get("a") is hidden and tuple(shown.pending) == (hidden,)
    assert isinstance(hidden.spec, HiddenSpec) and hidden.spec == HiddenSpec.of(view.spec, "m")
    assert {f.name: getattr(hidden, f.name) for f in dataclasses.fields(hidden) if f.name != "spec"} == {
        f.name: getattr(view, f.name) for f in dataclasses.fields(view) if f.name != "spec"
    }
    assert shown.pending.requesting("a40")[0] is hidden and list(shown.pending.by_config().values())[0][0] is hidden
    assert shown.running.placements() == {} and shown.pending.placements() == {}
    assert not hasattr(shown, "fork") and shown.observe is None
    by_hand = Masker("m").snapshot(dataclasses.replace(snapshot, pending=tuple(snapshot.pending), observe=None))
    assert by_hand.pending[0] == hidden and by_hand.pending[0].spec.viewer == "m"  # a hand-built snapshot: copied
    running = dataclasses.replace(view, status=JobStatus.RUNNING, rate=1.0, run_start=0.0)
    assert running.iterations_done(80.0) == 50  # the truth caps progress at the length...
    hidden_running = dataclasses.replace(running, spec=hidden.spec)
    assert hidden_running.iterations_done(80.0) == 80.0  # ...a hidden view cannot (it would tell it)


def _until_first_finish(backend: SimBackend, policy, jobs) -> list[tuple]:
    """The events before the first completion, deciding as the loop does (the policy's information set applied)."""
    policy.reset()
    shown = information_set(policy)
    snapshot = backend.reset(jobs)
    while snapshot is not None and not snapshot.departures:
        backend.apply(policy.decide(shown(snapshot)))
        snapshot = backend.advance()
    assert snapshot is not None, "the episode ended before any job finished"
    first = min(e.time for e in backend.events if e.kind is EventKind.FINISH)
    return [(e.time, e.kind, e.job_id, e.shape) for e in backend.events if e.time < first]


def _light(policy: Any) -> Any:
    """A lookahead with its registered base and candidates on one world and a 30-minute horizon
    (what it may see does not depend on how far it looks); any other policy as it is."""
    if isinstance(policy, Lookahead):
        return Lookahead(policy.name, dataclasses.replace(policy.config, worlds=1, horizon_s=1800.0))
    return policy


@pytest.mark.parametrize("name", NON_CLAIRVOYANT)
def test_decisions_do_not_depend_on_the_true_lengths_until_a_job_finishes(name: str, tmp_path) -> None:
    """On an ITP trace, whose deadlines the loader derives from the lengths, perturbed lengths change nothing."""
    factors = np.random.default_rng(1).uniform(0.3, 3.0, 40)
    runs = []
    for workload in (itp_jobs(tmp_path), itp_jobs(tmp_path, factors, "perturbed.csv")):
        policy = _light(make_policy(name))
        runs.append(
            _until_first_finish(
                SimBackend(CLUSTER, PERF, config=SimConfig(overhead_class=policy.ap_search)), policy, workload
            )
        )
    truth, perturbed = runs
    prefix = min(len(truth), len(perturbed))
    assert sum(e[1] is EventKind.ALLOCATE for e in truth[:prefix]) >= 5  # the prefix holds real decisions
    assert truth[:prefix] == perturbed[:prefix]


def test_the_perturbed_trace_differs_in_lengths_and_deadlines(tmp_path) -> None:
    factors = np.random.default_rng(1).uniform(0.3, 3.0, 40)
    jobs, perturbed = itp_jobs(tmp_path), itp_jobs(tmp_path, factors, "perturbed.csv")
    assert [(j.job_id, j.model, j.submit_time) for j in jobs] == [(j.job_id, j.model, j.submit_time) for j in perturbed]
    assert sum(a.iterations != b.iterations for a, b in zip(jobs, perturbed)) >= 35
    assert sum(a.deadline != b.deadline for a, b in zip(jobs, perturbed)) >= 35
    clairvoyant = [_until_first_finish(SimBackend(CLUSTER, PERF), make_policy("srtf"), w) for w in (jobs, perturbed)]
    assert clairvoyant[0] != clairvoyant[1]  # a policy that reads the lengths does decide differently


def test_hidden_specs_copy_and_pickle_without_the_length() -> None:
    import copy
    import pickle

    spec = job("a", 0.0, 12345, "a40", 2)
    hidden = HiddenSpec.of(spec, "m")
    data = pickle.dumps(hidden)
    assert b"12345" not in data and pickle.dumps(12345)[2:-1] not in data
    for twin in (copy.deepcopy(hidden), copy.copy(hidden), pickle.loads(data)):
        assert twin == hidden and twin.model == spec.model and twin.deadline is None
        with pytest.raises(HiddenInformation):
            _ = twin.iterations
