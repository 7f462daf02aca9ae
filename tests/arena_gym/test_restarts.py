"""Measured (re)start costs: what each kind of (re)start pays, and the checks on bad figures."""

from __future__ import annotations

import pytest

from arena_gym.restarts import RestartCost, RestartKind
from arena_gym.types import OverheadClass, OverheadModel

COST = RestartCost(start_s=5.0, held_s=3.0, save_s=2.0, load_s=1.5)


def test_a_first_start_pays_the_start_a_resume_adds_the_load_both_pay_their_generations_closing_save():
    assert COST.seconds(RestartKind.FIRST) == 5.0 + 2.0
    assert COST.seconds(RestartKind.RESUME) == 5.0 + 1.5 + 2.0


def test_a_move_waits_for_the_save_only_beyond_the_pre_launch():
    assert COST.seconds(RestartKind.MOVE) == 6.5  # the 2 s save hides under the 3 s held pre-launch
    slow_save = RestartCost(start_s=5.0, held_s=3.0, save_s=7.0, load_s=1.5)
    assert slow_save.seconds(RestartKind.MOVE) == 7.0 + 2.0 + 1.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"save_s": -1.0}, "save_s must be a finite number >= 0"),
        ({"load_s": float("nan")}, "load_s must be a finite number >= 0"),
        ({"held_s": 6.0}, "held_s .* must not exceed start_s"),
    ],
)
def test_bad_figures_are_refused_in_one_line(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RestartCost(**{"start_s": 5.0, "held_s": 3.0, "save_s": 2.0, "load_s": 1.5, **kwargs})


def test_a_measured_restart_replaces_the_checkpoint_resume_constant_and_is_scaled():
    model = OverheadModel(ckpt_resume_s=4.0, restart_scale=2.0)
    assert model.seconds(OverheadClass.PRUNED, 2) == 20.0 + 4.0
    assert model.seconds(OverheadClass.PRUNED, 2, restart_s=1.5) == 20.0 + 3.0
    assert model.seconds(OverheadClass.NONE, 2, restart_s=1.5) == 3.0
