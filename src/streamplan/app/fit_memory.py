"""The device memory one schedule of a step takes, split by role down to the allocator's slack.

What a GPU must hold for a schedule is PyTorch's caching allocator's reserved peak
(``max_memory_reserved``): the ``torch-cuda`` replay of the schedule (``memory.allocators``)
with every storage counted (inputs, parameters, buffers and optimizer state are resident)
and cuBLAS's workspace held by each stream that runs a matmul. ``DevicePeak`` splits
that figure at the host-order peak, the moment most tensor bytes are live:

- the tensors live then, by category (``memory.breakdown``: parameters, gradients,
  optimizer state, saved activations, temporaries, inputs, buffers);
- ``workspace``: the cuBLAS workspaces;
- ``allocator slack``: what the allocator holds beyond them — rounding to 512 B and to
  segment sizes, the unused tails of split blocks, cached free blocks it has not
  returned (the reserved peak never goes down).

The parts add up to the reserved peak exactly (docs/fit.md; each figure is defined in
docs/memory.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.cost.timeline import Timeline
from streamplan.ir.graph import Graph
from streamplan.ir.includes import EVERYTHING
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.training import training_step
from streamplan.memory.allocators import OpMemory, replay
from streamplan.memory.allocators.op_memory import BLAS_OPS
from streamplan.memory.allocators.report import AllocatorOOM
from streamplan.memory.breakdown import CATEGORIES, Composition, category
from streamplan.memory.host_order import trace_from_liveness
from streamplan.memory.liveness import liveness
from streamplan.memory.worst_case import live_bytes_at

GIB = 1 << 30
MIB = 1 << 20
ROLES: tuple[str, ...] = (*CATEGORIES, "workspace", "allocator_slack")


@dataclass(frozen=True)
class LiveTensor:
    """One storage live at the peak: its id, breakdown category, bytes, and the op that made it."""

    storage: str
    category: str
    nbytes: int
    producer: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "storage": self.storage,
            "category": self.category,
            "bytes": self.nbytes,
            "producer": self.producer,
        }


@dataclass(frozen=True)
class DevicePeak:
    """A schedule's device memory: the reserved peak and what it is made of (module docstring)."""

    composition: Composition
    workspace_bytes: int
    allocated_peak_bytes: int
    reserved_peak_bytes: int
    peak_op: str | None
    phase: str
    largest: tuple[LiveTensor, ...]

    @property
    def tensor_peak_bytes(self) -> int:
        """Tensor bytes live at the host-order peak (residents included), before the allocator."""
        return self.composition.total_bytes

    @property
    def slack_bytes(self) -> int:
        return max(0, self.reserved_peak_bytes - self.tensor_peak_bytes - self.workspace_bytes)

    def by_role(self) -> tuple[tuple[str, int], ...]:
        """``(role, bytes)`` for every role of ``ROLES``; the bytes sum to the reserved peak (or
        to more, if the allocator's peak came before the tensors' peak)."""
        return (
            *self.composition.bytes_by_category,
            ("workspace", self.workspace_bytes),
            ("allocator_slack", self.slack_bytes),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "reserved_peak_bytes": self.reserved_peak_bytes,
            "allocated_peak_bytes": self.allocated_peak_bytes,
            "tensor_peak_bytes": self.tensor_peak_bytes,
            "by_role_bytes": dict(self.by_role()),
            "peak_op": self.peak_op,
            "phase": self.phase,
            "largest_live": [t.to_dict() for t in self.largest],
        }


def op_memory_for(graph: Graph, workspace_bytes: int) -> OpMemory:
    """cuBLAS's per-stream workspace for every stream that runs one of ``graph``'s matmuls."""
    from streamplan.cost.op_classes import op_base_name
    from streamplan.ir.fused import kernel_op

    blas = frozenset(n.id for n in graph.nodes if op_base_name(kernel_op(n)) in BLAS_OPS)
    return OpMemory({}, workspace_bytes, blas)


def device_peak(
    graph: Graph,
    schedule: StreamSchedule,
    timeline: Timeline | None,
    *,
    op_memory: OpMemory,
    largest: int = 5,
) -> DevicePeak:
    """``schedule``'s reserved peak under the ``torch-cuda`` replay (no capacity limit) and its
    split by role at the host-order peak."""
    live = liveness(graph, schedule, includes=EVERYTHING)
    trace = trace_from_liveness(live, schedule)
    names: tuple[str, ...] = ()
    op = None
    if trace.peak_launch_index >= 0:
        op = schedule.launch_order[trace.peak_launch_index]
        finished = set(schedule.launch_order[: trace.peak_launch_index])
        _, names = live_bytes_at(live, finished, finished | {op})
    report = replay(
        graph,
        schedule,
        "torch-cuda",
        timeline=timeline,
        includes=EVERYTHING,
        live=live,
        op_memory=op_memory,
    )
    streams = {schedule.streams[n] for n in op_memory.workspace_ops if n in schedule.streams}
    storages = graph.storages()
    top = sorted(  # what the step made (activations, gradients), not what it was given
        (s for s in names if graph.producer(s) is not None and graph.roles.get(s) != "optimizer_state"),
        key=lambda s: -storages[s].nbytes,
    )[:largest]
    step = training_step(graph)
    return DevicePeak(
        composition=Composition.of(graph, names),
        workspace_bytes=op_memory.stream_workspace_bytes * len(streams),
        allocated_peak_bytes=report.allocated_peak_bytes,
        reserved_peak_bytes=report.reserved_peak_bytes,
        peak_op=op,
        phase=step.phase(graph, op) if step is not None and op is not None else "step",
        largest=tuple(LiveTensor(s, category(graph, s), storages[s].nbytes, graph.producer(s)) for s in top),
    )


def out_of_memory(
    graph: Graph,
    schedule: StreamSchedule,
    timeline: Timeline | None,
    *,
    op_memory: OpMemory,
    capacity_bytes: int,
) -> AllocatorOOM | None:
    """Where PyTorch runs out of ``capacity_bytes`` running ``schedule`` (after emptying its
    cache and retrying, as the caching allocator does), or None when it never does."""
    report = replay(
        graph,
        schedule,
        "torch-cuda",
        timeline=timeline,
        includes=EVERYTHING,
        op_memory=op_memory,
        device_memory_bytes=capacity_bytes,
    )
    return report.oom


def resident_bytes(graph: Graph) -> dict[str, int]:
    """Bytes held for the whole step whatever the order or plan: parameters, optimizer state
    (its fp32 master copies apart), buffers and the batch (``inputs``)."""
    step = training_step(graph)
    master = set()
    if step is not None:
        master = {graph.storage_of(s) for s, (_, slot) in step.optimizer_state.items() if slot == "master"}
    out = {"parameters": 0, "master_weights": 0, "optimizer_state": 0, "buffers": 0, "inputs": 0}
    for sid, st in graph.storages().items():
        cat = category(graph, sid)
        if sid in master:
            out["master_weights"] += st.nbytes
        elif cat in out and (cat != "inputs" or graph.producer(sid) is None):
            out[cat] += st.nbytes
    return out


def gradient_bytes(graph: Graph) -> int:
    """Bytes of every gradient of a training step (0 for inference)."""
    return sum(st.nbytes for sid, st in graph.storages().items() if graph.roles.get(sid) == "gradient")


def size_text(nbytes: int | float) -> str:
    """Bytes in the largest binary unit that keeps them above 1 (``79.15 GiB``, ``12.00 MiB``)."""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{int(nbytes)} B"


def unit_of(nbytes: int) -> tuple[str, int]:
    """One unit for a table whose largest entry is ``nbytes``: GiB from 1 GiB, else MiB."""
    return ("GiB", GIB) if nbytes >= GIB else ("MiB", MIB)
