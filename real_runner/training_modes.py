"""The names of a job's numeric precision and recomputation settings, and their checks (no torch here).

``precision``: ``auto`` (the model spec's dtype on CUDA, where fp16 means bf16 when the GPU has it;
fp32 on CPU), ``fp32``, ``bf16`` (autocast / FSDP2 mixed precision) or ``fp16`` (the same with a
gradient scaler). ``remat``: ``auto`` (the model spec's ``remat``), ``on`` or ``off``: recompute each
transformer block's activations in the backward pass.
"""

from __future__ import annotations

#: Accepted values of a job's ``precision`` setting.
PRECISION_CHOICES = ("auto", "fp32", "bf16", "fp16")
#: Accepted values of a job's ``remat`` setting.
REMAT_CHOICES = ("auto", "on", "off")


def check_precision(value: str, where: str) -> str:
    """``value`` if it is a precision name; a one-line ValueError naming ``where`` otherwise."""
    if value not in PRECISION_CHOICES:
        raise ValueError(f"{where}: precision {value!r} is unknown; valid: {', '.join(PRECISION_CHOICES)}")
    return value


def check_remat(value: str, where: str) -> str:
    """``value`` if it is a recomputation setting; a one-line ValueError naming ``where`` otherwise."""
    if value not in REMAT_CHOICES:
        raise ValueError(f"{where}: remat {value!r} is unknown; valid: {', '.join(REMAT_CHOICES)}")
    return value


def remat_enabled(value: str, spec_remat: bool) -> bool:
    """Whether blocks recompute their activations: the setting, or the model spec's ``remat`` for ``auto``."""
    return spec_remat if check_remat(value, "job") == "auto" else value == "on"
