"""The plan space's divisibility rules, and that its enumerations and the runner apply exactly them."""

from __future__ import annotations

import itertools

import pytest

from arena_gym.types import PipeSchedule, Plan, StagePlan
from estimator.plan_space import (
    dp_fits,
    largest_micro_batches,
    micro_batch_options,
    micro_fits,
    tp_fits,
    uniform_meshes,
)
from real_runner.plans import model_spec, resolve_plan


def test_the_rules_are_divisibility_by_a_positive_degree() -> None:
    assert tp_fits(12, 4) and not tp_fits(12, 8) and not tp_fits(12, 0)
    assert dp_fits(16, 8) and not dp_fits(16, 3) and not dp_fits(16, -2)
    assert micro_fits(6, 3) and not micro_fits(6, 4) and not micro_fits(6, 0)


@pytest.mark.parametrize(
    ("per_replica", "at_most", "expected"), [(16, 4, 4), (12, 5, 4), (7, 6, 1), (3, 8, 3), (5, 0, 1)]
)
def test_largest_micro_batches_divides_and_respects_the_cap(per_replica: int, at_most: int, expected: int) -> None:
    assert largest_micro_batches(per_replica, at_most) == expected


def test_uniform_meshes_are_exactly_the_pairs_the_rules_allow() -> None:
    for heads, batch, per_stage in itertools.product((1, 4, 6, 12), (1, 8, 12, 16), (1, 2, 4, 6, 8)):
        allowed = [
            (per_stage // tp, tp)
            for tp in range(1, per_stage + 1)
            if per_stage % tp == 0 and tp_fits(heads, tp) and dp_fits(batch, per_stage // tp)
        ]
        assert list(uniform_meshes(heads, batch, per_stage)) == allowed
    assert list(uniform_meshes(8, 16, 8, gpus_per_node=2)) == [(8, 1), (4, 2)]
    assert micro_batch_options(24) == [1, 2, 4, 8]


def test_the_runner_refuses_what_the_rules_refuse_and_names_the_rule() -> None:
    spec = model_spec("gpt__tiny")  # 4 heads, 6 layer-table entries
    one = (StagePlan(0, spec.layers + 2, 1, 3),)
    with pytest.raises(ValueError, match="tensor-parallel degree 3 does not divide the 4 heads"):
        resolve_plan(spec, Plan(one, 1), 16, 3)
    with pytest.raises(ValueError, match="data-parallel degree 3 does not divide the global batch 16"):
        resolve_plan(spec, Plan((StagePlan(0, spec.layers + 2, 3, 1),), 1), 16, 3)
    with pytest.raises(ValueError, match="3 micro-batches do not divide the per-replica batch 8"):
        resolve_plan(spec, Plan((StagePlan(0, spec.layers + 2, 2, 1),), 3), 16, 2)


def test_a_mixed_plan_falls_back_to_the_largest_dividing_micro_batch_count() -> None:
    spec = model_spec("gpt__tiny")
    mixed = Plan((StagePlan(0, 3, 2, 1), StagePlan(3, spec.layers + 2, 1, 2)), 6, PipeSchedule.ONE_F_ONE_B)
    executed = resolve_plan(spec, mixed, 16, 4)
    assert executed.plan.micro_batches == largest_micro_batches(16 // executed.dp, 6)
    assert any("micro-batches 6 ->" in note for note in executed.notes)
