"""The HiGHS MILP wrapper: optima on small problems, the LP-first shortcut, and clear errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from agents.milp import Milp, MilpBuilder, MilpConfig, MilpError


def knapsack(values, weights, capacity, lp_first=True):
    b = MilpBuilder()
    x = b.add_vars(values)
    b.add_row(x, weights, ub=capacity)
    return b.build(maximize=True).solve(MilpConfig(lp_first=lp_first)), x


@pytest.mark.parametrize("lp_first", [True, False])
def test_knapsack_optimum_matches_enumeration(lp_first):
    values, weights, cap = [10.0, 13.0, 7.0, 8.0, 4.0], [5, 7, 3, 4, 2], 10
    sol, x = knapsack(values, weights, cap, lp_first)
    best = max(
        sum(v for v, on in zip(values, pick) if on)
        for pick in itertools.product([0, 1], repeat=5)
        if sum(w for w, on in zip(weights, pick) if on) <= cap
    )
    assert sol.optimal and sol.objective == pytest.approx(best) == 21.0  # items 0, 2, 4: weight 5 + 3 + 2 = 10
    assert sum(w for w, on in zip(weights, sol.chosen(x)) if on) <= cap


def test_lp_first_returns_integral_relaxation_without_branching():
    # one choice per row and no coupling: the LP optimum is integral
    b = MilpBuilder()
    x = b.add_vars([1.0, 3.0, 2.0])
    b.add_row(x, 1.0, ub=1.0)
    sol = b.build().solve()
    assert sol.message == "LP relaxation integral"
    assert sol.chosen(x).tolist() == [False, True, False] and sol.objective == pytest.approx(3.0)


def test_minimise_with_integer_and_continuous_variables():
    b = MilpBuilder()
    n = b.add_vars([3.0], lb=0, ub=10, integer=True)  # integer count at cost 3
    y = b.add_vars([1.0], lb=0, ub=100, integer=False)  # continuous slack at cost 1
    b.add_row(np.r_[n, y], [2.5, 1.0], lb=7.0)  # 2.5 n + y >= 7
    sol = b.build(maximize=False).solve()
    # n = 2 gives 5 + y = 2 -> cost 8; n = 3 -> cost 9; n = 0 -> cost 7 (y = 7): optimum 7
    assert sol.objective == pytest.approx(7.0)
    assert sol.x[n[0]] == pytest.approx(0.0) and sol.x[y[0]] == pytest.approx(7.0)


def test_infeasible_problem_raises_clear_error():
    b = MilpBuilder()
    x = b.add_vars([1.0, 1.0])
    b.add_row(x, 1.0, lb=3.0)  # two binaries cannot sum to 3
    with pytest.raises(MilpError, match=r"status 2 \(infeasible\)") as err:
        b.build().solve()
    assert err.value.status == 2


def test_unbounded_problem_raises_clear_error():
    b = MilpBuilder()
    b.add_vars([1.0], lb=0, ub=np.inf, integer=False)
    with pytest.raises(MilpError, match="MILP not solved"):
        b.build(maximize=True).solve(MilpConfig(lp_first=False))


def test_empty_problem_and_bad_input():
    assert MilpBuilder().build().solve().objective == 0.0
    b = MilpBuilder()
    b.add_vars([1.0])
    with pytest.raises(ValueError, match="refers to variable 3"):
        b.add_row([3], 1.0)
    with pytest.raises(ValueError, match="lower bound 2 exceeds upper bound 1"):
        b.add_row([0], 1.0, lb=2, ub=1)
    with pytest.raises(ValueError, match="time limit"):
        MilpConfig(time_limit_s=0)
    built = b.build()
    with pytest.raises(ValueError, match="objective coefficients must be finite"):
        Milp(np.array([np.nan]), built.a, built.row_lb, built.row_ub, built.var_lb, built.var_ub, built.integrality)
