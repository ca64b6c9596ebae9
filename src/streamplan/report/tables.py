"""Rich tables for the CLI."""

from __future__ import annotations

from typing import Sequence

from rich.table import Table

from streamplan.ir.graph import Graph
from streamplan.report.compare import PolicyRow
from streamplan.report.units import fmt_bytes, fmt_ms


def _worst(mem: dict) -> str:
    wc = mem.get("worst_case_peak_bytes") or {}
    if wc.get("exact"):
        return fmt_bytes(wc.get("upper"))
    return f"[{fmt_bytes(wc.get('lower'))}, {fmt_bytes(wc.get('upper'))}]"


def compare_table(graph: Graph, rows: Sequence[PolicyRow], device: str, memory: bool, includes: str) -> Table:
    """One row per policy. Memory columns say what they include in the title."""
    title = f"{graph.name} on {device}"
    if memory:
        title += f" — memory: {includes}"
    t = Table(title=title, show_edge=False)
    for col in ("policy", "streams", "events", "latency", "speedup", "search"):
        t.add_column(col, justify="right" if col != "policy" else "left")
    if memory:
        for col in ("host-order", "worst-case", "simulated", "torch alloc", "torch reserved", "arena", "arena LB"):
            t.add_column(col, justify="right")
    for r in rows:
        if r.error:
            t.add_row(r.policy, *["-"] * (len(t.columns) - 1))
            continue
        cells = [r.policy, str(r.streams), str(r.events), fmt_ms(r.makespan_ms),
                 f"{r.speedup:.2f}x" if r.speedup else "-", f"{r.search_time_s:.2f}s"]
        if memory and r.memory:
            m = r.memory
            tc = m.get("torch_cuda") or {}
            cells += [fmt_bytes(m.get("host_order_peak_bytes")), _worst(m), fmt_bytes(m.get("simulated_peak_bytes")),
                      fmt_bytes(tc.get("allocated_peak_bytes")), fmt_bytes(tc.get("reserved_peak_bytes")),
                      fmt_bytes(m.get("arena_bytes")), fmt_bytes(m.get("arena_lower_bound_bytes"))]
        elif memory:
            cells += ["-"] * 7
        t.add_row(*cells)
    return t
