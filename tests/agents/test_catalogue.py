"""A built-in policy is two files: its module in ``agents/`` and its entry in ``agents/catalogue.py``.

A temporary module joins the ``agents`` package and one entry joins the catalogue; the registry,
loaded afresh as a new process loads it, then knows the name everywhere: ``simulate``, the env's
expert, and the lists the tests derive from the registry.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import agents
from agents import catalogue
from arena_gym.harness.cli import main
from arena_gym.registry import Entry, make_policy, policy_registry
from tests.arena_gym.core.test_information import registered_non_clairvoyant
from tests.envs.conftest import env_perf_model
from tests.envs.test_expert import heuristics, play_expert

NAME = "toy-srf"

#: The policy module, modelled on agents/srtf.py: jobs by requested GPU count, then submission.
POLICY_MODULE = '''
"""Smallest request first, preemptive, at the requested shape."""

from agents.common import Estimates, Workspace, fixed_shape, priority_fill
from arena_gym.types import Decision, OverheadClass, Snapshot


class SmallestRequestFirst:
    """Jobs ranked by requested GPU count, then submission; a smaller request preempts a larger one of its type."""

    ap_search = OverheadClass.FULL
    clairvoyant = False

    def __init__(self, name: str = "toy-srf") -> None:
        self.name = name
        self._ap = Estimates(dp=False)

    def reset(self) -> None:
        self._ap.clear()

    def decide(self, snapshot: Snapshot) -> Decision:
        self._ap.bind(snapshot.perf)
        ranked = sorted(
            (*snapshot.pending, *snapshot.running),
            key=lambda v: (v.spec.requested_gpus or 1, v.spec.submit_time, v.job_id),
        )
        ws = Workspace(snapshot)
        priority_fill(ws, ranked, lambda v: fixed_shape(snapshot, self._ap, v), lambda v: self._ap.feasible(v.spec))
        return ws.decision(snapshot.perf)
'''


@pytest.fixture
def newcomer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``agents/toy_srf.py`` and its catalogue entry, with the policy registry reloaded; all undone afterwards."""
    (tmp_path / "toy_srf.py").write_text(textwrap.dedent(POLICY_MODULE))
    monkeypatch.setattr(agents, "__path__", [*agents.__path__, str(tmp_path)])
    monkeypatch.setitem(
        catalogue.POLICIES, NAME, Entry("agents.toy_srf:SmallestRequestFirst", {}, "smallest request first")
    )
    registry = policy_registry()
    monkeypatch.setattr(registry, "_entries", {})  # as in a new process: the catalogues load on first use
    monkeypatch.setattr(registry, "_catalogues", None)
    yield tmp_path
    sys.modules.pop("agents.toy_srf", None)
    vars(agents).pop("toy_srf", None)


def test_the_new_policy_is_known_by_name(newcomer: Path) -> None:
    assert NAME in policy_registry().names() and "srtf" in policy_registry().names()
    policy = make_policy(NAME)
    assert type(policy).__module__ == "agents.toy_srf" and policy.name == NAME


def test_simulate_runs_the_new_policy_by_name(newcomer: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = newcomer / "run"
    args = ["simulate", "--policy", NAME, "--trace", "synthetic:n_jobs=12", "--cluster", "tiny", "--no-plots"]
    assert main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["jobs_finished"] == 12


def test_the_registry_derived_lists_of_the_tests_take_it_in(newcomer: Path) -> None:
    assert NAME in heuristics() and NAME in registered_non_clairvoyant()
    result, jobs = play_expert(env_perf_model(), NAME)  # what the expert test runs for every heuristic
    assert result.invalid_actions == 0 and result.metrics["jobs_finished"] == jobs > 0
