"""The rematerialization solvers by name, imported lazily (one entry here adds a solver).

Every solver is ``fn(problem, target_bytes, *, time_limit_s, seed, hint) -> SolverResult``:
a plan whose host-order peak on the problem's reference order fits ``target_bytes``,
with the least added time it can find.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamplan.errors import BudgetError
from streamplan.remat.problem import RematProblem

if TYPE_CHECKING:
    from streamplan.remat.scalable import Pruned
from streamplan.remat.solution import SolverResult

SolverFn = Callable[..., SolverResult]


@dataclass(frozen=True, slots=True)
class SolverInfo:
    name: str
    path: str  # "module:function"
    summary: str


_REGISTRY: tuple[SolverInfo, ...] = (
    SolverInfo(
        "greedy",
        "streamplan.remat.greedy:solve_greedy",
        "RAF's eviction: drop the lowest (cost+0.1)(uses+1)/size, recompute at the next use",
    ),
    SolverInfo(
        "scalable",
        "streamplan.remat.scalable:solve_scalable",
        "peak-driven lifetime splitting with recomputation chains (thousands of ops in seconds)",
    ),
    SolverInfo(
        "exact",
        "streamplan.remat.exact:solve_exact_started",
        "Checkmate's stage MILP solved by HiGHS, started from the scalable plan; reports its gap",
    ),
)
_BY_NAME = {s.name: s for s in _REGISTRY}
SOLVERS: tuple[str, ...] = tuple(_BY_NAME)
DEFAULT_SOLVER = "scalable"


def solver_info(name: str) -> SolverInfo:
    info = _BY_NAME.get(name)
    if info is None:
        raise BudgetError(
            f"unknown rematerialization solver {name!r}", hint=f"choose one of: {', '.join(SOLVERS)}"
        )
    return info


class Ladder:
    """A solver's plans at the rungs of one ladder of targets on one problem, made on demand
    and cached. The scalable solver plans the whole ladder in one descent (``scalable.Descent``),
    the others solve each rung on its own; with ``start`` (``scalable.Pruned``: a given plan),
    each rung's plan is that plan pruned to the rung, whatever the solver."""

    def __init__(
        self,
        name: str,
        problem: RematProblem,
        rungs: tuple[int, ...],
        *,
        time_limit_s: float = 10.0,
        seed: int = 0,
        start: Pruned | None = None,
    ):
        solver_info(name)
        self.name = name
        self.problem = problem
        self.rungs = tuple(sorted(set(rungs), reverse=True))
        self.time_limit_s = time_limit_s
        self.seed = seed
        self._plans: dict[int, SolverResult] = {}
        self._descent = None
        if start is not None:  # a given plan, pruned to each rung
            self._descent = start
        elif name == DEFAULT_SOLVER:
            from streamplan.remat.scalable import Descent

            self._descent = Descent(problem, self.rungs, time_limit_s=time_limit_s)

    def plan(self, rung: int) -> SolverResult:
        """The plan at ``rung`` (one of the ladder's)."""
        if self._descent is not None:
            return self._descent.plan(rung)
        if rung not in self._plans:
            self._plans[rung] = solve(
                self.name, self.problem, rung, time_limit_s=self.time_limit_s, seed=self.seed
            )
        return self._plans[rung]


def solve(
    name: str,
    problem: RematProblem,
    target_bytes: int,
    *,
    time_limit_s: float = 10.0,
    seed: int = 0,
    hint: tuple[int, ...] | None = None,
) -> SolverResult:
    """Run solver ``name`` on ``problem`` under ``target_bytes``."""
    module, _, fn = solver_info(name).path.partition(":")
    solver: SolverFn = getattr(importlib.import_module(module), fn)
    return solver(problem, target_bytes, time_limit_s=time_limit_s, seed=seed, hint=hint)
