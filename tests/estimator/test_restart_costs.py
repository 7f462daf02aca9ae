"""Measured (re)start costs in a profile (version 5) and in a calibrated parameter file, and what the
``profiled:`` and ``calibrated:`` performance models answer with them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from arena_gym.restarts import RestartCost, RestartCosts
from arena_gym.types import ClusterSpec, GpuType, ModelRef, NodeGroup
from estimator.params import default_params
from estimator.perfmodel import calibrated_perf_model
from estimator.profile import PROFILE_VERSION, Profile, ProfileError, load_profile
from estimator.profiled import ProfiledPerfModel
from estimator.restart_costs import RestartTable
from tests.conftest import REPO
from tests.estimator.test_profile import synthetic_profile

TINY = ModelRef.parse("gpt__tiny")
CPU2 = ClusterSpec("cpu-2", (NodeGroup(GpuType("cpu"), 1, 2),))
COST = RestartCost(start_s=4.0, held_s=3.0, save_s=0.5, load_s=0.25)


def test_a_profile_keeps_its_restart_costs_through_its_file(tmp_path):
    profile = dataclasses.replace(synthetic_profile(), restart={"gpt__tiny": COST})
    path = tmp_path / "PROFILE.json"
    path.write_text(profile.to_json())
    loaded = load_profile(path)
    assert loaded.version == PROFILE_VERSION == 5 and loaded.restart == {"gpt__tiny": COST}
    perf = ProfiledPerfModel(loaded, CPU2)
    assert isinstance(perf, RestartCosts)
    assert perf.restart_cost(TINY, "cpu") == COST
    assert perf.restart_cost(ModelRef.parse("gpt__mini"), "cpu") is None  # not profiled: the constants
    assert perf.restart_cost(TINY, "a100") is None  # another type: the constants


def test_an_older_profile_loads_without_restart_costs():
    path = REPO / "benchmarks" / "results" / "profiler" / "profile-cpu-2-v4-b.json"
    profile = load_profile(path)
    assert profile.version < 5 and profile.restart == {} and profile.restart_table() is None
    assert ProfiledPerfModel(profile, CPU2).restart_cost(TINY, "cpu") is None
    assert "restart" not in profile.to_dict()


@pytest.mark.parametrize(
    ("restart", "match"),
    [
        ({"gpt__mini": dataclasses.asdict(COST)}, "restart names model.* not in models: gpt__mini"),
        ({"gpt__tiny": {"start_s": 1.0}}, r"restart.gpt__tiny must hold exactly start_s, held_s, save_s, load_s"),
        ({"gpt__tiny": {**dataclasses.asdict(COST), "save_s": -1}}, "save_s must be a finite number >= 0"),
    ],
)
def test_a_bad_restart_section_is_refused_in_one_line(restart, match):
    data = synthetic_profile().to_dict() | {"restart": restart}
    with pytest.raises(ProfileError, match=match):
        Profile.from_dict(data)


def test_calibrated_parameters_carry_the_profiles_restart_costs(tmp_path):
    with_costs, without = tmp_path / "with.json", tmp_path / "without.json"
    default_params().save(with_costs, {"restart": RestartTable("cpu", {"gpt__tiny": COST}).to_dict()})
    default_params().save(without)
    assert calibrated_perf_model(str(with_costs), CPU2).restart_cost(TINY, "cpu") == COST
    assert calibrated_perf_model(str(without), CPU2).restart_cost(TINY, "cpu") is None
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(with_costs.read_text()), "restart": {"models": {}}}))
    with pytest.raises(ValueError, match="restart must hold exactly device_type and models"):
        calibrated_perf_model(str(bad), CPU2)
