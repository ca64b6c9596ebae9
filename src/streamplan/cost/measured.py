"""A table of measured op latencies that overrides the analytic cost model.

File format (what the runtime's GPU measurement script writes)::

    {"schema": "streamplan.measured", "version": 1, "device": "h200",
     "ops": {"<op_signature>": ms, ...},
     "scratch_bytes": {"<op_signature>": bytes, ...},     # optional
     "stream_workspace_bytes": bytes}                       # optional

``op_signature`` names an op by what decides its latency: the op name, its input
shapes and dtypes, and the scalar/list call arguments (strides, padding, groups...).
Two nodes with the same signature cost the same. ``scratch_bytes`` and
``stream_workspace_bytes`` are the device memory ops take beyond the graph's tensors
(see ``memory.allocators.op_memory``); the ``torch-cuda`` replay adds them.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamplan.cost.contention import Demand
from streamplan.cost.devices import DeviceProfile
from streamplan.cost.opcost import AnalyticCostModel, CostModel, DeviceFacts, resolve_cost
from streamplan.cost.timeline import Timeline
from streamplan.errors import FileFormatError
from streamplan.ir.frozen import FrozenDict, freeze
from streamplan.ir.fused import fused_parts, is_fused
from streamplan.ir.graph import Graph, Node

SCHEMA = "streamplan.measured"
MAX_OP_MS = 1e9  # a measured op time beyond this (11 days) is not a measurement


def op_signature(graph: Graph, node: Node) -> str:
    """``op(shape:dtype, ...)[key args]``, e.g. ``aten.relu.default(1x64x56x56:float32)``."""
    ins = []
    for vid in node.inputs:
        v = graph.values.get(vid)
        ins.append(f"{'x'.join(map(str, v.shape)) or 'scalar'}:{v.dtype}" if v is not None else "?")
    sig = f"{node.op}({','.join(ins)})"
    args = _key_args(node.attrs.get("args", ()))
    if is_fused(node):  # a fused kernel is told apart by its parts' arguments (strides, padding...)
        args = ";".join(a for a in (_key_args(p.attrs.get("args", ())) for p in fused_parts(node)) if a)
    if args:
        sig += f"[{args}]"
    return sig


def _key_args(args: Any) -> str:
    """The non-tensor call arguments in a compact stable form (tensors are already in the shapes)."""
    out = []
    for a in args if isinstance(args, (list, tuple)) else ():
        if isinstance(a, dict) and "$v" in a:
            continue
        if isinstance(a, list) and a and all(isinstance(x, dict) and "$v" in x for x in a):
            continue
        out.append(json.dumps(a, separators=(",", ":"), sort_keys=True))
    return ";".join(out)


@dataclass(frozen=True)
class MeasuredTable:
    """Measured latencies (ms) by op signature, for one device, and the ops' own device memory.

    ``scratch_bytes``: transient bytes an op allocates beyond its outputs, by
    signature. ``stream_workspace_bytes``: what a stream keeps after its first BLAS
    call (cuBLAS workspaces held by the caching allocator; 0 when none).
    """

    device: str
    ops: Mapping[str, float] = field(default_factory=FrozenDict)
    scratch_bytes: Mapping[str, int] = field(default_factory=FrozenDict)
    stream_workspace_bytes: int = 0

    def __post_init__(self) -> None:
        # read-only, so that a table is a value (a cost model over it can be compared and hashed)
        object.__setattr__(self, "ops", freeze(self.ops))
        object.__setattr__(self, "scratch_bytes", freeze(self.scratch_bytes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": 1,
            "device": self.device,
            "ops": dict(self.ops),
            "scratch_bytes": dict(self.scratch_bytes),
            "stream_workspace_bytes": self.stream_workspace_bytes,
        }

    @staticmethod
    def from_dict(data: Any, *, source: str = "<dict>") -> MeasuredTable:
        try:
            if not isinstance(data, dict) or data.get("schema") != SCHEMA:
                raise ValueError(f'schema is not "{SCHEMA}"')
            ops = {str(k): float(v) for k, v in data["ops"].items()}
            bad = next((k for k, v in ops.items() if not (math.isfinite(v) and 0 <= v <= MAX_OP_MS)), None)
            if bad is not None:
                raise ValueError(
                    f"op time of {bad!r:.80} is {ops[bad]}: times are ms from 0 to {MAX_OP_MS:g}"
                )
            scratch = {str(k): int(v) for k, v in data.get("scratch_bytes", {}).items()}
            if any(v < 0 for v in scratch.values()) or int(data.get("stream_workspace_bytes", 0)) < 0:
                raise ValueError("byte counts must not be negative")
            return MeasuredTable(
                str(data.get("device", "")), ops, scratch, int(data.get("stream_workspace_bytes", 0))
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise FileFormatError(
                f"malformed measured-latency table ({e})",
                where=source,
                hint=f'expected {{"schema": "{SCHEMA}", "device": ..., "ops": {{signature: ms}}}}',
            ) from None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True))

    @staticmethod
    def load(path: str | Path) -> MeasuredTable:
        from streamplan.files import read_json

        return MeasuredTable.from_dict(read_json(path), source=str(path))


def measured_op_times(graph: Graph, timelines: Timeline | Iterable[Timeline]) -> dict[str, float]:
    """Median measured duration per op signature over runs' timelines (``MeasuredTable.ops``).

    A CPU run's timelines (``RunResult.timelines``) time each op where it ran, with the
    caches and the executor's own per-op work as they were: on the CPU, a better table
    than ops timed alone in a loop. The median over every occurrence in every run
    keeps a noisy machine's outliers out.
    """
    durations: dict[str, list[float]] = {}
    for timeline in [timelines] if isinstance(timelines, Timeline) else timelines:
        for span in timeline.spans:
            sig = op_signature(graph, graph.node(span.op))
            durations.setdefault(sig, []).append(span.end_ms - span.start_ms)
    return {sig: statistics.median(ds) for sig, ds in durations.items()}


class MeasuredCostModel(CostModel):
    """Measured times where the table has the op's signature, ``fallback`` otherwise.

    Occupancy and launch overhead always come from the fallback (a table of
    standalone latencies says nothing about how much of the device an op fills), and
    so does CUDA-graph mode: over ``AnalyticCostModel(device, cuda_graphs=True)`` a
    measured kernel (timed on a stream) pays the graph's per-node overhead instead of
    the stream launch's fixed time.
    """

    def __init__(
        self,
        table: MeasuredTable | Mapping[str, float] | str | Path,
        fallback: CostModel | str | DeviceProfile | None = None,
        *,
        cuda_graphs: bool = False,
    ):
        if isinstance(table, (str, Path)):
            table = MeasuredTable.load(table)
        elif not isinstance(table, MeasuredTable):
            table = MeasuredTable("", {str(k): float(v) for k, v in table.items()})
        self.table = table
        self.fallback = resolve_cost(fallback, default=table.device or "v100", cuda_graphs=cuda_graphs)
        self.device_name = table.device or self.fallback.device_name

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self.table == other.table  # type: ignore[attr-defined]
            and self.fallback == other.fallback  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.table, self.fallback))

    def coverage(self, graph: Graph) -> tuple[int, int]:
        """How many of ``graph``'s ops the table times, and how many come from the fallback."""
        hits = sum(1 for n in graph.nodes if op_signature(graph, n) in self.table.ops)
        return hits, len(graph.nodes) - hits

    @property
    def device_facts(self) -> DeviceFacts:
        return self.fallback.device_facts

    def op_time_ms(self, graph: Graph, node: Node) -> float:
        t = self.table.ops.get(op_signature(graph, node))
        if t is None:
            return self.fallback.op_time_ms(graph, node)
        fb = self.fallback
        if t > 0 and isinstance(fb, AnalyticCostModel) and fb.cuda_graphs and fb.is_kernel(graph, node):
            # the table timed the kernel launched on a stream: swap that launch's fixed time for the node's
            d = fb.device
            return max(t - d.kernel_fixed_ms, 0.0) + d.graph_node_ms
        return t

    def occupancy(self, graph: Graph, node: Node) -> float:
        return self.fallback.occupancy(graph, node)

    def demand(self, graph: Graph, node: Node) -> Demand:
        return self.fallback.demand(graph, node)

    @property
    def speedup_error(self) -> float | None:
        # measured op times remove the op-time error, not the contention model's
        return self.fallback.speedup_error

    def launch_overhead_ms(self, graph: Graph, node: Node) -> float:
        return self.fallback.launch_overhead_ms(graph, node)

    def is_kernel(self, graph: Graph, node: Node) -> bool:
        return self.fallback.is_kernel(graph, node)
