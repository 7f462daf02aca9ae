"""The decide-apply-advance loop (``run_episode``) on a scripted backend and on the simulator."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from agents.fcfs import FCFS
from arena_gym.cluster import PRESETS
from arena_gym.loop import _DelayedBar, run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.protocols import InvalidDecision
from arena_gym.records import EpisodeRecord
from arena_gym.types import Decision, JobId, JobSpec, Snapshot
from tests.helpers import CheckedBackend, job, sim_backend, uniform_model


class ScriptedBackend:
    """A ClusterBackend that hands out prepared snapshots and records every call."""

    def __init__(self, snapshots: Sequence[Snapshot | None], reject: int | None = None) -> None:
        self.snapshots = list(snapshots)
        self.reject = reject
        self.calls: list[tuple] = []

    def reset(self, jobs: Sequence[JobSpec]) -> Snapshot | None:
        self.calls.append(("reset", tuple(j.job_id for j in jobs)))
        return self.snapshots.pop(0)

    def apply(self, decision: Decision) -> None:
        self.calls.append(("apply", decision))
        if self.reject is not None and len([c for c in self.calls if c[0] == "apply"]) == self.reject:
            raise InvalidDecision("scripted rejection")

    def advance(self) -> Snapshot | None:
        self.calls.append(("advance",))
        return self.snapshots.pop(0)

    def now(self) -> float:
        return 0.0

    def close(self) -> None:
        self.calls.append(("close",))

    def record(self, policy: str, decisions: int = 0, decide_wall_s: float = 0.0) -> EpisodeRecord:
        self.calls.append(("record", policy, decisions))
        return EpisodeRecord(policy, PRESETS["tiny"], (), (), 0.0, 0.0, math.inf, decisions, decide_wall_s)


class CountingPolicy:
    """Preempts job ``n`` at its n-th decision (a distinct decision per call) and counts resets."""

    ap_search = "full"

    def __init__(self) -> None:
        self.name = "counting"
        self.resets = 0
        self.seen: list[float] = []

    def reset(self) -> None:
        self.resets += 1
        self.seen.clear()

    def decide(self, snapshot: Snapshot) -> Decision:
        self.seen.append(snapshot.now)
        return Decision(preemptions=(JobId(f"j{len(self.seen)}"),))


def snapshot(now: float) -> Snapshot:
    return Snapshot(now=now, cluster=PRESETS["tiny"], free={}, pending=(), running=(), perf=uniform_model())


def test_one_decision_per_snapshot_each_applied_before_advancing():
    backend = ScriptedBackend([snapshot(0.0), snapshot(5.0), snapshot(9.0), None])
    policy = CountingPolicy()
    record = run_episode(backend, policy, [job("a", 0, 1, "a40", 1)])
    assert policy.resets == 1 and policy.seen == [0.0, 5.0, 9.0]
    kinds = [c[0] for c in backend.calls]
    assert kinds == ["reset", "apply", "advance", "apply", "advance", "apply", "advance", "record"]
    applied = [c[1].preemptions for c in backend.calls if c[0] == "apply"]
    assert applied == [("j1",), ("j2",), ("j3",)]
    assert backend.calls[0] == ("reset", ("a",)) and backend.calls[-1] == ("record", "counting", 3)
    assert record.decisions == 3 and record.decide_wall_s >= 0.0


def test_nothing_is_decided_when_reset_leaves_nothing_to_decide():
    backend = ScriptedBackend([None])
    policy = CountingPolicy()
    record = run_episode(backend, policy, [])
    assert policy.resets == 1 and policy.seen == [] and record.decisions == 0
    assert [c[0] for c in backend.calls] == ["reset", "record"]


def test_a_rejected_decision_propagates_and_stops_the_episode():
    backend = ScriptedBackend([snapshot(0.0), snapshot(1.0), None], reject=2)
    with pytest.raises(InvalidDecision, match="scripted rejection"):
        run_episode(backend, CountingPolicy(), [])
    assert [c[0] for c in backend.calls] == ["reset", "apply", "advance", "apply"]


class Counted:
    """Wraps a policy, counting its resets and decisions."""

    def __init__(self, policy) -> None:
        self.policy, self.name, self.ap_search = policy, policy.name, policy.ap_search
        self.clairvoyant = bool(getattr(policy, "clairvoyant", False))
        self.resets = self.decides = 0

    def reset(self) -> None:
        self.resets += 1
        self.policy.reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        self.decides += 1
        return self.policy.decide(snapshot)


def test_episodes_on_the_simulator_reset_the_policy_and_count_its_decisions():
    jobs = [job("A", 0, 50, "a40", 2), job("B", 10, 20, "a10", 1), job("C", 20, 30, "a40", 4)]
    policy = Counted(FCFS())
    first = run_episode(CheckedBackend(sim_backend(PRESETS["tiny"], uniform_model(), policy)), policy, jobs)
    second = run_episode(CheckedBackend(sim_backend(PRESETS["tiny"], uniform_model(), policy)), policy, jobs)
    assert policy.resets == 2 and policy.decides == first.decisions + second.decisions
    assert first.events == second.events and first.policy == "fcfs" and first.decisions >= 3
    assert compute_metrics(first)["jobs_finished"] == 3


def test_the_progress_bar_appears_only_once_the_delay_has_passed(capsys):
    quiet = _DelayedBar(10, "p", delay_s=3600.0)
    quiet.update(4)
    quiet.close()
    assert quiet.bar is None and quiet.done == 4 and capsys.readouterr().err == ""
    shown = _DelayedBar(10, "p", delay_s=0.0)
    shown.update(3)  # the bar appears here, counting the jobs finished so far
    shown.update(2)
    assert shown.bar is not None and shown.bar.n == 5 and shown.bar.total == 10
    shown.close()
    assert "p:" in capsys.readouterr().err
