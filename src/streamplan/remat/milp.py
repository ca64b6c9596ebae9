"""A small mixed-integer program builder and its HiGHS driver (the exact solver's back end)."""

from __future__ import annotations

import contextlib
import os
import sys

INF = float("inf")


class Infeasible(Exception):
    """A row that no assignment satisfies (found while building)."""


class Milp:
    """Columns and rows of a MILP, built by index (constants folded into the row bounds)."""

    def __init__(self) -> None:
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.cost: list[float] = []
        self.integer: list[bool] = []
        self.rows: list[tuple[float, float, list[int], list[float]]] = []

    def var(self, lb: float, ub: float, cost: float = 0.0, integer: bool = False) -> int:
        self.lb.append(lb)
        self.ub.append(ub)
        self.cost.append(cost)
        self.integer.append(integer)
        return len(self.lb) - 1

    def row(self, terms: dict[int, float], lo: float, hi: float) -> None:
        if terms:
            self.rows.append((lo, hi, list(terms), list(terms.values())))
        elif lo > 1e-9 or hi < -1e-9:
            raise Infeasible


def solve_highs(lp: Milp, time_limit_s: float, threads: int, seed: int, start: list[float] | None):
    """(status, solution or None, objective, dual bound) from HiGHS."""
    import highspy
    import numpy as np

    with _quiet_stdout():
        h = highspy.Highs()  # prints a banner on the C-level stdout when created
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(0.05, float(time_limit_s)))
    h.setOptionValue("threads", max(1, int(threads)))
    h.setOptionValue("random_seed", int(seed))
    h.setOptionValue("mip_rel_gap", 1e-6)
    n = len(lp.lb)
    if n == 0:
        return "optimal", [], 0.0, 0.0
    h.addVars(n, np.array(lp.lb, dtype=np.float64), np.array(lp.ub, dtype=np.float64))
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(lp.cost, dtype=np.float64))
    ints = [j for j in range(n) if lp.integer[j]]
    if ints:
        h.changeColsIntegrality(
            len(ints),
            np.array(ints, dtype=np.int32),
            np.array([highspy.HighsVarType.kInteger] * len(ints)),
        )
    if lp.rows:
        lower = np.array([r[0] if r[0] != -INF else -highspy.kHighsInf for r in lp.rows], dtype=np.float64)
        upper = np.array([r[1] if r[1] != INF else highspy.kHighsInf for r in lp.rows], dtype=np.float64)
        starts, index, value = [], [], []
        for _, _, idx, val in lp.rows:
            starts.append(len(index))
            index.extend(idx)
            value.extend(val)
        h.addRows(
            len(lp.rows),
            lower,
            upper,
            len(index),
            np.array(starts, dtype=np.int32),
            np.array(index, dtype=np.int32),
            np.array(value, dtype=np.float64),
        )
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = list(start)
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    M = highspy.HighsModelStatus
    if status == M.kInfeasible:
        return "infeasible", None, 0.0, 0.0
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if not has_solution:
        return "unknown", None, 0.0, 0.0
    x = list(h.getSolution().col_value)
    obj = info.objective_function_value
    bound = info.mip_dual_bound
    return ("optimal" if status == M.kOptimal else "feasible"), x, obj, bound


@contextlib.contextmanager
def _quiet_stdout():
    """Silence file descriptor 1 (HiGHS writes its banner there, past Python's sys.stdout)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
