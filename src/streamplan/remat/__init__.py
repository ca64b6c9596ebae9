"""Rematerialization under a budget on the worst-case peak of the final multi-stream schedule.

- ``RematProblem`` (``problem``): the solvers' view of a graph on a reference order; a plan is
  a sequence of op positions in which an op may repeat (a recomputation);
- ``rewrite`` (``rewrite``): a plan as a new ``Graph`` whose recomputations are ordinary
  nodes marked ``recompute_of`` and ordered by ``Node.after``;
- ``solve`` and ``SOLVERS`` (``solvers``): RAF's ``greedy``, the ``scalable`` lifetime
  splitter, the ``exact`` MILP;
- ``search`` (``search``): the joint search with the scheduling policies, under a budget
  checked by ``memory.worst_case`` (a budget is read by ``MemoryBudget.parse``); ``peak_floor``
  (``budget``).

``streamplan.app.plan_remat`` is the command's entry point (typed ``RematPlan`` result).
"""

from streamplan.remat.budget import PeakFloor, peak_floor
from streamplan.remat.candidates import PlanCandidate, RematSearch
from streamplan.remat.problem import RematProblem, evaluate, normalize
from streamplan.remat.rewrite import recomputations, rewrite
from streamplan.remat.search import search
from streamplan.remat.solution import SolverResult
from streamplan.remat.solvers import SOLVERS, solve

__all__ = [
    "SOLVERS",
    "PlanCandidate",
    "PeakFloor",
    "RematProblem",
    "RematSearch",
    "SolverResult",
    "evaluate",
    "normalize",
    "peak_floor",
    "recomputations",
    "rewrite",
    "search",
    "solve",
]
