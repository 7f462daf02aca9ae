"""A small typed wrapper around ``scipy.optimize.milp`` (HiGHS), shared by the Gavel and Sia baselines.

scipy is imported when the first problem is built, not with this module.

Build a problem with :class:`MilpBuilder` (variables with bounds and integrality, linear rows
as sparse coefficients), then solve it with :meth:`Milp.solve`. A solve that ends without a
usable solution raises :class:`MilpError` naming the solver status; a solve stopped by the
time limit with a feasible incumbent returns it with ``optimal=False``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy is imported on first solve: policies that never solve start without it
    from scipy.optimize import OptimizeResult
    from scipy.sparse import csr_array

log = logging.getLogger(__name__)

#: scipy.optimize.milp status codes.
_STATUS = {
    0: "optimal",
    1: "iteration or time limit reached",
    2: "infeasible",
    3: "unbounded",
    4: "other (see message)",
}


@dataclass(frozen=True)
class MilpConfig:
    """Solver settings: HiGHS time limit per solve, relative MIP gap, presolve on/off.

    ``lp_first``: solve the LP relaxation first and return it when every integer variable
    is integral (within ``integrality_tol``): it is then an optimal MILP solution, found
    without branch-and-bound (HiGHS' MIP root work costs milliseconds even on tiny models).
    """

    time_limit_s: float = 5.0
    mip_rel_gap: float = 1e-6
    presolve: bool = True
    lp_first: bool = True
    integrality_tol: float = 1e-7

    def __post_init__(self) -> None:
        if not self.time_limit_s > 0:
            raise ValueError(f"MILP time limit must be > 0 s, got {self.time_limit_s}")
        if not 0 <= self.mip_rel_gap < 1:
            raise ValueError(f"MILP relative gap must be in [0, 1), got {self.mip_rel_gap}")
        if not 0 < self.integrality_tol < 0.5:
            raise ValueError(f"integrality tolerance must be in (0, 0.5), got {self.integrality_tol}")


@dataclass(frozen=True)
class MilpSolution:
    """A solution: variable values, objective (in the problem's own sense), and whether it is proven optimal."""

    x: np.ndarray
    objective: float
    optimal: bool
    status: int
    message: str

    def chosen(self, indices: np.ndarray | Sequence[int]) -> np.ndarray:
        """Boolean mask: which of the given binary variables are set (value > 0.5)."""
        return self.x[np.asarray(indices, dtype=np.int64)] > 0.5


class MilpError(RuntimeError):
    """The solver ended without a usable solution; ``status`` is scipy's milp status code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"MILP not solved: status {status} ({_STATUS.get(status, 'unknown')}): {message}")
        self.status = status
        self.solver_message = message


@dataclass(frozen=True)
class Milp:
    """``max`` (or ``min``) ``c @ x`` subject to ``row_lb <= a @ x <= row_ub``, variable bounds and integrality."""

    c: np.ndarray
    a: csr_array
    row_lb: np.ndarray
    row_ub: np.ndarray
    var_lb: np.ndarray
    var_ub: np.ndarray
    integrality: np.ndarray
    maximize: bool = True

    def __post_init__(self) -> None:
        n = len(self.c)
        m = self.a.shape[0]
        if self.a.shape[1] != n:
            raise ValueError(f"constraint matrix has {self.a.shape[1]} columns but there are {n} variables")
        for name, arr, size in (
            ("row_lb", self.row_lb, m),
            ("row_ub", self.row_ub, m),
            ("var_lb", self.var_lb, n),
            ("var_ub", self.var_ub, n),
            ("integrality", self.integrality, n),
        ):
            if len(arr) != size:
                raise ValueError(f"{name} has length {len(arr)}, expected {size}")
        if not np.all(np.isfinite(self.c)):
            raise ValueError("objective coefficients must be finite")
        if np.any(self.row_lb > self.row_ub) or np.any(self.var_lb > self.var_ub):
            raise ValueError("a lower bound exceeds its upper bound")

    @property
    def num_vars(self) -> int:
        """Number of variables."""
        return len(self.c)

    def solve(self, config: MilpConfig | None = None) -> MilpSolution:
        """Solve with HiGHS; MilpError when there is no usable solution (infeasible, unbounded, limit without incumbent)."""
        config = config if config is not None else MilpConfig()
        if self.num_vars == 0:
            if np.any(self.row_lb > 0) or np.any(self.row_ub < 0):
                raise MilpError(2, "no variables, and some row bound excludes 0")
            return MilpSolution(np.zeros(0), 0.0, True, 0, "empty problem")
        if config.lp_first and self.integrality.any():
            relaxed = self._run(config, np.zeros_like(self.integrality))
            if relaxed.status == 0 and relaxed.x is not None:
                x = np.asarray(relaxed.x, dtype=float)
                ints = self.integrality > 0
                rounded = np.round(x[ints])
                if np.all(np.abs(x[ints] - rounded) <= config.integrality_tol):
                    x[ints] = rounded
                    return MilpSolution(x, float(self.c @ x), True, 0, "LP relaxation integral")
        result = self._run(config, self.integrality)
        if result.x is None or result.status not in (0, 1):
            raise MilpError(int(result.status), str(result.message))
        if result.status == 1:
            log.warning("MILP stopped at its limit with a feasible, unproven solution: %s", result.message)
        x = np.asarray(result.x, dtype=float)
        return MilpSolution(x, float(self.c @ x), result.status == 0, int(result.status), str(result.message))

    def _run(self, config: MilpConfig, integrality: np.ndarray) -> OptimizeResult:
        from scipy.optimize import Bounds, LinearConstraint, milp

        sign = -1.0 if self.maximize else 1.0
        constraints = [LinearConstraint(self.a, self.row_lb, self.row_ub)] if self.a.shape[0] else []
        return milp(
            sign * self.c,
            constraints=constraints,
            integrality=integrality,
            bounds=Bounds(self.var_lb, self.var_ub),
            options={"time_limit": config.time_limit_s, "mip_rel_gap": config.mip_rel_gap, "presolve": config.presolve},
        )


class MilpBuilder:
    """Incremental builder of a :class:`Milp`: add variable blocks and sparse rows, then ``build``."""

    def __init__(self) -> None:
        self._c: list[np.ndarray] = []
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self._n = 0
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self._row_lb: list[float] = []
        self._row_ub: list[float] = []

    @property
    def num_vars(self) -> int:
        """Number of variables added so far."""
        return self._n

    def add_vars(
        self, cost: Sequence[float] | np.ndarray, lb: float = 0.0, ub: float = 1.0, integer: bool = True
    ) -> np.ndarray:
        """Add one variable per cost entry (binary by default); return their indices."""
        cost = np.asarray(cost, dtype=float).ravel()
        k = len(cost)
        self._c.append(cost)
        self._lb.append(np.full(k, lb, dtype=float))
        self._ub.append(np.full(k, ub, dtype=float))
        self._int.append(np.full(k, 1 if integer else 0, dtype=np.int64))
        idx = np.arange(self._n, self._n + k, dtype=np.int64)
        self._n += k
        return idx

    def add_row(
        self,
        cols: Sequence[int] | np.ndarray,
        coefs: Sequence[float] | np.ndarray | float,
        lb: float = -math.inf,
        ub: float = math.inf,
    ) -> int:
        """Add the row ``lb <= sum(coefs * x[cols]) <= ub`` (scalar ``coefs`` = same for all); return its index."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        vals = np.broadcast_to(np.asarray(coefs, dtype=float), cols.shape).astype(float)
        if len(cols) and (cols.min() < 0 or cols.max() >= self._n):
            raise ValueError(f"row refers to variable {int(cols.max())} but only {self._n} exist")
        if lb > ub:
            raise ValueError(f"row lower bound {lb} exceeds upper bound {ub}")
        row = len(self._row_lb)
        self._rows.append(np.full(len(cols), row, dtype=np.int64))
        self._cols.append(cols)
        self._vals.append(vals)
        self._row_lb.append(lb)
        self._row_ub.append(ub)
        return row

    def build(self, maximize: bool = True) -> Milp:
        """The problem built so far."""
        from scipy.sparse import csr_array

        m, n = len(self._row_lb), self._n
        a = csr_array((_cat(self._vals, float), (_cat(self._rows, np.int64), _cat(self._cols, np.int64))), shape=(m, n))
        return Milp(
            _cat(self._c, float),
            a,
            np.asarray(self._row_lb, dtype=float),
            np.asarray(self._row_ub, dtype=float),
            _cat(self._lb, float),
            _cat(self._ub, float),
            _cat(self._int, np.int64),
            maximize,
        )


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
