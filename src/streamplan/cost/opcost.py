"""Op cost: how long an op takes alone, how much of the device it fills, what it demands.

``CostModel`` is the tiny interface the simulator and the IOS search use.
``AnalyticCostModel`` is a roofline scaled by how much of the device the op fills::

    time = kernel_fixed + max(kernel_min, max(flops / (peak * eff), bytes / (bw * eff)) / occupancy)
    occupancy = min(1, blocks / slots)     (slots = SMs x resident blocks per SM)

``kernel_min`` is the shortest time any kernel's body keeps its stream busy (its thread
blocks scheduled, at least one round trip to DRAM, the drain): unlike the launch
latency inside ``kernel_fixed``, a CUDA graph does not remove it. On the GPU profiles
a GEMM or convolution's rate comes from how its output tiles fill the SMs
(``cost.calibration.tiled_fraction``), bounded by its bytes over the bandwidth.

On a calibrated profile (``DeviceProfile.calibration``, written by ``streamplan
calibrate``) an op whose kind was measured is costed from the measured curve instead:
``time = kernel_fixed + curve(work)`` (``cost.kinds`` says which kind and which size,
``cost.curve_cost`` which curve; the curve already holds the efficiency at that size, so
nothing is divided by the occupancy); kinds the calibration did not measure fall back to
their family's pooled curve, then to the roofline.

``demand`` says what the op asks of the device while it runs (``cost.contention``):
its occupancy, the share of the achievable DRAM bandwidth it draws (bytes moved over
its body time, against the profile's best measured bandwidth), and, on a profile whose
fixed per-op time holds an interpreter lock (the CPU runtime), the share of its time
that holds it.

An op with 16 tiles on 160 slots can use only a tenth of the peak, and holds only
a tenth of the device while it runs (the rest is free for concurrent ops).
Thread blocks are estimated from the output: GEMM/conv tiles of 64x64 of the implicit GEMM (M = output pixels, N = output channels) with split-K when K is
long, 512 elements per block for everything else. View and metadata ops
(``cost.op_classes``: ``aten.view``, ``aten.t``, getitem, ...) launch no kernel and cost nothing, except on a
calibrated CPU profile, where the runtime's interpreter works for each (``view_ms``).
A fused kernel (``streamplan.ir.fused``) is one op like any other: its FLOPs are its
parts', its bytes its external inputs and outputs, and its anchor (the convolution
or matmul, the reduction) decides whether it is costed as a GEMM.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from streamplan.cost.contention import Demand, Supply
from streamplan.cost.curve_cost import CurveCost
from streamplan.cost.devices import DeviceProfile, get_device
from streamplan.cost.kinds import OpFeatures, op_features
from streamplan.cost.op_classes import CONV_OPS, GEMM_OPS, is_view_op, op_base_name
from streamplan.errors import ModelSpecError
from streamplan.ir.collectives import collective_of, is_collective
from streamplan.ir.dtypes import numel
from streamplan.ir.fused import kernel_op
from streamplan.ir.graph import Graph, Node

TILE_M = 64
TILE_N = 64
SPLIT_K_CHUNK = 256  # K elements per split-K slice
ELEMS_PER_BLOCK = 512


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """What the simulator needs to know about a device beyond the ops' own costs.

    With ``cuda_graphs`` the schedule is replayed as one captured CUDA graph: the host
    pays ``graph_launch_ms`` once (the ops' own launch costs are zero), records and
    waits cost the host nothing, and ``event_resume_ms`` is the device latency of a
    graph edge between streams. ``graph_node_ms`` (already inside the ops' times, in
    place of the stream launch's fixed time) is carried for reports.
    """

    max_queues: int | None = None  # hardware work queues; None: one per stream
    event_record_ms: float = 0.0  # host time to record an event after an op others wait for
    event_wait_ms: float = 0.0  # host time per cross-stream wait issued before an op
    event_resume_ms: float = 0.0  # device latency before a stream resumes after a cross-stream wait
    cuda_graphs: bool = False  # the schedule runs as one captured CUDA graph
    graph_launch_ms: float = 0.0  # host time of the one graph launch (with cuda_graphs)
    graph_node_ms: float = 0.0  # fixed device time of a kernel node in a graph (with cuda_graphs)
    supply: Supply = Supply()  # what concurrent ops share (cost.contention)

    @staticmethod
    def of(device: DeviceProfile, cuda_graphs: bool = False) -> DeviceFacts:
        supply = device.calibration.contention
        if cuda_graphs:
            return DeviceFacts(
                max_queues=device.max_queues,
                event_resume_ms=device.graph_edge_ms,
                cuda_graphs=True,
                graph_launch_ms=device.graph_launch_ms or 0.0,
                graph_node_ms=device.graph_node_ms,
                supply=supply,
            )
        return DeviceFacts(
            max_queues=device.max_queues,
            event_record_ms=device.event_record_ms,
            event_wait_ms=device.event_wait_ms,
            event_resume_ms=device.event_resume_ms,
            supply=supply,
        )


COMPUTE, LINK = 0, 1  # what an op's time is spent on (``CostModel.resource``)


class CostModel(ABC):
    """What the simulator needs to know about an op on a device."""

    device_name: str = ""

    @property
    def device_facts(self) -> DeviceFacts:
        """Queues and event costs (none by default: an idealised device)."""
        return DeviceFacts()

    @abstractmethod
    def op_time_ms(self, graph: Graph, node: Node) -> float:
        """Device time of the op when it runs alone (ms)."""

    @abstractmethod
    def occupancy(self, graph: Graph, node: Node) -> float:
        """Fraction of the device the op fills while it runs, in (0, 1] (0 for no kernel)."""

    @abstractmethod
    def launch_overhead_ms(self, graph: Graph, node: Node) -> float:
        """Host time to issue the op (the host moves on without waiting for the device)."""

    def is_kernel(self, graph: Graph, node: Node) -> bool:
        """False for ops that launch nothing (views); they still keep their stream order."""
        return not is_view_op(graph, node)

    def resource(self, graph: Graph, node: Node) -> int:
        """What the op's time is spent on: ``COMPUTE`` (the SMs, shared by the kernels running
        at once) or ``LINK`` (the links between devices, shared by the collectives in flight).
        The simulator reads the same fact from ``demand`` (a ``LINK`` op demands ``link``)."""
        return LINK if is_collective(node) else COMPUTE

    @property
    def speedup_error(self) -> float | None:
        """Typical relative error of a predicted speedup under this model (None: unknown)."""
        return None

    @property
    def latency_error(self) -> float | None:
        """Typical relative error of a predicted latency under this model (None: unknown)."""
        return None

    def demand(self, graph: Graph, node: Node) -> Demand:
        """What the op asks of the device while it runs (default: its occupancy of the SMs only;
        a collective asks for the links between devices and no SMs)."""
        if is_collective(node):
            return Demand(sm=0.0, link=1.0)
        return Demand(sm=max(0.0, min(1.0, float(self.occupancy(graph, node)))))

    def op_facts(self, graph: Graph, node: Node) -> tuple[float, float, float, Demand]:
        """(standalone ms, occupancy, launch ms, demand) at once: what the simulator reads per op
        (a model may compute them together)."""
        return (
            self.op_time_ms(graph, node),
            self.occupancy(graph, node),
            self.launch_overhead_ms(graph, node),
            self.demand(graph, node),
        )


class AnalyticCostModel(CostModel):
    """Roofline + fixed kernel time + wave quantisation, from a ``DeviceProfile``.

    ``cuda_graphs=True`` models the schedule replayed as one CUDA graph: every kernel
    pays the profile's per-node device overhead (``graph_node_ms``) instead of the
    stream launch's ``kernel_fixed_ms``, and launches cost the host nothing (the one
    graph launch is in ``device_facts``).
    """

    def __init__(self, device: str | DeviceProfile = "v100", *, cuda_graphs: bool = False):
        self.device = get_device(device)
        self.device_name = self.device.name
        if cuda_graphs and not self.device.has_cuda_graphs:
            raise ModelSpecError(
                f"the {self.device.name} profile has no CUDA graphs",
                hint="CUDA graphs need a GPU profile (v100, a100, h100, h200)",
            )
        self.cuda_graphs = bool(cuda_graphs)
        cal = self.device.calibration
        self._measured = CurveCost(cal)
        self._bandwidth = cal.stream_bandwidth_bytes_per_s or (
            self.device.mem_bw_bytes_per_s * self.device.memory_efficiency
        )
        self._lock = cal.fixed_holds_lock
        self._view_ms = 0.0 if self.cuda_graphs else cal.view_ms

    # a model of a profile is a value: two models of equal profiles and mode cost every op alike
    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self.device == other.device  # type: ignore[attr-defined]
            and self.cuda_graphs == other.cuda_graphs  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.device, self.cuda_graphs))

    def __repr__(self) -> str:
        return f"AnalyticCostModel({self.device_name!r}, cuda_graphs={self.cuda_graphs})"

    @property
    def device_facts(self) -> DeviceFacts:
        return DeviceFacts.of(self.device, self.cuda_graphs)

    @property
    def speedup_error(self) -> float | None:
        return self.device.calibration.speedup_error

    @property
    def latency_error(self) -> float | None:
        return self.device.calibration.latency_error

    # -- interface ----------------------------------------------------------
    def op_time_ms(self, graph: Graph, node: Node) -> float:
        if is_view_op(graph, node):
            return self._view_ms
        if is_collective(node):
            return self.collective_time(graph, node)[0]
        return self.fixed_ms + max(self.device.kernel_min_ms, self.body_ms(graph, node))

    @property
    def fixed_ms(self) -> float:
        """Fixed device time of every kernel: in a CUDA graph the node overhead replaces the
        stream launch's fixed time (which includes the launch latency the graph removes)."""
        d = self.device
        return d.graph_node_ms if self.cuda_graphs else d.kernel_fixed_ms

    def body_ms(self, graph: Graph, node: Node) -> float:
        """The op's time beyond the fixed per-kernel time: a measured curve where the profile
        has one for its kind (or family), else the roofline over the occupancy."""
        if self._measured:
            measured = self._measured_body_ms(graph, node)
            if measured is not None:
                return measured
        d = self.device
        gemm = op_base_name(kernel_op(node)) in GEMM_OPS  # a fused kernel costs as its anchor's class
        peak = d.peak(self._precision(graph, node, gemm))
        eff = d.gemm_efficiency if gemm else d.vector_efficiency
        compute_s = node.flops / (peak * eff)
        memory_s = (node.bytes_read + node.bytes_written) / (d.mem_bw_bytes_per_s * d.memory_efficiency)
        blocks, slots = self._blocks(graph, node, gemm)
        # Libraries pick tile sizes that balance big problems over the SMs, so only a
        # launch with fewer blocks than slots loses peak (an op that fills 10% gets 10%).
        utilisation = min(d.max_op_fraction, blocks / slots)
        return 1e3 * max(compute_s, memory_s) / utilisation

    def _measured_body_ms(self, graph: Graph, node: Node) -> float | None:
        f = op_features(graph, node)
        t = self.curve_time_ms(f)
        if t is not None and f.gemm_mnk is not None:
            curve = self._measured.gemm_curve(f.kind)
            prec = self._precision(graph, node, True)
            if prec != curve.precision:  # e.g. a float16 matmul on a curve measured in float32
                t *= self.device.peak(curve.precision) / self.device.peak(prec)
            if curve.sms:  # a tiled (spec-derived) curve counts compute only: the roofline's other side
                d = self.device
                t = max(t, 1e3 * f.bytes_moved / (d.mem_bw_bytes_per_s * d.memory_efficiency))
        return t

    def curve_time_ms(self, f: OpFeatures) -> float | None:
        """The body time the profile's measured curves give an op of these features (None: no curve)."""
        return self._measured.time_ms(f)

    def occupancy(self, graph: Graph, node: Node) -> float:
        if is_view_op(graph, node):
            return 0.0
        if is_collective(node):
            return 1.0  # of the links: collectives in flight share their bandwidth
        blocks, slots = self._blocks(graph, node, op_base_name(kernel_op(node)) in GEMM_OPS)
        return min(self.device.max_op_fraction, blocks / slots)

    def demand(self, graph: Graph, node: Node) -> Demand:
        """Occupancy, bandwidth drawn (bytes over body time, against the achievable bandwidth)
        and, where the fixed time holds the interpreter lock, the share of time that holds it."""
        return self.op_facts(graph, node)[3]

    def op_facts(self, graph: Graph, node: Node) -> tuple[float, float, float, Demand]:
        if is_view_op(graph, node):  # no kernel; on the CPU runtime, the interpreter's work for it
            return self._view_ms, 0.0, 0.0, Demand(sm=0.0, lock=1.0 if self._view_ms and self._lock else 0.0)
        if is_collective(node):  # on the links, not the SMs (``resource``)
            launch = 0.0 if self.cuda_graphs else self.device.launch_overhead_ms
            return self.collective_time(graph, node)[0], 1.0, launch, Demand(sm=0.0, link=1.0)
        body_ms = max(self.device.kernel_min_ms, self.body_ms(graph, node))
        fixed_ms = self.fixed_ms
        total_ms = fixed_ms + body_ms
        occ = self.occupancy(graph, node)
        moved = node.bytes_read + node.bytes_written
        dram = min(1.0, moved / (self._bandwidth * body_ms * 1e-3)) if body_ms > 0 else 0.0
        lock = fixed_ms / total_ms if self._lock and total_ms > 0 else 0.0
        launch = 0.0 if self.cuda_graphs else self.device.launch_overhead_ms
        return total_ms, occ, launch, Demand(sm=occ, dram=dram, lock=lock)

    def launch_overhead_ms(self, graph: Graph, node: Node) -> float:
        if self.cuda_graphs or is_view_op(graph, node):
            return 0.0  # in a CUDA graph the host launches the graph, not the kernel
        return self.device.launch_overhead_ms

    def collective_time(self, graph: Graph, node: Node) -> tuple[float, str]:
        """A collective's time on the profile's interconnect, and the algorithm (ring, tree)."""
        from streamplan.cost.links import collective_time_ms

        net = self.device.interconnect
        if net is None:
            raise ModelSpecError(
                f"the {self.device.name} profile has no interconnect: collective {node.id} cannot be costed",
                hint="give the profile an interconnect (streamplan.cost.links.interconnect)",
            )
        coll = collective_of(graph, node)
        assert coll is not None
        return collective_time_ms(coll, net, stride=int(node.attrs.get("group_stride", 1)))

    # -- internals ----------------------------------------------------------
    def _precision(self, graph: Graph, node: Node, gemm: bool) -> str:
        dtype = _dtype_of(graph, node)
        if dtype == "float64":
            return "fp64"
        if not gemm:
            return "fp32"  # CUDA cores; narrow dtypes are memory-bound anyway
        if dtype == "float16":
            return "fp16"
        if dtype == "bfloat16":
            return "bf16"
        if self.device.conv_tf32 and op_base_name(kernel_op(node)) in CONV_OPS:
            return "tf32"
        return "fp32"

    def _blocks(self, graph: Graph, node: Node, gemm: bool) -> tuple[int, int]:
        """(thread blocks the op launches, resident-block slots of the device)."""
        d = self.device
        out_numel = sum(numel(graph.values[o].shape) for o in node.outputs if o in graph.values)
        out_numel = max(1, out_numel)
        if not gemm:
            in_numel = sum(numel(graph.values[i].shape) for i in node.inputs if i in graph.values)
            # reductions parallelise over their input, elementwise ops over their output
            work = max(out_numel, in_numel // 8)
            return max(1, math.ceil(work / ELEMS_PER_BLOCK)), d.sms * d.vector_blocks_per_sm
        slots = d.sms * d.gemm_blocks_per_sm
        n_cols = _gemm_columns(graph, node)
        m_rows = max(1, out_numel // max(1, n_cols))
        tiles = math.ceil(m_rows / TILE_M) * math.ceil(n_cols / TILE_N)
        k = node.flops // max(1, 2 * out_numel)  # reduction length of the implicit GEMM
        split_k = max(1, min(k // SPLIT_K_CHUNK, slots // max(1, tiles)))
        return max(1, tiles * split_k), slots


class FakeCostModel(CostModel):
    """Deterministic costs for tests: fixed times per op id (or one time for all)."""

    def __init__(
        self,
        times_ms: Mapping[str, float] | float,
        occupancy: Mapping[str, float] | float = 1.0,
        launch_ms: float = 0.0,
    ):
        self.times_ms = times_ms
        self.occ = occupancy
        self.launch_ms = launch_ms
        self.device_name = "fake"

    def op_time_ms(self, graph: Graph, node: Node) -> float:
        t = self.times_ms
        return float(t[node.id]) if isinstance(t, Mapping) else float(t)

    def occupancy(self, graph: Graph, node: Node) -> float:
        o = self.occ
        return float(o[node.id]) if isinstance(o, Mapping) else float(o)

    def launch_overhead_ms(self, graph: Graph, node: Node) -> float:
        return self.launch_ms

    def is_kernel(self, graph: Graph, node: Node) -> bool:
        return True


def resolve_cost(
    cost: CostModel | str | DeviceProfile | None, default: str = "v100", *, cuda_graphs: bool = False
) -> CostModel:
    """A cost model from a model, a device name/profile, or None (the default device).

    ``cuda_graphs`` applies to a name or profile (a ``CostModel`` already says whether it
    replays a CUDA graph)."""
    if isinstance(cost, CostModel):
        return cost
    return AnalyticCostModel(cost if cost is not None else default, cuda_graphs=cuda_graphs)


def _dtype_of(graph: Graph, node: Node) -> str:
    for vid in node.outputs + node.inputs:
        v = graph.values.get(vid)
        if v is not None:
            return v.dtype
    return "float32"


def _gemm_columns(graph: Graph, node: Node) -> int:
    """N of the implicit GEMM: output channels (NCHW dim 1) for convs, last dim otherwise."""
    if not node.outputs or node.outputs[0] not in graph.values:
        return 1
    shape = graph.values[node.outputs[0]].shape
    if not shape:
        return 1
    if op_base_name(kernel_op(node)) in CONV_OPS and len(shape) >= 2:
        return shape[1]
    return shape[-1]
