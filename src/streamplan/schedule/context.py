"""``ScheduleContext``: everything a policy may use besides the graph, in one frozen value.

Every policy is ``policy(graph, ctx) -> StreamSchedule``. The context carries the
stream cap, the cost model (an analytic device profile or a measured table, so
searches such as IOS use measured costs when they are given), a memory budget, a
time limit for searches, a seed, a progress callback, the policy's own tunables
(``options``, checked against what the policy declares in the registry), and how
operator fusion and scheduling are combined (``fusion``: applied by
``streamplan.fusion.schedule_with_fusion``; ``make_schedule`` itself never fuses).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from streamplan.cost.devices import DeviceProfile
from streamplan.cost.opcost import AnalyticCostModel, CostModel, resolve_cost
from streamplan.errors import ScheduleError
from streamplan.ir.frozen import FrozenDict, freeze
from streamplan.progress import ProgressFn, no_progress

BudgetFigure = Literal["worst_case", "arena"]
BUDGET_FIGURES: tuple[str, ...] = ("worst_case", "arena")
# none: schedule the ops as captured; first: fuse, then schedule the kernels; stream-aware:
# schedule, then fuse only along each stream's own chains (docs/fusion.md)
FUSION_MODES: tuple[str, ...] = ("none", "first", "stream-aware")


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """At most ``limit_bytes`` of the memory figure ``figure`` (default: the worst case over all timings).

    ``includes_inputs``/``includes_params`` say which storages the figure counts
    besides activations, as in the memory analyses.
    """

    limit_bytes: int
    figure: BudgetFigure = "worst_case"
    includes_inputs: bool = False
    includes_params: bool = False

    def __post_init__(self) -> None:
        b = self.limit_bytes
        if isinstance(b, bool) or not isinstance(b, int) or b < 0:
            raise ScheduleError(f"a memory budget is a number of bytes >= 0, got {b!r}")
        if self.figure not in BUDGET_FIGURES:
            raise ScheduleError(
                f"unknown budgeted figure {self.figure!r}", hint=f"use one of {', '.join(BUDGET_FIGURES)}"
            )


@dataclass(frozen=True)
class ScheduleContext:
    """What any policy may need: stream cap, cost model, budget, time limit, seed, progress.

    ``fusion`` says how fusion and scheduling combine (``FUSION_MODES``); the
    application and the runtime apply it through ``streamplan.fusion``, and a policy
    may read it (under ``first`` it is handed the fused graph).

    ``cost`` accepts a ``CostModel``, a device profile or its name (``"v100"``...).
    ``options`` are the policy's own tunables (IOS's ``r``, ``s``, ``block_ops``...);
    a policy rejects an option it does not declare.
    """

    max_streams: int = 8
    cost: CostModel = field(default_factory=lambda: AnalyticCostModel("v100"))
    budget: MemoryBudget | None = None
    time_limit_s: float = 10.0
    seed: int = 0
    progress: ProgressFn = field(default=no_progress, compare=False)
    options: Mapping[str, Any] = field(default_factory=FrozenDict)
    fusion: str = "none"

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_streams, bool)
            or not isinstance(self.max_streams, int)
            or self.max_streams < 1
        ):
            raise ScheduleError(f"max_streams must be an int >= 1, got {self.max_streams!r}")
        if not (self.time_limit_s > 0):
            raise ScheduleError(f"time_limit_s must be > 0, got {self.time_limit_s!r}")
        if not isinstance(self.cost, CostModel):
            if not isinstance(self.cost, (str, DeviceProfile)):
                raise ScheduleError(
                    f"cost must be a CostModel, a DeviceProfile or a device name, got {type(self.cost).__name__}"
                )
            object.__setattr__(self, "cost", resolve_cost(self.cost))
        object.__setattr__(self, "options", freeze(self.options))
        if self.fusion not in FUSION_MODES:
            raise ScheduleError(
                f"unknown fusion mode {self.fusion!r}", hint=f"use one of {', '.join(FUSION_MODES)}"
            )

    def replace(self, **changes: Any) -> ScheduleContext:
        return dataclasses.replace(self, **changes)

    def option(self, name: str, default: Any) -> Any:
        """The policy option ``name``, or ``default`` when not given."""
        return self.options.get(name, default)


DEFAULT_CONTEXT = ScheduleContext()
