"""Names and checks of the precision and recomputation settings."""

from __future__ import annotations

import pytest

from real_runner.training_modes import check_precision, check_remat, remat_enabled


def test_unknown_settings_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^job spec: precision 'fp8' is unknown; valid: auto, fp32, bf16, fp16$"):
        check_precision("fp8", "job spec")
    with pytest.raises(ValueError, match=r"^job spec: remat 'yes' is unknown; valid: auto, on, off$"):
        check_remat("yes", "job spec")


def test_remat_auto_follows_the_model_spec():
    assert remat_enabled("auto", True) and not remat_enabled("auto", False)
    assert remat_enabled("on", False) and not remat_enabled("off", True)
