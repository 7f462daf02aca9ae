"""The profiler on CUDA: layers timed with CUDA events, collective tables with nccl (skipped without CUDA)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from arena_gym.types import GpuType, ModelRef, Plan, ResourceShape, StagePlan  # noqa: E402
from estimator.profiled import ProfiledPerfModel  # noqa: E402
from real_runner import testbed as testbeds  # noqa: E402
from real_runner.profiler.run import profile_testbed  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.real_runner.profiler.test_run import TINY  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_profiles_gpus_with_nccl(tmp_path):
    devices = [0, 1] if torch.cuda.device_count() >= 2 else [0]
    node = {"host": "localhost", "devices": devices}
    testbed = testbeds.testbed_from_dict({"name": "gpu-node", "device_type": "a100", "nodes": [node]}, "gpu")
    profile = profile_testbed(
        testbed, ["gpt__tiny"], TINY, tmp_path, env=os.environ, cwd=REPO, device="cuda", timeout_s=500
    )
    assert profile.device.backend == "nccl" and profile.device.device_type == "a100-40gb"
    assert all(t > 0 for c in profile.compute for t in c.fw_s + c.bw_s)
    assert len(profile.comm) == (5 if len(devices) == 2 else 0)
    shape = ResourceShape(GpuType("a100"), 1, len(devices))
    plan = Plan((StagePlan(0, 6, len(devices), 1),), 1)
    assert ProfiledPerfModel(profile).estimate(ModelRef.parse("gpt__tiny"), 4, shape, plan).total_s > 0
