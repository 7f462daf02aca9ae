"""Registries: module-level names, idempotent registration, module:attr specs, entry points, strict keywords."""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from agents.arena import ArenaPolicy
from agents.fcfs import FCFS
from arena_gym.cluster import PRESETS
from arena_gym.harness.experiment import load_jobs
from arena_gym.registry import (
    Registry,
    make_perf,
    make_policy,
    perf_registry,
    policy_registry,
    resolve,
    trace_registry,
)
from arena_gym.types import JobSpec
from tests.helpers import job, uniform_model

HERE = "tests.arena_gym.test_registry"


class ToyPolicy:
    """A policy that starts nothing; takes ``name`` and a generator, as the registry offers them."""

    ap_search = "full"

    def __init__(self, name: str = "toy", rng: np.random.Generator | None = None, patience: int = 1) -> None:
        self.name, self.rng, self.patience = name, rng, patience

    def reset(self) -> None:
        """Nothing to forget."""

    def decide(self, snapshot):
        """Start nothing."""
        from arena_gym.types import Decision

        return Decision()


def toy_perf(cluster, seed: int = 0):
    """A perf-model factory whose model is named after the cluster and seed it was built for."""
    return dataclasses.replace(uniform_model(), name=f"toy-{cluster.name}-{seed}")


def toy_trace(seed: int = 0) -> list[JobSpec]:
    """Three jobs, shifted by the seed."""
    return [job(f"t{i}", float(seed + 10 * i), 5, "a40", 1) for i in range(3)]


@pytest.fixture
def policies():
    """The module-level policy registry, restored after the test."""
    registry = policy_registry()
    saved = dict(registry.entries)
    yield registry
    registry._entries = saved


def test_registries_are_module_level_and_registration_takes_effect(policies):
    assert policy_registry() is policies and perf_registry() is perf_registry() and trace_registry() is trace_registry()
    policies.register("fcfs-spread", "agents.fcfs:FCFS", {"relax": True}, "FCFS, spread when needed")
    policy = make_policy("fcfs-spread")
    assert isinstance(policy, FCFS) and policy.config.relax and policy.name == "fcfs-spread"
    assert "fcfs-spread" in policies.names()


def test_registering_the_same_entry_again_is_a_no_op_and_a_different_one_needs_replace(policies):
    policies.register("mine", f"{HERE}:ToyPolicy", {"patience": 2})
    policies.register("mine", f"{HERE}:ToyPolicy", {"patience": 2})
    with pytest.raises(ValueError, match="already registered"):
        policies.register("mine", f"{HERE}:ToyPolicy", {"patience": 3})
    policies.register("mine", f"{HERE}:ToyPolicy", {"patience": 3}, replace=True)
    assert make_policy("mine").patience == 3
    with pytest.raises(ValueError, match="already registered"):
        policies.register("arena", "agents.fcfs:FCFS")


@pytest.mark.parametrize(
    "name, target, message",
    [
        ("", "agents.fcfs:FCFS", "non-empty"),
        ("a:b", "agents.fcfs:FCFS", "without ':'"),
        ("ok", "agents.fcfs.FCFS", "module:attr"),
        ("ok", "agents/fcfs.py:FCFS", "module:attr"),
    ],
)
def test_bad_registrations_are_refused(policies, name, target, message):
    with pytest.raises(ValueError, match=message):
        policies.register(name, target)


def test_the_name_keyword_never_clashes_with_register(policies):
    # the registry passes the registered name itself; default keywords travel as a mapping
    policies.register("arena-shallow", "agents.arena:ArenaPolicy", {"downgrade_depth": 1})
    policy = make_policy("arena-shallow")
    assert isinstance(policy, ArenaPolicy) and policy.name == "arena-shallow" and policy.config.downgrade_depth == 1
    policies.register("named", f"{HERE}:ToyPolicy", {"name": "display-name"})
    assert make_policy("named").name == "display-name"


def test_a_typo_in_default_keywords_is_an_error_naming_the_valid_ones(policies):
    policies.register("arena-typo", "agents.arena:ArenaPolicy", {"no_scalling": True})
    with pytest.raises(ValueError, match="no_scalling.*valid:.*no_scaling"):
        make_policy("arena-typo")
    policies.register("toy-typo", f"{HERE}:ToyPolicy", {"patiense": 2})
    with pytest.raises(ValueError, match="unknown keyword argument.*patiense; valid: name, rng, patience"):
        make_policy("toy-typo")


def test_offered_keywords_reach_only_factories_that_name_them():
    registry = Registry("thing", group=None)
    registry.register("toy", f"{HERE}:ToyPolicy")
    rng = np.random.default_rng(3)
    assert registry.make("toy", rng=rng, cluster="ignored").rng is rng
    registry.register("fcfs", "agents.fcfs:FCFS")
    assert isinstance(registry.make("fcfs", rng=rng), FCFS)  # FCFS takes **overrides, yet gets no rng


def test_module_attr_specs_build_policies_perf_models_and_traces():
    policy = make_policy(f"{HERE}:ToyPolicy", seed=4)
    assert isinstance(policy, ToyPolicy) and policy.name == f"{HERE}:ToyPolicy"
    assert policy.rng.integers(1 << 30) == make_policy(f"{HERE}:ToyPolicy", seed=4).rng.integers(1 << 30)
    tiny = PRESETS["tiny"]
    assert make_perf(f"{HERE}:toy_perf", tiny, seed=7).name == "toy-tiny-7"
    jobs = load_jobs(f"{HERE}:toy_trace", tiny, uniform_model(), seed=100)
    assert [j.submit_time for j in jobs] == [100.0, 110.0, 120.0]


class OnlyDecides:
    """A plug-in with nothing but ``decide``: it starts every waiting job on one GPU of the first type."""

    def decide(self, snapshot):
        """Start what fits, one GPU each."""
        from agents.common import FreeGpus
        from arena_gym.placement import allocation
        from arena_gym.types import Decision

        gpus, starts = FreeGpus(snapshot), []
        for view in snapshot.pending:
            placement = gpus.find(snapshot.cluster.gpu_types[0], 1)
            if placement is not None:
                gpus.take(placement)
                starts.append((view.job_id, allocation(snapshot.perf, view.spec, placement)))
        return Decision(allocations=tuple(starts))


def test_a_plug_in_that_defines_only_decide_gets_the_protocol_defaults_and_runs():
    from arena_gym.harness.experiment import play
    from arena_gym.sim import SimBackend

    policy = make_policy(f"{HERE}:OnlyDecides")
    assert (policy.name, policy.ap_search, policy.clairvoyant) == (f"{HERE}:OnlyDecides", "full", False)
    policy.reset()
    model = uniform_model()
    jobs = (job("a", 0.0, 5, "a40", 1), job("b", 1.0, 5, "a40", 1))
    episode = play(policy, jobs, SimBackend(PRESETS["tiny"], model, model))
    assert episode.metrics["jobs_finished"] == 2


class Undecided:
    """Named, but no ``decide``."""

    name = "undecided"


def test_a_plug_in_without_decide_is_a_one_line_error():
    with pytest.raises(
        ValueError, match=rf"^policy '{HERE}:Undecided' \(Undecided\) has no decide\(snapshot\) method$"
    ):
        make_policy(f"{HERE}:Undecided")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_module_here:Policy", "policy 'no_such_module_here:Policy': cannot import no_such_module_here"),
        (f"{HERE}:Missing", f"module {HERE} has no attribute Missing"),
        (f"{HERE}:HERE", "not callable"),
        ("fcsf", r"unknown policy 'fcsf'; valid: .*arena.*fcfs.*sb3:\.\.\., residual:\.\.\., module:attr"),
        ("sb3:", "needs an argument"),
    ],
)
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(ValueError, match=message) as err:
        make_policy(spec)
    assert "\n" not in str(err.value)


def test_a_trace_factory_must_return_jobs():
    with pytest.raises(ValueError, match="returned no JobSpec"):
        load_jobs(f"{HERE}:toy_perf", PRESETS["tiny"], uniform_model(), seed=0)


def _install_entry_points(root: Path, groups: dict[str, dict[str, str]]) -> None:
    """A minimal installed distribution (a ``.dist-info`` folder) declaring ``groups`` of entry points."""
    info = root / "toy_plugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugins\nVersion: 1.0\n")
    body = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in names.items()) for group, names in groups.items()
    )
    (info / "entry_points.txt").write_text(textwrap.dedent(body))


def test_entry_points_of_installed_packages_are_found_by_name(tmp_path, monkeypatch):
    _install_entry_points(
        tmp_path,
        {
            "arena_gym.policies": {"toy-ep": f"{HERE}:ToyPolicy"},
            "arena_gym.perf_models": {"toy-perf": f"{HERE}:toy_perf"},
            "arena_gym.traces": {"toy-trace": f"{HERE}:toy_trace"},
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert "toy-ep" in policy_registry().names()
    policy = make_policy("toy-ep")
    assert isinstance(policy, ToyPolicy) and policy.name == "toy-ep"
    tiny = PRESETS["tiny"]
    assert make_perf("toy-perf", tiny, seed=2).name == "toy-tiny-2"
    assert len(load_jobs("toy-trace", tiny, uniform_model(), seed=0)) == 3
    assert make_policy("arena").name == "arena"  # registered names come first


@pytest.mark.parametrize(
    "command",
    [["simulate", "--policy", "fcfs", "--cluster", "tiny", "--no-plots"], ["trace", "info", "synthetic:n_jobs=3"]],
)
def test_a_foreign_traces_package_first_on_the_path_is_named_in_one_line(tmp_path, command):
    other = tmp_path / "other"
    (other / "traces").mkdir(parents=True)
    (other / "traces" / "__init__.py").write_text("NAME = 'someone else'\n")
    out = tmp_path / "run"
    args = [*command, *(["--trace", "synthetic:n_jobs=3", "--out", str(out)] if command[0] == "simulate" else [])]
    env = {**os.environ, "PYTHONPATH": str(other), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "arena_gym", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert f"the 'traces' package imported is {other / 'traces'}, not arena-gym's" in line
    assert not out.exists()


def test_prefixes_list_every_handler_with_its_argument_name() -> None:
    local = Registry("thing", prefixes={"a": "mod:first"}, arguments={"a": "CSV"})
    local.register_prefix("b", "mod:second")
    local.register_prefix("c", "mod:third", "PATH")
    assert {p: (x.target, x.argument) for p, x in local.prefixes().items()} == {
        "a": ("mod:first", "CSV"),
        "b": ("mod:second", "ARG"),
        "c": ("mod:third", "PATH"),
    }
    assert policy_registry().prefixes()["sb3"].argument == "PATH"
    assert set(perf_registry().prefixes()) >= {"measured", "profiled", "calibrated", "noisy"}


def test_ctrl_c_during_a_lazy_import_is_delivered_once_the_module_is_whole(
    tmp_path, monkeypatch, ctrl_c_raises
) -> None:
    (tmp_path / "stopped_while_imported.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)  # as if an extension's initialisation were running now\n"
        "for _ in range(1000):\n"
        "    time.sleep(0)\n"
        "FINISHED = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "stopped_while_imported", raising=False)
    with pytest.raises(KeyboardInterrupt):
        resolve("stopped_while_imported:FINISHED")
    assert sys.modules["stopped_while_imported"].FINISHED is True
    assert resolve("stopped_while_imported:FINISHED") is True  # imported once: no signal held the second time
    monkeypatch.delitem(sys.modules, "stopped_while_imported")
