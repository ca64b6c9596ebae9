"""What the rematerialization search makes and answers with: a ``PlanCandidate`` (a rewritten
graph, its schedule and what they cost) and the ``RematSearch`` result, and the names of the
reference orders a plan is made on."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamplan.cost.timeline import Timeline
from streamplan.ir.graph import Graph
from streamplan.ir.includes import Includes
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.worst_case import WorstCasePeak
from streamplan.remat.budget import PeakFloor
from streamplan.remat.rewrite import recomputations
from streamplan.remat.solution import SolverResult

POLICY_ORDER = "policy order"
ONE_STREAM_ORDER = "one-stream order"
UPDATES_EARLY_ORDER = "updates-early order"


@dataclass(frozen=True)
class PlanCandidate:
    """One rewritten graph, its schedule under the policy, and what they cost.

    ``worst_case`` is None when the candidate could not be the answer (slower than one
    in hand, or its host-order peak already over the budget), so its peak was not
    proven. ``level_bytes`` is the solver target it came from (None for the baseline),
    ``reference`` the order the solver planned on and ``round`` the alternation round.
    """

    graph: Graph
    schedule: StreamSchedule
    timeline: Timeline
    worst_case: WorstCasePeak | None
    added_compute_ms: float
    recomputed_ops: int
    level_bytes: int | None = None
    reference: str = "baseline"
    round: int = 0
    solve: SolverResult | None = field(default=None, compare=False)
    max_streams: int = 0  # the stream cap the policy ran under

    @property
    def makespan_ms(self) -> float:
        return self.timeline.makespan_ms

    @property
    def peak_bytes(self) -> int | None:
        return None if self.worst_case is None else self.worst_case.upper_bytes

    @property
    def recomputed_flops(self) -> int:
        """FLOPs of the recomputations (the captured ops' own counts)."""
        return sum(n.flops for n in recomputations(self.graph))

    def rank(self, tie: tuple) -> tuple:
        """Sort key: faster, then lower worst case, then less added compute, then ``tie``."""
        return (self.makespan_ms, self.peak_bytes, self.added_compute_ms, tie)


@dataclass(frozen=True)
class RematSearch:
    """The answer (``chosen``), the baseline, the floor, and how much searching it took.

    ``candidates`` counts the plans made, ``evaluated`` those scheduled and simulated
    (the rest were ruled out by their makespan bound), ``analyses`` the worst-case
    proofs. ``complete`` is False when ``search_time_limit_s`` stopped the evaluation.
    """

    budget_bytes: int
    chosen: PlanCandidate
    baseline: PlanCandidate
    floor: PeakFloor
    levels: tuple[int, ...]
    solver: str
    policy: str
    joint: bool
    candidates: int
    analyses: int
    search_time_s: float
    includes: Includes
    evaluated: int = 0
    complete: bool = True
