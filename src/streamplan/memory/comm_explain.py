"""Which collective buffers make the peak at host launch, and which knob put them there.

At the worst-case held peak (``memory.launch_time``) every storage is either allocated
by the host or freed and held back by ``record_stream``. Those a collective writes or
reads are named with their role:

- ``gathered``: an all-gather's output (a unit's full parameters);
- ``gradients``: a reduce-scatter's input or an all-reduce's bucket (unsharded gradients);
- ``shard``: a reduce-scatter's output (this rank's gradient shard).

and the knobs that decide how many there are: the prefetch depth (how many units ahead
all-gathers are launched), reshard-after-forward (a forward buffer alive in the
backward), the in-flight limit (host waits bound the run-ahead, none: unbounded), and
``record_stream`` (held buffers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.ir.collectives import collective_kind, is_collective
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.memory.launch_time import HeldPeak

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class CommBuffer:
    """A collective's buffer at the peak: allocated, or freed and ``held`` by record_stream."""

    storage: str
    nbytes: int
    role: str  # gathered | gradients | shard
    collective: str
    held: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "storage": self.storage,
            "nbytes": self.nbytes,
            "role": self.role,
            "collective": self.collective,
            "held": self.held,
        }


@dataclass(frozen=True)
class CommPeakNote:
    """The collective buffers at the held peak and one sentence per knob behind them."""

    peak_bytes: int
    peak_op: str
    buffers: tuple[CommBuffer, ...]
    reasons: tuple[str, ...]

    @property
    def buffer_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "peak_bytes": self.peak_bytes,
            "peak_op": self.peak_op,
            "buffer_bytes": self.buffer_bytes,
            "buffers": [b.to_dict() for b in self.buffers],
            "reasons": list(self.reasons),
        }

    def lines(self) -> list[str]:
        out = [
            f"at the worst-case peak held at host launch ({self.peak_bytes / MIB:.3f} MiB, launching "
            f"{self.peak_op}), collective buffers hold {self.buffer_bytes / MIB:.3f} MiB:"
        ]
        for b in sorted(self.buffers, key=lambda b: -b.nbytes)[:12]:
            state = "held by record_stream" if b.held else "allocated"
            out.append(f"  {b.storage:<40} {b.nbytes / MIB:10.3f} MiB  {b.role} of {b.collective}, {state}")
        if len(self.buffers) > 12:
            out.append(f"  ... and {len(self.buffers) - 12} more")
        out += [f"  - {r}" for r in self.reasons]
        return out


def comm_peak_note(graph: Graph, schedule: StreamSchedule, peak: HeldPeak) -> CommPeakNote | None:
    """The note for ``peak`` (None when the program has no collectives)."""
    roles: dict[str, tuple[str, str]] = {}  # storage -> (role, collective)
    for n in graph.nodes:
        if not is_collective(n):
            continue
        kind = collective_kind(n)
        if kind == "all_gather":
            roles[graph.storage_of(n.outputs[0])] = ("gathered", n.id)
        else:
            roles[graph.storage_of(n.inputs[0])] = ("gradients", n.id)
            if kind == "reduce_scatter":
                roles[graph.storage_of(n.outputs[0])] = ("shard", n.id)
    if not roles:
        return None
    held = set(peak.held)
    size = {sid: st.nbytes for sid, st in graph.storages().items()}
    buffers = tuple(
        CommBuffer(sid, size[sid], roles[sid][0], roles[sid][1], sid in held)
        for sid in (*peak.allocated, *peak.held)
        if sid in roles
    )
    return CommPeakNote(peak.peak_bytes, peak.peak_op, buffers, _reasons(graph, schedule, buffers, peak))


def _reasons(
    graph: Graph, schedule: StreamSchedule, buffers: tuple[CommBuffer, ...], peak: HeldPeak
) -> tuple[str, ...]:
    knobs = {**((graph.meta.get("parallel") or {}).get("plan") or {}), **(schedule.meta.get("knobs") or {})}
    out = []
    held = [b for b in buffers if b.held]
    if held:
        mib = sum(b.nbytes for b in held) / MIB
        bound = (
            f"{len(schedule.host_waits)} host waits (in_flight={knobs.get('in_flight')}) bound how far the host runs ahead"
            if schedule.host_waits
            else "nothing makes the host wait (in_flight=none), so it may run arbitrarily far ahead of the device"
        )
        out.append(
            f"{len(held)} buffers ({mib:.3f} MiB) are freed by the host but held by record_stream until the "
            f"compute stream catches up; {bound}. record_stream=false (event waits, as FSDP2) returns them at "
            "once; a smaller in_flight bounds them"
        )
    gathered = [b for b in buffers if b.role == "gathered" and not b.held]
    if len(gathered) > 1:
        fwd = knobs.get("forward_prefetch", "?")
        bwd = knobs.get("backward_prefetch", "?")
        out.append(
            f"{len(gathered)} units' gathered parameters are allocated at once: prefetch launches all-gathers "
            f"forward_prefetch={fwd} / backward_prefetch={bwd} units ahead of their use; a smaller depth "
            "allocates fewer, and exposes more of the all-gather time"
        )
    step = graph.meta.get("training") or {}
    first_bwd = step.get("first_backward_op")
    if first_bwd and peak.peak_op and graph.has_node(peak.peak_op) and graph.has_node(first_bwd):
        in_backward = graph.position(peak.peak_op) >= graph.position(first_bwd)
        kept = [b for b in gathered if b.storage.endswith(".fwd")]
        if in_backward and kept and not knobs.get("reshard_after_forward", True):
            out.append(
                f"{len(kept)} forward all-gather outputs are still alive in the backward: reshard=false keeps "
                "them from forward to backward; reshard=true frees them and gathers again"
            )
    grads = [b for b in buffers if b.role == "gradients"]
    if grads:
        out.append(
            f"{len(grads)} unsharded gradient buffers ({sum(b.nbytes for b in grads) / MIB:.3f} MiB) wait for "
            "their reduction on the communication stream"
        )
    return tuple(out)
