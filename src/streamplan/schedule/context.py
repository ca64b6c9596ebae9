"""``ScheduleContext``: everything a policy may use besides the graph, in one frozen value.

Every policy is ``policy(graph, ctx) -> StreamSchedule``. The context carries the
stream cap, the cost model (an analytic device profile or a measured table, so
searches such as IOS use measured costs when they are given), a memory budget, a
time limit for searches, a seed, a progress callback, the policy's own tunables
(``options``: its options dataclass, checked against what the policy declares in the
registry), and how operator fusion and scheduling are combined (``fusion``: applied by
``streamplan.fusion.schedule_with_fusion``; ``make_schedule`` itself never fuses).

A context is a value: two contexts with equal fields are equal and hash alike (the
progress callback, which reports and decides nothing, is left out). A ``Settings``
(``schedule.settings``) builds one for each policy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from streamplan.cost.devices import DeviceProfile
from streamplan.cost.opcost import AnalyticCostModel, CostModel, resolve_cost
from streamplan.errors import BudgetError, ScheduleError
from streamplan.ir.frozen import FrozenDict, freeze
from streamplan.ir.includes import ACTIVATIONS, Includes
from streamplan.ir.schedule import Fusion
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.options import build_options
from streamplan.units import parse_size_text

T = TypeVar("T")
BudgetFigure = Literal["worst_case", "arena"]
BUDGET_FIGURES: tuple[str, ...] = ("worst_case", "arena")
FUSION_MODES: tuple[str, ...] = tuple(m.value for m in Fusion)


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    """At most ``limit_bytes`` of the memory figure ``figure`` (default: the worst case over all timings).

    Either ``limit_bytes`` or ``factor`` is given: a factor is a multiple of the
    figure's value for the sequential schedule (one stream, graph order) of the graph
    being scheduled, resolved with ``limit_for``. ``includes`` says which storages the
    figure counts besides activations, as in the memory analyses. ``MemoryBudget.parse("12MiB")`` reads what a user types.
    """

    limit_bytes: int | None = None
    figure: BudgetFigure = "worst_case"
    includes: Includes = ACTIVATIONS
    factor: float | None = None

    def __post_init__(self) -> None:
        b, f = self.limit_bytes, self.factor
        if (b is None) == (f is None):
            raise BudgetError(
                "a memory budget is a number of bytes or a factor of the sequential peak, not both"
            )
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 0):
            raise BudgetError(f"a memory budget is a number of bytes >= 0, got {b!r}")
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not f > 0):
            raise BudgetError(f"a budget factor is a number > 0, got {f!r}")
        if self.figure not in BUDGET_FIGURES:
            raise BudgetError(
                f"unknown budgeted figure {self.figure!r}", hint=f"use one of {', '.join(BUDGET_FIGURES)}"
            )

    @staticmethod
    def parse(text: str | int | MemoryBudget, **fields: Any) -> MemoryBudget:
        """The one reader of a budget a user types: ``"12MiB"``, ``"1.5 GiB"``, ``"4096"`` (bytes),
        ``"800MB"`` (decimal units) or ``"1.2x"`` (a factor of a baseline peak), in the grammar of
        ``streamplan.units``; ``fields`` set the other attributes. A ``MemoryBudget`` is taken as
        it is (with ``fields`` replaced)."""
        if isinstance(text, MemoryBudget):
            return dataclasses.replace(text, **fields) if fields else text
        size = parse_size_text(text)
        return MemoryBudget(limit_bytes=size.limit_bytes, factor=size.factor, **fields)

    def limit_for(self, baseline_bytes: int | None) -> int:
        """The budget in bytes, given the baseline a factor multiplies (for the budget policy, the
        figure's value for the sequential schedule; for rematerialization, today's worst case).
        Rounded down to whole bytes."""
        if self.limit_bytes is not None:
            return self.limit_bytes
        if baseline_bytes is None:
            raise BudgetError(
                f"the budget {self.factor:g}x is a factor, but there is no baseline peak to scale",
                hint="give the budget in bytes (12MiB), or a baseline",
            )
        return int(self.factor * baseline_bytes)  # type: ignore[operator]

    def describe(self) -> str:
        """What is budgeted, in words (``"the worst-case peak over all timings at most 12.000 MiB"``)."""
        figure = "the worst-case peak over all timings" if self.figure == "worst_case" else "the static arena"
        if self.factor is not None:
            return f"{figure} at most {self.factor:g}x the sequential schedule's"
        return f"{figure} at most {self.limit_bytes / (1 << 20):.3f} MiB"  # type: ignore[operator]


@dataclass(frozen=True)
class ScheduleContext:
    """What any policy may need: stream cap, cost model, budget, time limit, seed, progress.

    ``fusion`` says how fusion and scheduling combine (``FUSION_MODES``); the
    application and the runtime apply it through ``streamplan.fusion``, and a policy
    may read it (under ``first`` it is handed the fused graph).

    ``cost`` accepts a ``CostModel``, a device profile or its name (``"v100"``...).
    ``options`` are the policy's own tunables: its options dataclass (``IosOptions(r=2)``),
    or a mapping of their names that ``make_schedule`` checks and turns into it; a policy
    rejects an option it does not declare.
    """

    max_streams: int = 8
    cost: CostModel = field(default_factory=lambda: AnalyticCostModel("v100"))
    budget: MemoryBudget | None = None
    time_limit_s: float = 10.0
    seed: int = 0
    progress: ProgressFn = field(default=no_progress, compare=False)
    options: Any = field(default_factory=FrozenDict)  # the policy's options dataclass, or a mapping
    fusion: Fusion = Fusion.NONE

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
        if isinstance(self.options, Mapping) or self.options is None:
            object.__setattr__(self, "options", freeze(self.options))
        object.__setattr__(self, "fusion", Fusion.parse(self.fusion))

    def replace(self, **changes: Any) -> ScheduleContext:
        return dataclasses.replace(self, **changes)

    @property
    def cuda_graphs(self) -> bool:
        """True when the cost model replays the schedule as one CUDA graph (it decides, not the context)."""
        return self.cost.device_facts.cuda_graphs

    def options_as(self, cls: type[T]) -> T:
        """The options as the policy's class ``cls`` (a mapping is checked and converted, so a
        policy called directly, not through ``make_schedule``, reads them the same way)."""
        if isinstance(self.options, cls):
            return self.options
        if not isinstance(self.options, Mapping):
            raise ScheduleError(f"these options are {type(self.options).__name__}, not {cls.__name__}")
        return build_options(cls.__name__, cls, self.options)


DEFAULT_CONTEXT = ScheduleContext()
