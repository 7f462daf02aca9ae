"""How a plan computes in reduced precision while its master weights and optimizer stay fp32.

A :class:`Precision` names the dtype of forward and backward compute (``None``: fp32 throughout)
and whether the loss is scaled (fp16). The executor applies it per plan kind: FSDP2's
``MixedPrecisionPolicy`` (parameters gathered in the compute dtype, gradients reduced in fp32) when
the plan shards data parallelism, ``torch.autocast`` otherwise (single process, tensor parallelism,
pipeline stages). Parameters, gradients and AdamW state are fp32 in every mode, so a checkpoint holds
the same tensors whatever precision wrote it and resumes under any other.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from real_runner.training_modes import check_precision


@dataclass(frozen=True)
class Precision:
    """A precision mode: its name, compute dtype (None: fp32) and whether gradients are loss-scaled."""

    name: str
    compute_dtype: torch.dtype | None
    scaled: bool = False

    @property
    def mixed(self) -> bool:
        """True when forward and backward compute in a half-precision dtype."""
        return self.compute_dtype is not None

    def autocast(self, device: torch.device) -> contextlib.AbstractContextManager[None]:
        """The autocast region of a forward pass (a no-op context for fp32)."""
        if self.compute_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=self.compute_dtype)

    def fsdp_policy(self, root: bool) -> MixedPrecisionPolicy:
        """FSDP2's policy: gather parameters in the compute dtype and reduce gradients in fp32; the
        ``root`` module (a whole stage) also returns fp32, inner blocks keep the compute dtype."""
        if self.compute_dtype is None:
            return MixedPrecisionPolicy()
        return MixedPrecisionPolicy(
            param_dtype=self.compute_dtype, reduce_dtype=torch.float32, output_dtype=torch.float32 if root else None
        )


#: The precision modes by name.
PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", None),
    "bf16": Precision("bf16", torch.bfloat16),
    "fp16": Precision("fp16", torch.float16, scaled=True),
}


def _bf16_supported(device: torch.device) -> bool:
    return device.type != "cuda" or torch.cuda.is_bf16_supported()


def resolve_precision(requested: str, spec_dtype: str, device: torch.device) -> Precision:
    """The precision a job runs in: ``requested``, or for ``auto`` fp32 on CPU and the spec's dtype on
    CUDA (a half-precision spec runs as bf16 where the GPU supports it, else fp16). One-line
    ValueError for an unknown name or bf16 on a GPU without it."""
    check_precision(requested, "job")
    if requested == "auto":
        if device.type != "cuda":
            return PRECISIONS["fp32"]
        if spec_dtype == "fp32":
            return PRECISIONS["fp32"]
        return PRECISIONS["bf16" if _bf16_supported(device) else "fp16"]
    if requested == "bf16" and not _bf16_supported(device):
        raise ValueError(f"precision bf16 is not supported on {torch.cuda.get_device_name(device)}; use fp16")
    return PRECISIONS[requested]
