"""Decision triggers of the core: the settings every config checks the same way, and one episode's triggers."""

from __future__ import annotations

import math

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.core import ClusterState
from arena_gym.core.triggers import MIN_ROUND_S, DecisionSchedule, Triggers
from arena_gym.placement import allocation
from arena_gym.sim import SimConfig
from arena_gym.types import GpuType, JobId, Placement
from envs.config import EnvConfig
from real_runner.live import LiveConfig
from tests.helpers import job, uniform_model

TINY = PRESETS["tiny"]
A40_NODE_0 = Placement(GpuType("a40"), (0,), 2)


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


def workload():
    """B and C arrive together at 50 (B first in load order), A at 10."""
    return [job("B", 50, 10, "a40", 2), job("A", 10, 10, "a40", 2), job("C", 50, 10, "a40", 2)]


def test_arrivals_come_in_submit_order_ties_in_load_order_and_rounds_from_the_first_submission() -> None:
    triggers = Triggers(DecisionSchedule(round_s=100.0))
    triggers.reset(workload())
    assert (triggers.start, triggers.next_round, triggers.round_index) == (10.0, 10.0, 0)
    order = []
    while triggers.next_arrival < math.inf:
        order.append((triggers.next_arrival, triggers.take_arrival().job_id))  # type: ignore[union-attr]
    assert order == [(10.0, "A"), (50.0, "B"), (50.0, "C")] and triggers.take_arrival() is None
    event_only = Triggers(DecisionSchedule())
    event_only.reset(workload())
    assert event_only.next_round == math.inf and event_only.events
    event_only.reset(())
    assert (event_only.start, event_only.next_arrival) == (0.0, math.inf)


def test_rounds_stop_after_two_stalled_ones_in_a_row() -> None:
    state = ClusterState(TINY, uniform_model())
    state.load([job("A", 0, 10, "a40", 2), job("B", 5, 10, "a40", 2)])
    triggers = Triggers(DecisionSchedule(round_s=300.0))
    triggers.reset(state.jobs)
    triggers.count_round(state)  # at 0: B is still to arrive: not a stall
    for spec in (triggers.take_arrival(), triggers.take_arrival()):
        state.submit(spec.job_id, spec.submit_time)  # type: ignore[union-attr]
    assert (triggers.round_index, triggers.next_round) == (1, 300.0)
    triggers.count_round(state)  # at 300: nothing holds GPUs, nothing to arrive: stall 1
    assert triggers.next_round == 600.0 and not triggers.idle(state)
    state.allocate(JobId("A"), allocation(uniform_model(), state.view(JobId("A")).spec, A40_NODE_0), 310.0)
    triggers.count_round(state)  # at 600: A holds GPUs: the stalls start again
    state.preempt(JobId("A"), 650.0)
    triggers.count_round(state)  # 900: stall 1
    assert triggers.next_round == 1200.0
    triggers.count_round(state)  # 1200: stall 2: no round can change anything
    assert (triggers.round_index, triggers.next_round) == (5, math.inf) and triggers.idle(state)
    assert triggers.next_due(state) == math.inf and triggers.round_live(state)


def test_restore_resume_and_fork_keep_the_round_grid() -> None:
    triggers = Triggers(DecisionSchedule(round_s=100.0, horizon_s=1000.0))
    triggers.reset(workload())
    twin = triggers.fork()
    assert twin.take_arrival().job_id == "A" and triggers.next_arrival == 10.0  # type: ignore[union-attr]
    triggers.resume(345.0, {JobId("A"), JobId("B")})  # a controller taking over at 345 s
    assert (triggers.round_index, triggers.next_round) == (4, 410.0)  # rounds at 10, 110, 210, 310 have passed
    assert triggers.take_arrival().job_id == "C" and triggers.next_arrival == math.inf  # type: ignore[union-attr]
    triggers.restore(500.0, [job("D", 700, 10, "a40", 2)])
    assert (triggers.start, triggers.next_round, triggers.round_index, triggers.next_arrival) == (
        500.0,
        600.0,
        0,
        700.0,
    )
    assert triggers.over(1000.0) and not triggers.over(999.0)
    state = ClusterState(TINY, uniform_model())
    state.load([job("D", 700, 10, "a40", 2)])
    assert triggers.next_due(state) == 600.0  # the round (a job is unfinished), then the arrival, the horizon
