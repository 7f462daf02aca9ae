"""The residual trainers' shared data settings (ResidualData)."""

from __future__ import annotations

import pytest

from arena_gym.fields import FieldError
from arena_gym.harness.trainers.es import ResidualTrainConfig
from arena_gym.harness.trainers.residual_ppo import ResidualPPOConfig
from arena_gym.harness.trainers.windows import ResidualData


@pytest.mark.parametrize("config_type", [ResidualTrainConfig, ResidualPPOConfig])
def test_both_trainers_share_the_data_fields_and_their_checks(config_type: type[ResidualData]) -> None:
    assert issubclass(config_type, ResidualData)
    config = config_type(loads=[1, 0.5], traces=["data:x.csv"])  # type: ignore[arg-type]
    assert config.loads == (1.0, 0.5) and config.traces == ("data:x.csv",)
    name = config_type.__name__
    with pytest.raises(ValueError, match=f"^{name}.traces is empty$"):
        config_type(traces=())
    with pytest.raises(ValueError, match=f"^{name}.workers must be >= 1, got 0$"):
        config_type(workers=0)
    with pytest.raises(FieldError, match=f"^{name}.workers must be an integer, got True$"):
        config_type(workers=True)
    with pytest.raises(FieldError, match=f"^{name}.data_dir must be a string, got None$"):
        config_type(data_dir=None)  # type: ignore[arg-type]
