"""Decision triggers of the core: the settings every config checks the same way."""

from __future__ import annotations

import math

import pytest

from arena_gym.core.triggers import MIN_ROUND_S, DecisionSchedule
from arena_gym.sim import SimConfig
from envs.config import EnvConfig
from real_runner.live import LiveConfig


@pytest.mark.parametrize(
    "round_s, event_decisions, horizon_s, message",
    [
        (0.5, True, math.inf, "round_s must be finite and >= 1 s, got 0.5"),
        (math.inf, True, math.inf, "round_s must be finite and >= 1 s, got inf"),
        (math.nan, True, math.inf, "round_s must be finite and >= 1 s, got nan"),
        (None, False, math.inf, "with event_decisions off, round_s must be set"),
        (None, True, 0.0, "horizon_s must be > 0, got 0.0"),
        (None, True, math.nan, "horizon_s must be > 0, got nan"),
    ],
)
def test_a_bad_schedule_names_its_field(round_s, event_decisions, horizon_s, message) -> None:
    with pytest.raises(ValueError, match=message):
        DecisionSchedule(round_s, event_decisions, horizon_s)


def test_every_problem_is_named_at_once_after_its_owner() -> None:
    with pytest.raises(ValueError, match=r"^Mine: round_s must be .* got 0.1; horizon_s must be > 0, got -1$"):
        DecisionSchedule.check(0.1, True, -1, owner="Mine")
    DecisionSchedule.check(MIN_ROUND_S, False, 10.0)  # the shortest round, rounds only: fine


#: The configs that carry a decision schedule, built with some of its fields (EnvConfig always decides on events).
CONFIGS = {
    "SimConfig": SimConfig,
    "LiveConfig": LiveConfig,
    "EnvConfig": lambda **fields: EnvConfig(**fields),
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize(
    "fields",
    [{"round_s": 0.01}, {"round_s": math.inf}, {"horizon_s": 0.0}, {"round_s": 0.5, "horizon_s": -3.0}],
    ids=["short round", "infinite round", "no horizon", "both"],
)
def test_the_configs_check_their_schedules_alike(config: str, fields: dict) -> None:
    with pytest.raises(ValueError) as expected:
        DecisionSchedule(**fields)
    with pytest.raises(ValueError) as caught:
        CONFIGS[config](**fields)
    assert str(expected.value) in str(caught.value)


@pytest.mark.parametrize("config", ["SimConfig", "LiveConfig"])
def test_a_config_that_never_asks_the_policy_is_refused(config: str) -> None:
    with pytest.raises(ValueError, match="with event_decisions off, round_s must be set"):
        CONFIGS[config](event_decisions=False)
    assert CONFIGS[config](event_decisions=False, round_s=300.0).schedule == DecisionSchedule(300.0, False)
