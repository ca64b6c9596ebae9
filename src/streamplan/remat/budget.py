"""The floor no rematerialization plan can go below.

A budget's text is read by ``MemoryBudget.parse`` (``streamplan.units``: bytes, a size with a
unit, or a factor of a baseline peak such as ``0.4x``). ``peak_floor`` is a lower bound on the
worst-case peak of every schedule of every plan: each op runs at least once, with its
inputs and outputs live together, on top of the resident storages; and at the end
every graph output is live at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.graph import Graph
from streamplan.ir.includes import Includes


def fmt_mib(n: int) -> str:
    """Bytes as MiB with four decimals (budgets differ in single bytes), and the exact count."""
    return f"{n / (1 << 20):.4f} MiB ({n:,} B)"


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
        if st.kind != "activation" and includes.counts(st.kind):
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
