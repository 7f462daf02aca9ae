"""A real profiling run on cpu-2 (two gloo ranks, tiny sizes): every part of the profile is measured and composable."""

from __future__ import annotations

import math
import os

import pytest

pytest.importorskip("torch")

from arena_gym.types import GpuType, ModelRef, PipeSchedule, Plan, ResourceShape, StagePlan  # noqa: E402
from estimator.profile import COMM_OPS, load_profile  # noqa: E402
from estimator.profiled import ProfiledPerfModel  # noqa: E402
from real_runner.profiler.run import profile_testbed, write_profile  # noqa: E402
from real_runner.profiler.settings import ProfilerSettings  # noqa: E402
from real_runner.testbed import load_testbed  # noqa: E402
from tests.conftest import REPO  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]

TINY = ProfilerSettings(
    samples=(1, 2),
    overhead_samples=(1,),
    rounds=1,
    warmup_rounds=0,
    pipeline_samples=(1,),
    order_samples=(1,),
    order_in_flight=(2,),
    order_rounds=1,
    batches=(1, 4),
    comm_min_exp=10,
    comm_max_exp=12,
    comm_step_exp=2,
    comm_rounds=2,
    comm_warmup=0,
    optimizer_rounds=1,
    gap_s=0.0005,
)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    work = tmp_path_factory.mktemp("profile")
    prof = profile_testbed(load_testbed("cpu-2"), ["gpt__tiny"], TINY, work, env=os.environ, cwd=REPO, timeout_s=240)
    return load_profile(write_profile(prof, work / "PROFILE.json"))


def test_the_profile_describes_the_testbed(profile):
    d = profile.device
    assert (d.device_type, d.backend, d.testbed, d.nodes, d.devices_per_node) == ("cpu", "gloo", "cpu-2", 1, 2)
    assert d.threads_per_device == 1 and d.neighbours == "busy" and d.torch.startswith("2.")
    assert profile.settings == TINY.to_dict() and profile.code_version
    assert profile.cost["device_s"] == pytest.approx(2 * profile.cost["wall_s"])
    assert 0 < profile.cost["restart_s"] < profile.cost["wall_s"]


def test_the_restart_costs_were_measured_and_are_what_the_simulator_charges(profile):
    (name,) = profile.restart
    cost = profile.restart[name]
    assert name == "gpt__tiny" and 0 < cost.held_s <= cost.start_s and cost.save_s > 0 and cost.load_s > 0
    assert ProfiledPerfModel(profile).restart_cost(ModelRef.parse("gpt__tiny"), "cpu") == cost


def test_every_layer_wrapper_and_collective_was_measured(profile):
    curves = {(c.layer, c.variant, c.tp): c for c in (*profile.compute, *profile.overhead)}
    for key in [("embed", "compute", 1), ("block", "compute", 1), ("block", "compute", 2), ("head", "compute", 1)]:
        assert curves[key].samples == (1, 2) and all(t > 0 for t in curves[key].fw_s + curves[key].bw_s), key
    assert {k for k in curves if k[1] != "compute"} == {
        ("embed", "fsdp", 1),
        ("block", "fsdp", 1),
        ("head", "fsdp", 1),
        ("block", "tp", 1),
        ("model", "pipeline", 1),
    }
    assert {(t.op, t.ranks, t.nodes) for t in profile.comm} == {(op, 2, 1) for op in COMM_OPS}
    grouped = {(c.layer, c.variant, c.tp) for c in profile.grouped}  # wrapped layers timed on the real 2-rank group
    assert grouped == {("block", "tp@group", 2)} | {
        (k, f"{w}@group", 2) for k in ("embed", "block", "head") for w in ("fsdp", "fsdp_sync")
    }
    assert all(c.samples == (1, 2) and min(c.fw_s + c.bw_s) > 0 for c in profile.grouped)
    assert all(t.sizes == (1024, 4096) and min(t.seconds) > 0 for t in profile.comm)
    (order,) = profile.order  # GPipe's op order against gradient accumulation, whole model
    assert (order.model, order.in_flight, order.samples) == ("gpt__tiny", 2, (1,))
    assert math.isfinite(order.fraction[0]) and -1 < order.fraction[0] < 5
    block = profile.models["gpt__tiny"].layers["block"]
    assert (block.tensors, block.tp_tensors, block.elements) == (16, 12, 49984)
    assert profile.optimizer.per_tensor_s > 0 or profile.optimizer.per_element_s > 0


def test_the_profile_composes_every_kind_of_plan(profile):
    perf = ProfiledPerfModel(profile)
    shape = ResourceShape(GpuType("cpu"), 1, 2)
    plans = [
        Plan((StagePlan(0, 6, 2, 1),), 2),
        Plan((StagePlan(0, 6, 1, 2),), 1),
        Plan((StagePlan(0, 3, 1, 1), StagePlan(3, 6, 1, 1)), 4, PipeSchedule.ONE_F_ONE_B),
    ]
    for plan in plans:
        est = perf.estimate(ModelRef.parse("gpt__tiny"), 4, shape, plan)
        assert est.feasible and 0 < est.total_s < 60 and math.isfinite(est.total_s)
