"""The prepared GPU check: its early exit without CUDA and its pure helpers (the GPU parts run on a GPU only)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def gpu_check():
    return load_script("gpu_check", "benchmarks")


def test_without_cuda_it_exits_2_with_one_line_and_writes_nothing(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "figures.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == gpu_check().NO_CUDA_EXIT == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpu_check: no CUDA device")
    assert not out.exists()


def test_device_names_map_to_catalogue_types():
    from arena_gym.hardware import get_gpu

    kind = gpu_check().catalogue_type
    assert kind("NVIDIA H200", 140.4) == "h200" and kind("NVIDIA H100 80GB HBM3", 79.1) == "h100"
    assert kind("NVIDIA A100-SXM4-80GB", 79.2) == "a100-80gb" and kind("NVIDIA A100-PCIE-40GB", 39.4) == "a100-40gb"
    assert kind("Tesla V100-SXM2-16GB", 15.8) == "v100-16gb" and kind("NVIDIA GeForce RTX 3090", 23.7) == "rtx3090"
    assert all(get_gpu(name) for _, name in gpu_check().NAME_TYPES if name not in ("a100", "v100"))
    with pytest.raises(ValueError, match="'Radeon X' is not in the hardware catalogue"):
        kind("Radeon X", 16.0)


def test_model_tflops_and_pytest_counts():
    check = gpu_check()
    # the plain bf16 loop: gpt__1.3B, batch 8 x 1024 tokens, 0.162 s a step -> about 398 TFLOP/s
    assert check.model_tflops(1.3156e9, 8 * 1024, 0.162) == pytest.approx(399.1, abs=0.5)
    assert check.pytest_counts("x\n4 passed, 2 skipped, 1 deselected in 31.2s\n") == {
        "passed": 4,
        "skipped": 2,
        "deselected": 1,
    }
    assert check.pytest_counts("ERROR: no tests ran") == {}


def test_the_deployed_jobs_are_a_valid_trace(tmp_path):
    from traces.io import load_trace

    trace = load_trace(str(gpu_check().deploy_trace(tmp_path / "jobs.csv", "h200")))
    assert [
        (j.model.name, j.global_batch, j.iterations, j.requested_gpu_type, j.requested_gpus) for j in trace.jobs
    ] == [
        ("gpt__350M", 8, 60, "h200", 1),
        ("gpt__350M", 8, 30, "h200", 1),
        ("gpt__350M", 8, 45, "h200", 1),
    ]


def test_goals_unmeasured_are_none_and_measured_are_judged():
    check = gpu_check()
    empty = check.goals({})
    assert all(g["value"] is None and g["met"] is None for g in empty.values())
    results = {
        "probe_gpt__1.3B": {"runner_s": 0.2, "runner_tflops": 320.0},
        "probe_gpt__350M": {"runner_s": 0.2, "runner_tflops": 200.0},
        "estimator_calibrated": {"gpt__1.3B": {"error_vs_runner": -0.2}, "gpt__350M": {"error_vs_runner": 0.05}},
        "deploy": {"metrics": {"sim_pred_avg_jct_error": 0.08, "sim_avg_jct_error": -0.12}},
    }
    g = check.goals(results)
    assert g["gpt__1.3B_tflops"]["met"] and not g["gpt__350M_tflops"]["met"]
    assert not g["gpt__1.3B_calibrated_error"]["met"] and g["gpt__350M_calibrated_error"]["met"]
    assert g["deploy_avg_jct_error"] == {"value": 0.08, "goal": 0.10, "met": True}
    assert g["deploy_twin_avg_jct_error"] == {"value": -0.12, "goal": 0.10, "met": False}
