"""Preflight: check a testbed against this machine before anything is launched on it.

:func:`preflight` runs every check of :data:`CHECKS` on a :class:`MachineFacts` (what this
machine has: CUDA, its devices and their memory, nccl) and raises one ValueError naming the first
problem: a testbed that names CUDA devices where CUDA is absent, device indices the machine does
not have, no nccl for multi-rank CUDA plans, devices with less memory than the testbed's device
type (plans are sized for the catalogue's memory), an unwritable checkpoint folder, a model whose
training state cannot fit even spread over every device, and a job that is infeasible (out of
memory) on every shape of the testbed; before them, torch missing where the jobs run on this machine. Checks that need the machine
apply to testbeds on this machine (the local launcher); a CPU testbed never imports torch.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from arena_gym.extras import install_hint
from arena_gym.perf import unschedulable_reason
from arena_gym.types import JobSpec, PerfModel
from real_runner.testbed import Testbed

log = logging.getLogger(__name__)


#: Bytes of training state per parameter: fp32 weights and gradients and AdamW's two moments.
TRAIN_BYTES_PER_PARAM = 16


@dataclass(frozen=True)
class MachineFacts:
    """What this machine offers the runner: its memory, CUDA, the CUDA devices' total memory (bytes), nccl, torch."""

    host_memory: int
    cuda: bool = False
    device_memory: tuple[int, ...] = ()
    nccl: bool = False
    torch: bool = True


def host_memory() -> int:
    """Bytes of physical memory of this machine."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def probe_machine(gpu: bool) -> MachineFacts:
    """The facts of this machine; CUDA is asked from torch only for a ``gpu`` testbed."""
    if importlib.util.find_spec("torch") is None:
        return MachineFacts(host_memory(), torch=False)
    if not gpu:
        return MachineFacts(host_memory())
    import torch  # noqa: PLC0415 - only GPU testbeds need it

    if not torch.cuda.is_available():
        return MachineFacts(host_memory())
    memory = tuple(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))
    nccl = bool(torch.distributed.is_available() and torch.distributed.is_nccl_available())
    return MachineFacts(host_memory(), True, memory, nccl)


@dataclass(frozen=True)
class Preflight:
    """What one launch asks of the machine: the testbed, the jobs and the model that sizes them, a folder."""

    testbed: Testbed
    facts: MachineFacts | None
    jobs: tuple[JobSpec, ...] = ()
    perf: PerfModel | None = None
    checkpoint_dir: Path | None = None
    device_memory_gb: float | None = None  # the catalogue memory of the testbed's device type
    models: tuple[tuple[str, float], ...] = ()  # (name, parameter count) of every model to run

    @property
    def local(self) -> bool:
        """Whether the testbed runs on this machine (its facts apply)."""
        return self.testbed.launcher == "local"


def _torch_present(p: Preflight) -> str | None:
    if not p.local or p.facts is None or p.facts.torch:
        return None
    return f"the jobs of testbed {p.testbed.name} run on this machine and need {install_hint('torch')}"


def _cuda_present(p: Preflight) -> str | None:
    if p.testbed.is_cpu or not p.local or p.facts is None or p.facts.cuda:
        return None
    return (
        f"testbed {p.testbed.name} names {p.testbed.device_type} (CUDA) devices, but CUDA is not available on "
        "this machine; use a cpu testbed (cpu-1, cpu-2, cpu-4) or a machine with GPUs"
    )


def _device_indices(p: Preflight) -> str | None:
    if p.testbed.is_cpu or not p.local or p.facts is None or not p.facts.cuda:
        return None
    count = len(p.facts.device_memory)
    missing = sorted({d for node in p.testbed.nodes for d in node.devices if d >= count})
    if not missing:
        return None
    return (
        f"testbed {p.testbed.name} names CUDA device(s) {', '.join(map(str, missing))}, but this machine has "
        f"{count} (0..{count - 1})"
    )


def _nccl(p: Preflight) -> str | None:
    if p.testbed.is_cpu or not p.local or p.facts is None or not p.facts.cuda or p.facts.nccl:
        return None
    if p.testbed.total_devices < 2:
        return None
    return f"testbed {p.testbed.name} has {p.testbed.total_devices} CUDA devices, but nccl is not available for multi-rank plans"


def _device_memory(p: Preflight) -> str | None:
    if p.testbed.is_cpu or not p.local or p.facts is None or not p.facts.cuda or p.device_memory_gb is None:
        return None
    used = sorted({d for node in p.testbed.nodes for d in node.devices if d < len(p.facts.device_memory)})
    small = [
        (d, p.facts.device_memory[d] / 2**30)
        for d in used
        if p.facts.device_memory[d] < 0.95 * p.device_memory_gb * 2**30
    ]
    if not small:
        return None
    device, gib = small[0]
    return (
        f"testbed {p.testbed.name} plans for {p.testbed.device_type} with {p.device_memory_gb:g} GB each, but CUDA "
        f"device {device} has {gib:.1f} GiB; name the device type this machine has"
    )


def _checkpoint_dir(p: Preflight) -> str | None:
    if p.checkpoint_dir is None:
        return None
    try:
        p.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=p.checkpoint_dir)
    except OSError as exc:
        return f"checkpoint folder {p.checkpoint_dir} is not writable: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None


def _model_memory(p: Preflight) -> str | None:
    """A model whose training state does not fit the testbed even spread over all of its devices."""
    bed = p.testbed
    if bed.is_cpu:  # every rank shares this machine's memory
        have = p.facts.host_memory if p.facts is not None else host_memory()
        share, where = 1, f"this machine's memory ({have / 1e9:.1f} GB), which every rank of testbed {bed.name} shares"
    elif p.device_memory_gb is not None:
        have, share = int(p.device_memory_gb * 1e9), bed.total_devices
        where = f"{bed.device_type}'s {p.device_memory_gb:g} GB per device even over all {share} of testbed {bed.name}"
    else:
        return None
    for name, params in p.models:
        need = params * TRAIN_BYTES_PER_PARAM
        if need / share > have:
            return f"model {name} needs {need / 1e9:.1f} GB of training state (weights, gradients, AdamW), more than {where}"
    return None


def _models_fit(p: Preflight) -> str | None:
    if p.perf is None:
        return None
    cluster = p.testbed.cluster()
    for job in p.jobs:
        reason = unschedulable_reason(job, p.perf, cluster)
        if reason is not None:
            return f"job {job.job_id}: {reason}; the testbed can never run it"
    return None


#: Every check, in order; each returns the problem in one line, or None.
CHECKS: tuple[Callable[[Preflight], str | None], ...] = (
    _torch_present,
    _cuda_present,
    _device_indices,
    _nccl,
    _device_memory,
    _checkpoint_dir,
    _model_memory,
    _models_fit,
)


def preflight(
    testbed: Testbed,
    *,
    facts: MachineFacts | None = None,
    jobs: Sequence[JobSpec] = (),
    perf: PerfModel | None = None,
    checkpoint_dir: Path | None = None,
    device_memory_gb: float | None = None,
    models: Sequence[tuple[str, float]] = (),
) -> None:
    """ValueError naming the first problem of :data:`CHECKS` (see the module docstring); nothing otherwise.

    ``facts`` default to :func:`probe_machine` (torch is asked only for a local GPU testbed).
    """
    if facts is None:
        facts = probe_machine(gpu=not testbed.is_cpu and testbed.launcher == "local")
    p = Preflight(testbed, facts, tuple(jobs), perf, checkpoint_dir, device_memory_gb, tuple(models))
    for check in CHECKS:
        problem = check(p)
        if problem is not None:
            raise ValueError(f"preflight: {problem}")
    log.debug("preflight of %s passed", testbed.name)
