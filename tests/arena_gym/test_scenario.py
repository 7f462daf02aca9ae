"""The scenario builder: one cluster resolver, the truth and the belief built once, the simulator settings shared."""

from __future__ import annotations

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.perf import NoisyPerfModel
from arena_gym.scenario import Scenario, build_scenario, perf_model, scaled_overhead
from arena_gym.sim import OverheadModel, SimConfig
from arena_gym.types import OverheadClass

#: Perf models built by :func:`counted_perf` (a ``module:attr`` perf spec).
BUILT: list[str] = []


def counted_perf(cluster):
    """The estimator, counting every build (to show a scenario builds its models once)."""
    from estimator import default_perf_model

    BUILT.append(cluster.name)
    return default_perf_model(cluster)


def test_a_cluster_variant_keeps_the_base_and_changes_the_node_counts() -> None:
    scenario = build_scenario("testbed-64[a40=8]")
    nodes = {g.gpu_type: g.nodes for g in scenario.cluster.groups}
    assert scenario.cluster.name == "testbed-64[a40=8]" and nodes == {"a40": 8, "a10": 16}
    assert scenario.belief is scenario.truth  # no belief given: policies plan with the truth
    with pytest.raises(ValueError, match="not TYPE=NODES"):
        build_scenario("testbed-64[v100=2]")


def test_the_belief_wraps_the_truth_and_a_given_truth_is_kept() -> None:
    truth = perf_model("estimator", PRESETS["tiny"])
    scenario = build_scenario("tiny", belief="noisy:0.2", seed=4, truth=truth)
    assert scenario.truth is truth and isinstance(scenario.belief, NoisyPerfModel)
    assert scenario.belief.base is truth
    assert perf_model(truth, PRESETS["tiny"]) is truth  # a model is taken as given


def test_backends_share_the_settings_and_charge_each_policys_class() -> None:
    sim = SimConfig(scaled_overhead(2.0), round_s=300.0, event_decisions=False)
    scenario = build_scenario("tiny", sim=sim)
    assert scenario.sim_config() is sim
    full = scenario.sim_config("full")
    assert full.overhead_class is OverheadClass.FULL and (full.overhead, full.round_s, full.event_decisions) == (
        sim.overhead,
        300.0,
        False,
    )
    first, second = scenario.backend("none"), scenario.backend("none")
    assert first is not second and first.config == second.config == scenario.sim_config("none")
    assert scenario == Scenario(scenario.cluster, scenario.truth, scenario.belief, sim)


def test_scaled_overheads_multiply_every_constant_and_refuse_overflow() -> None:
    base, tripled = OverheadModel(), scaled_overhead(3.0)
    assert tripled.seconds(OverheadClass.PRUNED, 4) == pytest.approx(3 * base.seconds(OverheadClass.PRUNED, 4))
    with pytest.raises(ValueError, match="overflow"):
        scaled_overhead(1e308)


def test_the_models_are_built_once_per_scenario() -> None:
    BUILT.clear()
    scenario = build_scenario("tiny", f"{__name__}:counted_perf", belief="noisy:0.1")
    scenario.backend("pruned"), scenario.backend("full")
    assert BUILT == ["tiny"]
