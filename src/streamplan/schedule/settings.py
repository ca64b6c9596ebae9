"""``Settings``: every choice an analysis depends on, as one frozen, hashable value.

The command line, the Python API (``streamplan.analyze``), sweeps and the report all
build a ``Settings`` and nothing else; the ``ScheduleContext`` a policy receives and
the cost model the simulator uses are derived from it (``context``, ``cost_model``).
Two analyses with equal settings on the same graph give the same results, which is
what lets a ``Session`` cache them.

Values are checked and normalised when a ``Settings`` is made, so loose input works::

    Settings(device="h100", fusion="first", budget="1.2x", max_streams=4)

``budget`` takes the grammar of ``streamplan.units`` (``12MiB``, ``1.5GiB``, ``800MB``,
bytes, ``1.2x``); ``includes`` says which storages every memory figure *and* the budget
count; ``policy_options`` are each policy's own tunables, by policy name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamplan.cost.opcost import CostModel
from streamplan.cost.profile import DeviceProfile
from streamplan.errors import ModelSpecError, ScheduleError
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.includes import Includes
from streamplan.ir.schedule import Fusion
from streamplan.progress import ProgressFn, no_progress
from streamplan.schedule.context import MemoryBudget, ScheduleContext


@dataclass(frozen=True)
class Settings:
    """What an analysis is run under (every field has a default).

    - ``device``: a device profile's name (``v100``, ``a100``, ``h100``, ``h200``, ``cpu``)
      or the path of a profile JSON (`streamplan calibrate`), or a ``DeviceProfile``; ``measured``: a measured op table (a path) whose times
      replace the profile's where it has them; ``cuda_graphs``: the schedule replayed as
      one CUDA graph.
    - ``max_streams``: the cap on streams any policy may use.
    - ``fusion``: how fusion and scheduling combine (``Fusion``).
    - ``includes``: which storages the memory figures and the budget count.
    - ``budget``: a memory budget for budget-aware policies (None: no budget).
    - ``time_limit_s``: how long each exact search may take; ``seed``: for randomised searches.
    - ``policy_options``: per policy name, that policy's options (its options dataclass,
      ``{"ios": IosOptions(r=2)}``, or a mapping of their names, ``{"ios": {"r": 2}}``; kept
      as the dataclass, and left out where they are the policy's defaults).
    - ``device_memory_bytes``: the memory of the device a figure is checked against (None:
      not checked).
    """

    device: str | DeviceProfile = "v100"
    measured: str | None = None
    cuda_graphs: bool = False
    max_streams: int = 8
    fusion: Fusion = Fusion.NONE
    includes: Includes = Includes()
    budget: MemoryBudget | None = None
    time_limit_s: float = 10.0
    seed: int = 0
    policy_options: Mapping[str, Any] = field(default_factory=FrozenDict)
    device_memory_bytes: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.device, DeviceProfile) and (
            not isinstance(self.device, str) or not self.device
        ):
            raise ScheduleError(
                f"device must be a profile name, a profile file or a DeviceProfile, got {self.device!r}"
            )
        if self.measured is not None and not isinstance(self.measured, str):
            set_(self, "measured", str(self.measured))
        set_(self, "cuda_graphs", bool(self.cuda_graphs))
        if (
            isinstance(self.max_streams, bool)
            or not isinstance(self.max_streams, int)
            or self.max_streams < 1
        ):
            raise ScheduleError(f"max_streams must be an int >= 1, got {self.max_streams!r}")
        set_(self, "fusion", Fusion.parse(self.fusion))
        if not isinstance(self.includes, Includes):
            raise ScheduleError(
                f"includes must be an Includes, got {type(self.includes).__name__}",
                hint="streamplan.Includes(inputs=True, params=True)",
            )
        if self.budget is not None and not isinstance(self.budget, MemoryBudget):
            set_(self, "budget", MemoryBudget.parse(self.budget))
        if isinstance(self.time_limit_s, bool) or not isinstance(self.time_limit_s, (int, float)):
            raise ScheduleError(f"time_limit_s must be a number of seconds, got {self.time_limit_s!r}")
        if not self.time_limit_s > 0:
            raise ScheduleError(f"time_limit_s must be > 0, got {self.time_limit_s!r}")
        set_(self, "time_limit_s", float(self.time_limit_s))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ScheduleError(f"seed must be an int, got {self.seed!r}")
        set_(self, "policy_options", _checked_options(self.policy_options))
        m = self.device_memory_bytes
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m <= 0):
            raise ScheduleError(f"device_memory_bytes must be a positive int, got {m!r}")

    def check_policies(self, policies: Sequence[str]) -> tuple[str, ...]:
        """``policies`` checked before any work: every name known (``ScheduleError`` listing the
        policies), and a memory budget only with a policy that reads one (``ModelSpecError``:
        the budget would silently do nothing). Repeats dropped, order kept."""
        from streamplan.schedule.registry import POLICIES, policy_info

        names = tuple(dict.fromkeys(policies))
        infos = [policy_info(p) for p in names]
        if self.budget is not None and names and not any(i.budgeted for i in infos):
            aware = [p for p in POLICIES if policy_info(p).budgeted]
            raise ModelSpecError(
                "--budget only applies to a policy that reads a memory budget: " + ", ".join(aware),
                hint=f"add --policy {aware[0]} (in Python: a budget-aware policy), or drop the budget",
            )
        return names

    @property
    def device_name(self) -> str:
        """The device profile's name (a profile file's or a ``DeviceProfile``'s own name as given)."""
        return self.device.name if isinstance(self.device, DeviceProfile) else self.device

    def replace(self, **changes: Any) -> Settings:
        """These settings with ``changes`` (checked as a new ``Settings`` is)."""
        return dataclasses.replace(self, **changes)

    def cost_model(self) -> CostModel:
        """A fresh cost model: the profile's analytic model, or the measured table over it."""
        from streamplan.cost.measured import MeasuredCostModel
        from streamplan.cost.opcost import AnalyticCostModel

        analytic = AnalyticCostModel(self.device, cuda_graphs=self.cuda_graphs)
        if self.measured:
            return MeasuredCostModel(self.measured, fallback=analytic)
        return analytic

    def context(
        self,
        policy: str | None = None,
        *,
        cost: CostModel | None = None,
        progress: ProgressFn = no_progress,
    ) -> ScheduleContext:
        """The ``ScheduleContext`` these settings give ``policy`` (its own options included),
        on ``cost`` (default: a fresh ``cost_model()``)."""
        budget = self.budget
        if budget is not None:
            budget = dataclasses.replace(budget, includes=self.includes)
        return ScheduleContext(
            max_streams=self.max_streams,
            cost=cost if cost is not None else self.cost_model(),
            budget=budget,
            time_limit_s=self.time_limit_s,
            seed=self.seed,
            progress=progress,
            options=self.policy_options.get(policy, FrozenDict()) if policy else FrozenDict(),
            fusion=self.fusion,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (the budget as its text form)."""
        return {
            "device": self.device_name,
            "measured": self.measured,
            "cuda_graphs": self.cuda_graphs,
            "max_streams": self.max_streams,
            "fusion": self.fusion.value,
            "includes": self.includes.to_dict(),
            "budget": None if self.budget is None else self.budget.describe(),
            "time_limit_s": self.time_limit_s,
            "seed": self.seed,
            "policy_options": {k: dataclasses.asdict(v) for k, v in self.policy_options.items()},
            "device_memory_bytes": self.device_memory_bytes,
        }


def _checked_options(options: Mapping[str, Any] | None) -> FrozenDict:
    """Per-policy options as each policy's options dataclass, checked against the registry;
    a policy's defaults are left out (so equal settings are equal however they were written)."""
    from streamplan.schedule.registry import policy_info, policy_options

    out: dict[str, Any] = {}
    for name, opts in (options or {}).items():
        typed = policy_options(name, opts)
        if typed != policy_info(name).options_type()():
            out[name] = typed
    return FrozenDict(out)
