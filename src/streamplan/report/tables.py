"""Rich tables for the CLI. Memory cells are MiB (2^20 B), labelled in the column headers."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table

from streamplan.app.analysis import PolicyRow
from streamplan.ir.graph import Graph
from streamplan.memory.report import MemoryReport
from streamplan.report.units import MiB, fmt_ms


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / MiB:.2f}"


def _worst(mem: MemoryReport) -> str:
    wc = mem.worst_case
    if wc.exact:
        return _mib(wc.upper_bytes)
    return f"[{_mib(wc.lower_bytes)}, {_mib(wc.upper_bytes)}]"


def _fused(rows: Sequence[PolicyRow]) -> bool:
    return any(r.fused for r in rows)


def _label(r: PolicyRow, fused: bool) -> list[str]:
    """The row's first cells: the policy, and (when any row is fused) its fusion and kernels."""
    if not fused:
        return [r.policy]
    return [r.policy, r.fusion, str(r.kernels) if not r.error else "-"]


def latency_table(graph: Graph, rows: Sequence[PolicyRow], device: str) -> Table:
    t = Table(title=f"{graph.name}: schedules simulated on {device}", show_edge=False)
    fused = _fused(rows)
    t.add_column("policy")
    if fused:
        t.add_column("fusion")
        t.add_column("kernels", justify="right")
    for col in ("streams", "events", "latency", "speedup", "bound", "x bound", "search"):
        t.add_column(col, justify="right")
    for r in rows:
        bound = fmt_ms(r.bound_ms) if r.bound_ms is not None else "-"
        if r.error:
            t.add_row(*_label(r, fused), "-", "-", "-", "-", bound, "-", "error")
            continue
        ratio = r.bound_ratio
        t.add_row(
            *_label(r, fused),
            str(r.streams),
            str(r.events),
            fmt_ms(r.makespan_ms),
            f"{r.speedup:.2f}x" if r.speedup else "-",
            bound,
            f"{ratio:.2f}" if ratio is not None else "-",
            f"{r.search_time_s:.2f} s",
        )
    if rows and rows[0].bound_ms is not None:
        t.caption = (
            "bound: no schedule of this graph is faster under this cost model; x bound = latency / bound"
        )
    return t


def memory_table(graph: Graph, rows: Sequence[PolicyRow], includes: str) -> Table:
    t = Table(title=f"{graph.name}: peak memory in MiB ({includes})", show_edge=False)
    fused = _fused(rows)
    t.add_column("policy")
    if fused:
        t.add_column("fusion", no_wrap=True, min_width=12)
    for col in ("host-order", "worst-case", "simulated", "torch alloc", "torch resv", "arena", "arena LB"):
        t.add_column(col, justify="right")
    for r in rows:
        m = r.memory
        label = _label(r, fused)[:2]
        if r.error or not m:
            t.add_row(*label, *["-"] * 7)
            continue
        tc = m.torch_cuda
        t.add_row(
            *label,
            _mib(m.host_order_peak_bytes),
            _worst(m),
            _mib(m.simulated_peak_bytes),
            _mib(tc and tc.allocated_peak_bytes),
            _mib(tc and tc.reserved_peak_bytes),
            _mib(m.arena.arena_bytes),
            _mib(m.arena.lower_bound_bytes),
        )
    return t


def compare_table(graph: Graph, rows: Sequence[PolicyRow], device: str, memory: bool, includes: str) -> Group:
    """Latency table, then (with ``memory``) the memory table, one row per policy in each."""
    parts = [latency_table(graph, rows, device)]
    if memory:
        parts.append(memory_table(graph, rows, includes))
    return Group(*parts)
