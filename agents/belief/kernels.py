"""A group's distribution of log total work (a Gaussian kernel mixture) and its Gittins index on a grid of attained work."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtri

#: The group levels a belief may use, from finest to coarsest (the pooled group always closes the chain).
LEVELS: tuple[str, ...] = ("configuration", "model")
POOLED = "pooled"
#: The Gittins table of a group: this many log-spaced attained values, from this many
#: bandwidths below the smallest kernel to this many above the largest.
GRID_POINTS = 320
GRID_BELOW = 6.0
GRID_ABOVE = 12.0
#: Past this many bandwidths into a kernel's tail, truncated draws use its exponential limit.
TAIL_Z = 25.0
#: The tabulated log survival: nodes this many bandwidths apart, from this many bandwidths below the
#: smallest kernel (below, its first value) to this many above the largest (beyond, the exact mixture sum).
SURVIVAL_STEP = 1.0 / 32.0
SURVIVAL_BELOW = 10.0
SURVIVAL_ABOVE = 40.0


def logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """``log(sum(exp(a), axis=1))`` of a 2-D real array: ``scipy.special.logsumexp(a, axis=1)`` to the last bit.

    The same arithmetic (the row's maxima taken out of the sum, then ``log1p``) without the
    array-API dispatch, which costs more than the sum on the belief's small rows.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        top = a.max(axis=1, keepdims=True)
        at_top = a == top
        count = at_top.sum(axis=1, keepdims=True, dtype=float)
        rest = np.exp(np.where(at_top, -np.inf, a) - top).sum(axis=1, keepdims=True)
        rest = np.where(rest == 0, rest, rest / count)
        out = np.log1p(rest) + np.log(count) + top
        bad = ~np.isfinite(out)
        if bad.any():  # infinite or empty rows: the direct sum, as scipy takes it
            out = np.where(bad, np.log(np.exp(a).sum(axis=1, keepdims=True)), out)
    return out[:, 0]


def _log_segments(x: np.ndarray, log_survival: np.ndarray) -> np.ndarray:
    """``log`` of the integral of ``S`` over each grid segment, ``log S`` linear on it."""
    d = np.diff(log_survival)
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = np.where(d == 0.0, 1.0, np.expm1(d) / d)  # the segment's integral / (width x S at its start)
    return np.log(np.diff(x)) + log_survival[:-1] + np.log(phi)


def gittins_on_grid(x: np.ndarray, log_survival: np.ndarray) -> np.ndarray:
    """The Gittins index at each point of a grid of attained work, from the survival ``P(S > x)`` there.

    ``G(x_k) = max_{j > k} (S(x_k) - S(x_j)) / integral_{x_k}^{x_j} S``, with ``log S`` linear
    between grid points (exact for an exponential). ``x`` must increase from >= 0 and
    ``log_survival`` be finite; the last point repeats the index before it.
    """
    x = np.asarray(x, dtype=float)
    ls = np.asarray(log_survival, dtype=float)
    if x.ndim != 1 or x.shape != ls.shape or len(x) < 3:
        raise ValueError(f"gittins_on_grid: need two 1-D arrays of one length >= 3, got {x.shape} and {ls.shape}")
    if x[0] < 0 or not (np.diff(x) > 0).all() or not np.isfinite(ls).all():
        raise ValueError("gittins_on_grid: x must increase from >= 0 and log_survival be finite")
    log_seg = _log_segments(x, ls)
    k = np.arange(len(x))[:, None]
    m = np.arange(len(x) - 1)[None, :]
    ahead = m >= k  # segment m starts at or after point k
    den = np.cumsum(np.exp(np.where(ahead, log_seg[None, :] - ls[:, None], -np.inf)), axis=1)
    num = -np.expm1(ls[None, 1:] - ls[:, None])  # P(x_k < S <= x_{m+1}) / S(x_k)
    ratio = np.full(den.shape, -np.inf)
    np.divide(num, den, out=ratio, where=ahead & (den > 0))
    index = ratio.max(axis=1)
    index[-1] = index[-2]
    return index


@dataclass(frozen=True, slots=True)
class GittinsTable:
    """A group's Gittins index (per unit of work) on a grid of attained work ``x``, read by interpolation.

    Below the grid (where ``S`` is 1 to within 1e-9) the index is exact: ``max_j gain_j /
    (x_0 - a + cost_j)``, with ``gain_j = P(S <= x_j | S > x_0)`` and ``cost_j`` the expected
    service from ``x_0`` up to ``x_j``; beyond the grid it stays at its last value.
    """

    x: np.ndarray
    index: np.ndarray
    gain: np.ndarray
    cost: np.ndarray

    @staticmethod
    def build(x: np.ndarray, log_survival: np.ndarray) -> GittinsTable:
        """The table of a survival function given on a grid (see :func:`gittins_on_grid`)."""
        index = gittins_on_grid(x, log_survival)
        gain = -np.expm1(log_survival - log_survival[0])
        cost = np.concatenate([[0.0], np.cumsum(np.exp(_log_segments(x, log_survival) - log_survival[0]))])
        for a in (x, index, gain, cost):
            a.flags.writeable = False
        return GittinsTable(x, index, gain, cost)


@dataclass(frozen=True, slots=True)
class GittinsTables:
    """Groups' Gittins tables of one grid length, rows of 2-D arrays, read together: the numbers each table's
    own reading gives (:func:`numpy.interp` on its grid, the exact formula below it), to the last bit.

    ``keys`` order every table's grid points lexicographically as ``row + 1j * x`` (one search finds
    the segment of any row's attained value).
    """

    x: np.ndarray
    index: np.ndarray
    gain: np.ndarray
    cost: np.ndarray
    slope: np.ndarray
    keys: np.ndarray

    @staticmethod
    def of(tables: tuple[GittinsTable, ...]) -> GittinsTables:
        """The tables, in their order (each must have the same number of grid points)."""
        x, index = np.stack([t.x for t in tables]), np.stack([t.index for t in tables])
        slope = np.diff(index, axis=1) / np.diff(x, axis=1)  # numpy.interp's slopes
        keys = (np.arange(len(tables))[:, None] + 1j * x).ravel()
        gain, cost = np.stack([t.gain for t in tables]), np.stack([t.cost for t in tables])
        return GittinsTables(x, index, gain, cost, slope, keys)

    def at(self, row: np.ndarray, attained: np.ndarray) -> np.ndarray:
        """The index of table ``row[r]`` at ``attained[r]``; beyond a table's grid, its last value."""
        a = np.asarray(attained, dtype=float)
        width = self.x.shape[1]
        j = np.searchsorted(self.keys, row + 1j * a, side="right") - 1 - row * width  # the last point <= a
        low = j < 0
        last = j >= width - 1
        k = np.clip(j, 0, width - 2)
        x0, y0 = self.x[row, k], self.index[row, k]
        out = self.slope[row, k] * (a - x0) + y0
        bad = np.isnan(out)
        if bad.any():  # as numpy.interp: from the segment's other end, else its value
            other = self.slope[row, k] * (a - self.x[row, k + 1]) + self.index[row, k + 1]
            out = np.where(bad, np.where(np.isnan(other) & (y0 == self.index[row, k + 1]), y0, other), out)
        out = np.where(a == x0, y0, out)
        out = np.where(last, self.index[row, -1], out)
        if low.any():
            r = row[low]
            out[low] = (self.gain[r] / (self.x[r, :1] - a[low, None] + self.cost[r])).max(axis=1)
        return out


@dataclass(frozen=True, slots=True)
class SurvivalTables:
    """Groups' log survival functions as cubic Hermite pieces between evenly spaced nodes (the value and the
    slope exact at every node), the tables end to end; within 3e-9 of the exact mixture sum on nodes 1/32 of a
    bandwidth apart. Below its first node a table reads its first value (``log S`` there is within 1e-23 of 0).

    Table ``k`` starts at ``start[k]`` with nodes ``step[k]`` apart; its ``cells[k]`` pieces are the rows
    from ``first[k]`` of ``coef``, each a cubic's coefficients of ``t^0`` to ``t^3`` side by side (``t`` in
    ``[0, 1)``, the position within the piece): a read fetches a piece's four from one place in memory.
    """

    start: np.ndarray
    step: np.ndarray
    first: np.ndarray
    cells: np.ndarray
    coef: np.ndarray

    @staticmethod
    def of(groups: tuple[WorkGroup, ...]) -> SurvivalTables:
        """The tables of ``groups``, in their order (each group's pieces built once)."""
        pieces = [g.survival_pieces() for g in groups]
        cells = np.array([coef.shape[1] for _, _, coef in pieces], dtype=np.int64)
        return SurvivalTables(
            np.array([start for start, _, _ in pieces]),
            np.array([step for _, step, _ in pieces]),
            np.concatenate([[0], np.cumsum(cells)[:-1]]).astype(np.int64),
            cells,
            np.ascontiguousarray(np.concatenate([coef for _, _, coef in pieces], axis=1).T),
        )

    def at(self, table: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The values at ``u[r, :]`` of table ``table[r]``, and the mask of those before its end (the others' values
        are meaningless: the caller computes them)."""
        column = table[:, None]
        pos = (u - self.start[column]) * (1.0 / self.step[column])
        np.maximum(pos, 0.0, out=pos)
        inside = pos < self.cells[column]
        cell = np.floor(pos)
        cell[~inside] = 0.0
        t = pos - cell
        i = cell.astype(np.int64)
        i += self.first[column]
        c = self.coef.take(i, axis=0)  # (rows, points, 4): Horner's rule from t^3
        out = c[..., 3] * t
        out += c[..., 2]
        out *= t
        out += c[..., 1]
        out *= t
        out += c[..., 0]
        return out, inside


@dataclass(frozen=True, slots=True)
class WorkGroup:
    """One group's distribution of log total work (in the belief's unit): a Gaussian kernel mixture.

    ``level`` is ``configuration``, ``model`` or ``pooled``; ``key`` names the group
    (``(model, batch, type, count)``, ``(model,)`` or ``()``); ``jobs`` how many training jobs
    it was fitted on.
    """

    level: str
    key: tuple[str | int, ...]
    jobs: int
    bandwidth: float
    centres: tuple[float, ...]
    weights: tuple[float, ...]
    _c: np.ndarray = field(init=False, repr=False, compare=False)
    _logw: np.ndarray = field(init=False, repr=False, compare=False)
    _memo: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        arity = {"configuration": 4, "model": 1, POOLED: 0}
        if self.level not in arity or len(self.key) != arity[self.level]:
            raise ValueError(f"group {self.level!r} {self.key}: unknown level or key of the wrong length")
        c = np.asarray(self.centres, dtype=float)
        w = np.asarray(self.weights, dtype=float)
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"group {self.name}: bandwidth must be a positive finite number, got {self.bandwidth}")
        if c.size == 0 or c.shape != w.shape or not np.isfinite(c).all() or not (np.isfinite(w) & (w > 0)).all():
            raise ValueError(f"group {self.name}: needs as many finite centres as positive weights (>= 1)")
        if self.jobs < 1:
            raise ValueError(f"group {self.name}: jobs must be >= 1, got {self.jobs}")
        logw = np.log(w / w.sum())
        for a in (c, logw):
            a.flags.writeable = False
        object.__setattr__(self, "_c", c)
        object.__setattr__(self, "_logw", logw)
        object.__setattr__(self, "_memo", {})

    @property
    def name(self) -> str:
        """The group as text, e.g. ``configuration gpt__1.3B/128/a40/4``."""
        return f"{self.level} {'/'.join(map(str, self.key))}".rstrip()

    def log_survival(self, u: np.ndarray) -> np.ndarray:
        """``log P(log S > u)`` at each ``u``."""
        z = (self._c[None, :] - np.asarray(u, dtype=float)[:, None]) / self.bandwidth
        return logsumexp_rows(self._logw + log_ndtr(z))

    def survival_pieces(self) -> tuple[float, float, np.ndarray]:
        """(first node, node spacing, the cubic pieces' coefficients) of the group's log survival (built once)."""
        pieces = self._memo.get("survival")
        if pieces is None:
            h = self.bandwidth
            step = SURVIVAL_STEP * h
            u = np.arange(self._c.min() - SURVIVAL_BELOW * h, self._c.max() + SURVIVAL_ABOVE * h, step)
            z = (self._c[None, :] - u[:, None]) / h
            f = logsumexp_rows(self._logw + log_ndtr(z))
            d = -np.exp(logsumexp_rows(self._logw - 0.5 * z * z) - f) * (step / (h * math.sqrt(2 * math.pi)))
            f0, f1, d0, d1 = f[:-1], f[1:], d[:-1], d[1:]
            coef = np.stack([f0, d0, 3.0 * (f1 - f0) - 2.0 * d0 - d1, 2.0 * (f0 - f1) + d0 + d1])
            coef.flags.writeable = False
            pieces = self._memo.setdefault("survival", (float(u[0]), step, coef))
        return pieces

    def log_pdf(self, u: np.ndarray) -> np.ndarray:
        """The log density of ``log S`` at each ``u``."""
        z = (np.asarray(u, dtype=float)[:, None] - self._c[None, :]) / self.bandwidth
        return logsumexp_rows(self._logw - 0.5 * z * z) - math.log(self.bandwidth * math.sqrt(2 * math.pi))

    def sample_above(self, lower: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws of ``log S`` per row, given ``log S > lower[row]`` (``-inf``: no condition)."""
        lower = np.asarray(lower, dtype=float)
        rows, width = len(lower), len(self._c)
        cut = (lower[:, None] - self._c[None, :]) / self.bandwidth
        post = self._logw + log_ndtr(-cut)
        p = np.exp(post - post.max(axis=1, keepdims=True))
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        offset = np.arange(rows)[:, None]
        pos = np.searchsorted((cdf + offset).ravel(), (rng.random((rows, n)) + offset).ravel(), side="right")
        atom = np.minimum(pos.reshape(rows, n) - offset * width, width - 1)
        zc = np.take_along_axis(cut, atom, axis=1)
        exact = -ndtri(np.exp(np.log1p(-rng.random((rows, n))) + log_ndtr(-zc)))
        tail = zc + rng.exponential(size=(rows, n)) / np.maximum(zc, TAIL_Z)
        return self._c[atom] + self.bandwidth * np.where(zc > TAIL_Z, tail, exact)

    def gittins_table(self) -> GittinsTable:
        """The group's Gittins table, on a log grid from below its smallest kernel to past its largest (built once)."""
        table = self._memo.get("gittins")
        if table is None:
            h = self.bandwidth
            u = np.linspace(self._c.min() - GRID_BELOW * h, self._c.max() + GRID_ABOVE * h, GRID_POINTS)
            table = self._memo.setdefault("gittins", GittinsTable.build(np.exp(u), self.log_survival(u)))
        return table
