"""TrainConfig: fields checked against their annotations, read back from JSON."""

from __future__ import annotations

import pytest

from agents.rl.config import TrainConfig


def test_a_config_round_trips_through_json_and_lists_become_tuples() -> None:
    config = TrainConfig(net_arch=[64, 32], learning_rate=1)  # type: ignore[arg-type]
    assert config.net_arch == (64, 32) and config.learning_rate == 1.0
    assert TrainConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"speed": 3}, "^TrainConfig: unknown field\\(s\\) speed; valid: algo, "),
        ({"steps": "many"}, "^TrainConfig: steps must be an integer, got 'many'$"),
        ({"progress": 1}, "^TrainConfig: progress must be true or false, got 1$"),
        ({"eval_seeds": [1, 2.5]}, "^TrainConfig: eval_seeds must be a tuple of integers, got \\[1, 2.5\\]$"),
        ({"env_overrides": {"x": 1, 2: 3}}, "^TrainConfig: env_overrides must be a mapping"),
    ],
)
def test_bad_json_values_are_one_line_errors(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_json(data)
