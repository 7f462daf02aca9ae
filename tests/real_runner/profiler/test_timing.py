"""Summarising timed rounds: the mean keeps a pause that hit one round, the median drops it; paired differences."""

from __future__ import annotations

import pytest

from real_runner.profiler.timing import paired_difference, summarise


def test_a_pause_in_one_round_moves_the_mean_but_not_the_median():
    rounds = [[0.010, 0.020], [0.011, 0.021], [0.010, 0.020], [0.060, 0.020], [0.012, 0.022]]  # round 4: a 50 ms pause
    assert summarise(rounds, "mean") == pytest.approx([0.0206, 0.0206])
    assert summarise(rounds, "median") == pytest.approx([0.011, 0.020])


def test_paired_differences_cancel_a_slow_round():
    plain = [[0.010], [0.030], [0.011]]  # round 2 ran slow for both items
    wrapped = [[0.012], [0.032], [0.013]]
    assert paired_difference(wrapped, plain) == pytest.approx([0.002])
