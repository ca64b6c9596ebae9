"""Memory under a multi-stream schedule: every peak that answers a question (``docs/memory.md``).

Host-order trace (what a program-order estimator reports), worst-case device peak
over every timing, simulated peak along a timeline, static arena and its lower
bound, explanations; the allocator models live in ``streamplan.memory.allocators``.
All figures are bytes and say which storages they include (activations by default).
"""

from streamplan.ir.includes import Includes
from streamplan.memory.arena import ArenaPlan, plan_arena
from streamplan.memory.conflicts import arena_overlaps, conflict_pairs, conflicts, may_coexist
from streamplan.memory.explain import (
    LiveStorage,
    NewOverlap,
    PeakComparison,
    PeakExplanation,
    compare_peaks,
    explain_peak,
    policy_warnings,
)
from streamplan.memory.host_order import (
    Event,
    HostOrderTrace,
    TraceEntry,
    host_order_events,
    host_order_peak_bytes,
    host_order_trace,
)
from streamplan.memory.liveness import HappensBefore, Liveness, StorageLife, liveness
from streamplan.memory.report import MemoryReport, analyze_memory
from streamplan.memory.simulated import SimulatedMemory, simulated_memory, simulated_peak_bytes
from streamplan.memory.worst_case import WorstCasePeak, live_bytes_at, worst_case_peak

__all__ = [
    "ArenaPlan",
    "Event",
    "conflict_pairs",
    "HappensBefore",
    "HostOrderTrace",
    "Includes",
    "LiveStorage",
    "Liveness",
    "MemoryReport",
    "NewOverlap",
    "PeakComparison",
    "PeakExplanation",
    "SimulatedMemory",
    "StorageLife",
    "TraceEntry",
    "WorstCasePeak",
    "analyze_memory",
    "arena_overlaps",
    "compare_peaks",
    "conflicts",
    "explain_peak",
    "host_order_events",
    "host_order_peak_bytes",
    "host_order_trace",
    "live_bytes_at",
    "liveness",
    "may_coexist",
    "plan_arena",
    "policy_warnings",
    "simulated_memory",
    "simulated_peak_bytes",
    "worst_case_peak",
]
