"""The one LP driver of :mod:`dpkit.fairness`: scipy's HiGHS on sparse constraint matrices, with sizes and times."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.core.errors import DPKitError

#: HiGHS primal/dual feasibility tolerance used by every fairness LP (HiGHS's default is 1e-7).
FEASIBILITY_TOLERANCE = 1e-9
#: Refuse LPs with more nonzeros than this (memory: about 40 bytes per nonzero in scipy + HiGHS).
MAX_NONZEROS = 60_000_000


class SolverError(DPKitError):
    """A fairness LP could not be solved to optimality (time limit, infeasible, numerical trouble).

    ``param`` names the argument to change (``time_limit`` when the limit was hit, else the input that made the
    LP unsolvable); ``status`` is scipy's status code (1 limit, 2 infeasible, 3 unbounded, 4 numerical) and
    ``lp`` the :class:`LPInfo` of the failed program."""

    def __init__(self, param: str, problem: str, *, status: int = -1, lp: LPInfo | None = None) -> None:
        self.param = param
        self.status = status
        self.lp = lp
        super().__init__(f"{param}: {problem}")


@dataclass
class LPInfo:
    """Size and outcome of one linear program (or of the last round of a lazy constraint loop).

    ``variables``, ``constraints`` (inequalities + equalities), ``nonzeros`` (of the sparse constraint matrix);
    ``pairs_total`` (unordered pairs of individuals the definition constrains), ``pairs_kept`` (those with a
    constraint in the LP), ``pairs_dropped`` (provably vacuous ones, e.g. ``d >= 1`` under total variation);
    ``rounds`` (LP solves: 1, or more under lazy constraint generation); ``status`` / ``message`` (scipy's),
    ``build_seconds`` (building the matrices), ``solve_seconds`` (CPU seconds in HiGHS, summed over rounds) and
    ``solve_wall_seconds``; ``notes`` lists the reductions applied."""

    variables: int = 0
    constraints: int = 0
    nonzeros: int = 0
    pairs_total: int = 0
    pairs_kept: int = 0
    pairs_dropped: int = 0
    rounds: int = 0
    status: int = -1
    message: str = ""
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    solve_wall_seconds: float = 0.0
    iterations: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()}


def solve(c: np.ndarray, a_ub: Any, b_ub: np.ndarray | None, a_eq: Any, b_eq: np.ndarray | None,
          bounds: Any, *, time_limit: float, info: LPInfo, what: str, sense: str = "min") -> np.ndarray:
    """Solve ``min c.x`` (or max) s.t. ``a_ub x <= b_ub``, ``a_eq x = b_eq``, ``bounds`` with HiGHS; return x.

    Records sizes and times in ``info`` (accumulating times over rounds) and raises :class:`SolverError` unless
    HiGHS reports an optimum."""
    from scipy.optimize import linprog

    nnz = (a_ub.nnz if a_ub is not None else 0) + (a_eq.nnz if a_eq is not None else 0)
    info.variables = int(c.size)
    info.constraints = int((a_ub.shape[0] if a_ub is not None else 0) + (a_eq.shape[0] if a_eq is not None else 0))
    info.nonzeros = int(nnz)
    if nnz > MAX_NONZEROS:
        raise SolverError(what, f"the LP would have more than {MAX_NONZEROS} nonzeros; use constraints='lazy' "
                          "or fewer individuals", status=-1, lp=info)
    cost = -c if sense == "max" else c
    opts = {"time_limit": float(time_limit), "primal_feasibility_tolerance": FEASIBILITY_TOLERANCE,
            "dual_feasibility_tolerance": FEASIBILITY_TOLERANCE, "presolve": True}
    cpu0, wall0 = time.process_time(), time.perf_counter()
    try:
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, bounds=bounds, method="highs",
                      options=opts)
    except (ValueError, MemoryError, OverflowError):
        raise SolverError(what, "the solver refused the LP (numerical range or memory)", lp=info) from None
    finally:
        info.solve_seconds += time.process_time() - cpu0
        info.solve_wall_seconds += time.perf_counter() - wall0
    info.rounds += 1
    info.status = int(res.status)
    info.message = str(res.message)
    info.iterations += int(getattr(res, "nit", 0) or 0)
    if res.status != 0 or res.x is None:
        if res.status == 1:
            raise SolverError("time_limit", "the solver stopped at its time or iteration limit before an optimum",
                              status=1, lp=info)
        kind = {2: "infeasible", 3: "unbounded", 4: "in numerical difficulty"}.get(int(res.status), "unsolved")
        raise SolverError(what, f"the LP is {kind}", status=int(res.status), lp=info)
    return np.asarray(res.x, dtype=np.float64)


def upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """All unordered pairs i < j of range(n)."""
    i, j = np.triu_indices(n, k=1)
    return i.astype(np.int64), j.astype(np.int64)
