"""The live backend on a GPU testbed file: ranks see their device through CUDA_VISIBLE_DEVICES (marker ``gpu``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from arena_gym.harness.deploy import DeployConfig  # noqa: E402
from real_runner.progress import read_progress  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.distributed,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_jobs_train_on_the_gpu_the_testbed_names(tmp_path, run_deploy) -> None:
    bed = tmp_path / "gpu.json"
    bed.write_text(
        json.dumps({"name": "gpu1", "device_type": "a100", "nodes": [{"host": "localhost", "devices": [0]}]})
    )
    config = DeployConfig(
        policy="fcfs", trace="live:n_jobs=2,work=0.2,span_s=1,gpu_type=a100", testbed=str(bed), plots=False
    )
    dep, backend, _, result = run_deploy(config)
    assert result.metrics["jobs_finished"] == 2 and result.metrics["trajectories_ok"] == 2
    assert result.metrics["oversubscription"] == 1.0
    for spec in dep.jobs:
        starts = [r for r in read_progress(Path(backend.progress_path(spec.job_id))) if r.event == "start"]
        assert starts and all(r.info["device"] == "cuda:0" for r in starts)
