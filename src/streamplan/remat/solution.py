"""What a solver returns: a plan (or none), its host-order figures, and how sure it is."""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.remat.problem import RematProblem, check_plan, evaluate


@dataclass(frozen=True)
class SolverResult:
    """One solver run at one target.

    ``sequence`` is the plan (op positions, normalised), None when the solver found none
    (``status`` says why: ``infeasible`` is proven, ``stuck``/``unknown`` are not).
    ``peak_bytes`` and ``added_cost_ms`` are the plan's host-order figures on the
    reference order. ``optimality_gap`` is (objective - proven bound) / objective of
    the solver's own model, 0.0 when proven optimal, None when the method proves nothing.
    """

    solver: str
    status: str
    sequence: tuple[int, ...] | None
    peak_bytes: int | None
    added_cost_ms: float
    recomputations: int
    optimality_gap: float | None
    solve_time_s: float
    note: str = ""

    @property
    def found(self) -> bool:
        return self.sequence is not None

    @staticmethod
    def none(solver: str, status: str, solve_time_s: float, note: str = "") -> SolverResult:
        return SolverResult(solver, status, None, None, 0.0, 0, None, solve_time_s, note)

    def to_dict(self) -> dict:
        return {
            "solver": self.solver,
            "status": self.status,
            "peak_bytes": self.peak_bytes,
            "added_cost_ms": self.added_cost_ms,
            "recomputations": self.recomputations,
            "optimality_gap": self.optimality_gap,
            "solve_time_s": self.solve_time_s,
            **({"note": self.note} if self.note else {}),
        }


def heuristic_result(
    problem: RematProblem,
    seq: tuple[int, ...],
    solver: str,
    solve_time_s: float,
    *,
    target_bytes: int,
    status: str = "feasible",
    optimality_gap: float | None = None,
) -> SolverResult:
    """A checked plan with its host-order figures (no plan if it misses ``target_bytes``: a
    solver's own bookkeeping is never trusted over the plan's exact figures)."""
    check_plan(problem, seq)
    stats = evaluate(problem, seq)
    if stats.peak_bytes > target_bytes:
        return SolverResult.none(
            solver,
            "missed",
            solve_time_s,
            note=f"its plan peaks at {stats.peak_bytes} bytes, over the target",
        )
    return SolverResult(
        solver=solver,
        status=status,
        sequence=seq,
        peak_bytes=stats.peak_bytes,
        added_cost_ms=stats.added_cost_ms,
        recomputations=stats.recomputations,
        optimality_gap=optimality_gap,
        solve_time_s=solve_time_s,
    )
