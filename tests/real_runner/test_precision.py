"""Which precision a job runs in."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from real_runner.precision import PRECISIONS, resolve_precision  # noqa: E402

CPU = torch.device("cpu")


def test_auto_is_fp32_on_cpu_whatever_the_spec_says():
    for dtype in ("fp16", "bf16", "fp32"):
        assert resolve_precision("auto", dtype, CPU) is PRECISIONS["fp32"]


def test_an_explicit_precision_overrides_the_spec():
    assert resolve_precision("bf16", "fp32", CPU).compute_dtype is torch.bfloat16
    fp16 = resolve_precision("fp16", "fp32", CPU)
    assert fp16.compute_dtype is torch.float16 and fp16.scaled
    assert not resolve_precision("fp32", "fp16", CPU).mixed


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision 'half' is unknown"):
        resolve_precision("half", "fp16", CPU)


def test_fsdp_policy_gathers_in_the_compute_dtype_and_reduces_in_fp32():
    root, inner = PRECISIONS["bf16"].fsdp_policy(True), PRECISIONS["bf16"].fsdp_policy(False)
    assert root.param_dtype is torch.bfloat16 and root.reduce_dtype is torch.float32
    assert root.output_dtype is torch.float32 and inner.output_dtype is None
    assert PRECISIONS["fp32"].fsdp_policy(True).param_dtype is None
