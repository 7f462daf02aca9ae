"""The plan space's divisibility rules, and that its enumerations apply exactly them."""

from __future__ import annotations

import itertools

import pytest

from estimator.plan_space import (
    dp_fits,
    largest_micro_batches,
    micro_batch_options,
    micro_fits,
    tp_fits,
    uniform_meshes,
)


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
