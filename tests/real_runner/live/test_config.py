"""LiveConfig: the jobs' precision and recomputation settings are checked when the config is made."""

from __future__ import annotations

import pytest

from real_runner.live import LiveConfig


def test_precision_and_remat_are_checked():
    assert (LiveConfig().precision, LiveConfig().remat) == ("auto", "auto")
    assert LiveConfig(precision="bf16", remat="on").precision == "bf16"
    with pytest.raises(ValueError, match="^LiveConfig: precision 'fp64' is unknown"):
        LiveConfig(precision="fp64")
    with pytest.raises(ValueError, match="^LiveConfig: remat 'sometimes' is unknown"):
        LiveConfig(remat="sometimes")
