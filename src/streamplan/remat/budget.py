"""Reading a memory budget, and the floor no plan can go below.

``parse_budget`` is the one place a budget's text is read (bytes, KiB/MiB/GiB, or a
factor of a baseline peak such as ``0.4x``). ``peak_floor`` is a lower bound on the
worst-case peak of every schedule of every plan: each op runs at least once, with its
inputs and outputs live together, on top of the resident storages; and at the end
every graph output is live at once.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from streamplan.errors import BudgetError
from streamplan.ir.graph import Graph
from streamplan.memory.liveness import PARAM_KINDS, Includes

MAX_BUDGET_BYTES = 1 << 60  # 1 EiB
UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_BUDGET = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_budget(budget: str | int | float, baseline_bytes: int | None = None) -> int:
    """Bytes of a budget: ``2147483648``, ``"512MiB"``, ``"2 GiB"``, or ``"0.4x"`` (a factor of
    ``baseline_bytes``, the peak without rematerialization). Rounded down to whole bytes."""
    if isinstance(budget, bool):
        raise BudgetError(f"a budget is a number of bytes, not {budget!r}")
    if isinstance(budget, (int, float)):
        value, unit = float(budget), ""
    else:
        m = _BUDGET.match(str(budget))
        if not m:
            raise _unreadable(budget)
        value, unit = float(m.group(1)), m.group(2).lower()
    if not math.isfinite(value) or value < 0:
        raise _unreadable(budget)
    if unit == "x":
        if baseline_bytes is None:
            raise BudgetError(f"budget {budget!r} is a factor, but there is no baseline peak to scale")
        return _at_most_any_device(budget, value * baseline_bytes)
    if unit not in UNITS:
        raise _unreadable(budget)
    return _at_most_any_device(budget, value * UNITS[unit])


def _at_most_any_device(budget: object, n_bytes: float) -> int:
    if n_bytes > MAX_BUDGET_BYTES:  # a typo (1e300x): its bytes would print as 300 digits
        raise BudgetError(
            f"budget {budget!r} is {n_bytes:.3g} bytes, more than any device has",
            hint=f"give at most {MAX_BUDGET_BYTES >> 60} EiB (a factor such as 0.5x, or 16GiB)",
        )
    return int(n_bytes)


def fmt_mib(n: int) -> str:
    """Bytes as MiB with four decimals (budgets differ in single bytes), and the exact count."""
    return f"{n / (1 << 20):.4f} MiB ({n:,} B)"


def _unreadable(budget: object) -> BudgetError:
    return BudgetError(
        f"cannot read the budget {budget!r}",
        hint="write bytes (1073741824), binary units (512MiB, 2GiB, 64KiB) or a factor of today's peak (0.4x)",
    )


@dataclass(frozen=True, slots=True)
class PeakFloor:
    """A lower bound on any plan's worst-case peak, and what sets it.

    ``op`` is the op whose inputs and outputs (``op_bytes``) set it, or None when the graph
    outputs, all live at the end (``outputs_bytes``), do; ``resident_bytes`` are the
    inputs/parameters the figure counts.
    """

    bytes: int
    op: str | None
    op_bytes: int
    outputs_bytes: int
    resident_bytes: int

    def reason(self) -> str:
        mib = 1 << 20
        extra = (
            f" on top of {self.resident_bytes / mib:.4f} MiB of inputs/parameters"
            if self.resident_bytes
            else ""
        )
        if self.op is not None:
            return f"op {self.op} needs its inputs and outputs, {self.op_bytes / mib:.4f} MiB, live at once{extra}"
        return f"the graph outputs, {self.outputs_bytes / mib:.4f} MiB, are all live at the end{extra}"

    def to_dict(self) -> dict:
        return {
            "bytes": self.bytes,
            "op": self.op,
            "op_bytes": self.op_bytes,
            "outputs_bytes": self.outputs_bytes,
            "resident_bytes": self.resident_bytes,
        }


def peak_floor(graph: Graph, includes: Includes = Includes()) -> PeakFloor:
    """The largest single op's inputs + outputs (or all outputs together), plus resident bytes."""
    storages = graph.storages()
    resident = 0
    for st in storages.values():
        if (st.kind == "input" and includes.inputs) or (st.kind in PARAM_KINDS and includes.params):
            resident += st.nbytes
    best_op, best = None, 0
    for node in graph.nodes:
        touched = {graph.storage_of(v) for v in (*node.inputs, *node.outputs, *node.mutates)}
        io = sum(storages[s].nbytes for s in touched if storages[s].kind == "activation")
        if io > best:
            best_op, best = node.id, io
    outputs = sum(
        storages[s].nbytes
        for s in {graph.storage_of(v) for v in graph.outputs}
        if storages[s].kind == "activation"
    )
    if outputs > best:
        return PeakFloor(outputs + resident, None, best, outputs, resident)
    return PeakFloor(best + resident, best_op, best, outputs, resident)
