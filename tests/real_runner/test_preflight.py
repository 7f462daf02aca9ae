"""Preflight: a testbed is checked against the machine, and refused in one line, before anything is launched."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena_gym.registry import make_perf
from arena_gym.types import JobId, JobSpec, ModelRef
from real_runner.preflight import MachineFacts, preflight, probe_machine
from real_runner.testbed import Testbed, TestbedNode, load_testbed

GIB = 2**30


def gpu_bed(devices: tuple[int, ...] = (0, 1)) -> Testbed:
    return Testbed("lab", "a100", (TestbedNode("localhost", devices),))


def refusal(testbed: Testbed, **kwargs) -> str:
    with pytest.raises(ValueError) as refused:
        preflight(testbed, **kwargs)
    message = str(refused.value)
    assert message.startswith("preflight: ") and len(message.splitlines()) == 1
    return message


def test_a_cpu_testbed_passes_without_asking_torch() -> None:
    preflight(load_testbed("cpu-2"), models=[("gpt__tiny", 200_000)])
    assert not probe_machine(gpu=False).cuda


def test_a_machine_without_torch_is_refused_naming_the_install_command() -> None:
    no_torch = MachineFacts(64 * GIB, torch=False)
    assert refusal(load_testbed("cpu-2"), facts=no_torch) == (
        "preflight: the jobs of testbed cpu-2 run on this machine and need torch, which is not installed: "
        "pip install 'arena-gym[runner]' (in a clone: pip install -e '.[runner]')"
    )


def test_a_cuda_testbed_is_refused_on_a_machine_without_cuda() -> None:
    if probe_machine(gpu=True).cuda:
        pytest.skip("this machine has CUDA")
    assert "names a100 (CUDA) devices, but CUDA is not available on this machine" in refusal(gpu_bed())


def test_the_machine_must_have_the_devices_nccl_and_memory_the_testbed_names() -> None:
    two = MachineFacts(64 * GIB, cuda=True, device_memory=(40 * GIB, 40 * GIB), nccl=True)
    preflight(gpu_bed(), facts=two, device_memory_gb=40)
    one = MachineFacts(64 * GIB, cuda=True, device_memory=(40 * GIB,), nccl=True)
    assert "names CUDA device(s) 1, but this machine has 1 (0..0)" in refusal(gpu_bed(), facts=one)
    no_nccl = MachineFacts(64 * GIB, cuda=True, device_memory=(40 * GIB, 40 * GIB), nccl=False)
    assert "nccl is not available for multi-rank plans" in refusal(gpu_bed(), facts=no_nccl)
    preflight(gpu_bed((0,)), facts=no_nccl)  # one rank needs no nccl
    assert "plans for a100 with 80 GB each, but CUDA device 0 has 40.0 GiB" in refusal(
        gpu_bed(), facts=two, device_memory_gb=80
    )


def test_an_unwritable_checkpoint_folder_and_models_too_large_are_refused(tmp_path: Path) -> None:
    cpu = load_testbed("cpu-2")
    preflight(cpu, checkpoint_dir=tmp_path / "ckpt")
    message = refusal(cpu, checkpoint_dir=Path("/sys/arena-ckpt"))
    assert "checkpoint folder /sys/arena-ckpt is not writable" in message
    small = MachineFacts(8 * GIB)
    assert refusal(cpu, facts=small, models=[("gpt__6.7B", 6_700_000_000)]) == (
        "preflight: model gpt__6.7B needs 107.2 GB of training state (weights, gradients, AdamW), more than this "
        "machine's memory (8.6 GB), which every rank of testbed cpu-2 shares"
    )
    assert "more than a100's 40 GB per device even over all 2 of testbed lab" in refusal(
        gpu_bed(),
        facts=MachineFacts(8 * GIB, True, (80 * GIB, 80 * GIB), True),
        models=[("gpt__6.7B", 6_700_000_000)],
        device_memory_gb=40,
    )
    two = MachineFacts(64 * GIB, cuda=True, device_memory=(40 * GIB, 40 * GIB), nccl=True)
    bed = gpu_bed()
    job = JobSpec(JobId("huge"), ModelRef.parse("gpt__39B"), 2048, 10, 0.0)
    message = refusal(bed, facts=two, jobs=[job], perf=make_perf("estimator", bed.cluster(), 0))
    assert message.startswith(
        "preflight: job huge: gpt__39B at batch 2048 is infeasible (out of memory) on every shape"
    )


@pytest.mark.gpu
def test_this_gpu_machine_passes_the_preflight_of_its_own_devices() -> None:
    facts = probe_machine(gpu=True)
    if not facts.cuda:
        pytest.skip("needs CUDA")
    assert facts.cuda and facts.device_memory and all(m > 0 for m in facts.device_memory)
    preflight(gpu_bed(tuple(range(len(facts.device_memory)))[:1]), facts=facts)
