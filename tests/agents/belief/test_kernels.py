"""The belief's read-together tables: the log survival within 3e-9 of the exact mixture sum, the Gittins index to the last bit."""

from __future__ import annotations

import numpy as np
import pytest

from agents.belief import default_belief
from agents.belief.kernels import GittinsTable, GittinsTables, SurvivalTables


@pytest.fixture(scope="module")
def real():
    return default_belief("real")


def groups_of(belief, step: int = 7):
    """Every ``step``-th group and the pooled one (its 457 kernels)."""
    return tuple(belief.groups[::step]) + (belief.groups[-1],)


def test_interpolated_log_survival_is_within_3e_9_of_the_mixture_sum(real) -> None:
    groups = groups_of(real)
    tables = SurvivalTables.of(groups)
    rng = np.random.default_rng(0)
    row = np.repeat(np.arange(len(groups)), 40)
    centres = [np.asarray(g.centres) for g in groups]
    lo = np.array([c.min() - 15 * g.bandwidth for c, g in zip(centres, groups)])[row]
    hi = np.array([c.max() + 45 * g.bandwidth for c, g in zip(centres, groups)])[row]
    u = lo[:, None] + (hi - lo)[:, None] * rng.random((len(row), 81))
    got, inside = tables.at(row, u)
    exact = np.stack([groups[r].log_survival(u[i]) for i, r in enumerate(row)])
    assert inside.mean() > 0.9 and not inside.all()  # the far tail is left to the exact sum
    error = np.abs(got - exact)[inside] / np.maximum(1.0, np.abs(exact[inside]))
    assert error.max() < 3e-9
    below = u < lo[:, None] + 5 * np.array([g.bandwidth for g in groups])[row][:, None]  # before every table
    assert below.any() and np.abs(got[below]).max() < 1e-15  # log S is within 1e-23 of 0 there


def reference_at(table: GittinsTable, a: np.ndarray) -> np.ndarray:
    """One table read alone: interpolation on its grid, the exact formula below it."""
    out = np.interp(a, table.x, table.index)
    low = a < table.x[0]
    out[low] = (table.gain[None, :] / (table.x[0] - a[low, None] + table.cost[None, :])).max(axis=1)
    return out


def test_gittins_tables_read_together_give_each_tables_numbers_to_the_last_bit(real) -> None:
    groups = groups_of(real, 3)
    singles = tuple(g.gittins_table() for g in groups)
    tables = GittinsTables.of(singles)
    rng = np.random.default_rng(1)
    row = rng.integers(0, len(groups), 30_000)
    x = tables.x[row]
    a = np.concatenate(
        [
            np.zeros(500),  # a waiting job
            x[500:10_000, 0] * rng.random(9_500),  # below the grid
            x[np.arange(10_000, 20_000), rng.integers(0, x.shape[1], 10_000)],  # on a grid point
            x[20_000:29_000, 0] + (x[20_000:29_000, -1] - x[20_000:29_000, 0]) * rng.random(9_000),
            x[29_000:, -1] * (1 + rng.random(1_000)),  # beyond it
        ]
    )
    got = tables.at(row, a)
    want = np.empty_like(a)
    for k, table in enumerate(singles):
        want[row == k] = reference_at(table, a[row == k])
    assert np.array_equal(got, want)
