"""The Ray launcher: the same deploy against a local Ray head, and a held generation reattached by name.

Skipped where Ray is not installed (``pip install -e ".[ray]"``). Ray writes ``~/.ray`` (an auth
token) and a temp directory: both are redirected into directories this test removes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from arena_gym.harness.deploy import DeployConfig, write_results  # noqa: E402
from arena_gym.types import GpuType, ModelRef, Placement, ResourceShape  # noqa: E402
from estimator import default_perf_model  # noqa: E402
from real_runner.launchers.base import LaunchRequest  # noqa: E402
from real_runner.launchers.local import find_processes  # noqa: E402
from real_runner.launchers.ray_launcher import RayLauncher  # noqa: E402
from real_runner.live.devices import DeviceMap  # noqa: E402
from real_runner.plans import plan_to_dict  # noqa: E402
from real_runner.spec import WorkerSpec  # noqa: E402
from real_runner.testbed import load_testbed  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One local Ray head (2 CPUs, no dashboard) for the module; its home and temp directories are removed after."""
    home = tmp_path_factory.mktemp("home")
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp, namespace="arena-gym-test", log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)
            shutil.rmtree(home, ignore_errors=True)


def test_deploy_through_ray_finishes_every_job_on_its_trajectory(run_deploy, local_ray) -> None:
    config = DeployConfig(
        policy="arena",
        trace="live:n_jobs=2,work=0.1,span_s=2",
        testbed="cpu-2",
        launcher="ray",
        plots=False,
        status_every_s=5,
    )
    dep, _, out, result = run_deploy(config)
    write_results(out, dep, result)
    assert result.metrics["jobs_finished"] == 2 and result.metrics["trajectories_ok"] == 2
    assert (result.live_jobs["final_step"] == result.live_jobs["target_step"]).all()
    assert result.comparison is not None and len(result.comparison.jobs) == 2
    assert find_processes(str(out)) == []
    assert not [a for a in ray.util.list_named_actors(all_namespaces=True) if "live-" in str(a)]


def test_a_held_generation_is_reattached_by_name_and_stopped(tmp_path, local_ray) -> None:
    bed = load_testbed("cpu-2")
    slots = DeviceMap(bed, cores=sorted(os.sched_getaffinity(0))[:2]).acquire("j", Placement(GpuType("cpu"), (0,), 2))
    shape = ResourceShape(GpuType("cpu"), 1, 2)
    plan = default_perf_model(bed.cluster()).proxy_plan(ModelRef.parse("gpt__tiny"), 16, shape)
    spec = WorkerSpec.from_dict(
        {
            "job_id": "j",
            "model": "gpt__tiny",
            "global_batch": 16,
            "target_step": 5,
            "plan": plan_to_dict(plan),
            "checkpoint_dir": str(tmp_path / "ckpt"),
            "progress_path": str(tmp_path / "progress.jsonl"),
        }
    )
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(spec.to_json())
    request = LaunchRequest("j", 1, spec_path, slots, tmp_path / "gen1", {**os.environ, "OMP_NUM_THREADS": "1"})
    launcher = RayLauncher(namespace="arena-gym-test", cwd=REPO)
    gen = launcher.launch(request)
    deadline = time.monotonic() + 180
    while not gen.held_ready():
        assert time.monotonic() < deadline and all(c is None for c in gen.poll()), gen.log_tail(0)
        time.sleep(0.2)
    again = launcher.reattach(request, gen.describe())
    assert again is not None and again.pids == gen.pids and again.poll() == [None, None]
    again.terminate()  # held ranks stopped before their release exit 0 and write nothing
    while any(c is None for c in again.poll()):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert again.poll() == [0, 0] and not (tmp_path / "progress.jsonl").exists()
    again.close()
    assert launcher.reattach(request, gen.describe()) is None
