"""``compare``: one row per policy — streams, events, simulated latency, speedup, memory figures."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamplan.ir.graph import Graph


@dataclass(frozen=True)
class PolicyRow:
    """What one policy does to a graph. ``memory`` is ``MemoryReport.to_dict()`` (or None)."""

    policy: str
    streams: int
    events: int
    waits: int
    makespan_ms: float
    speedup: float | None
    search_time_s: float
    memory: dict[str, Any] | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "policy": self.policy,
            "streams": self.streams,
            "events": self.events,
            "waits": self.waits,
            "makespan_ms": self.makespan_ms,
            "speedup": self.speedup,
            "search_time_s": self.search_time_s,
            "memory": self.memory,
        }
        if self.error:
            d["error"] = self.error
        return d


def compare_policies(
    graph: Graph,
    policies: Sequence[str],
    *,
    device: str = "v100",
    max_streams: int = 8,
    memory: bool = True,
    include_inputs: bool = False,
    include_params: bool = False,
    progress: bool = False,
) -> list[PolicyRow]:
    """Schedule, verify, simulate (and analyse memory) for each policy, sequential first.

    A policy that fails (for instance a search that cannot handle the graph) gives a row
    with ``error`` set instead of aborting the whole comparison.
    """
    from streamplan.cost.simulate import simulate
    from streamplan.errors import StreamplanError
    from streamplan.schedule.registry import make_schedule
    from streamplan.schedule.verify import verify_schedule

    rows: list[PolicyRow] = []
    baseline_ms: float | None = None
    ordered = list(dict.fromkeys(["sequential", *policies])) if "sequential" in policies else list(policies)
    for policy in ordered:
        t0 = time.perf_counter()
        try:
            options = {"progress": progress, "device": device} if policy == "ios" else {}
            sched = make_schedule(graph, policy, max_streams=max_streams, **options)
            search_s = float(sched.meta.get("search_time_s", time.perf_counter() - t0))
            verify_schedule(graph, sched)
            timeline = simulate(graph, sched, device)
        except StreamplanError as e:
            rows.append(
                PolicyRow(
                    policy,
                    0,
                    0,
                    0,
                    float("nan"),
                    None,
                    time.perf_counter() - t0,
                    error=str(e).splitlines()[0],
                )
            )
            continue
        mem = None
        if memory:
            from streamplan.memory.report import analyze_memory

            mem = analyze_memory(
                graph, sched, timeline=timeline, include_inputs=include_inputs, include_params=include_params
            ).to_dict()
        if policy == "sequential":
            baseline_ms = timeline.makespan_ms
        speedup = (baseline_ms / timeline.makespan_ms) if baseline_ms and timeline.makespan_ms > 0 else None
        rows.append(
            PolicyRow(
                policy,
                sched.num_streams,
                sched.num_events,
                sched.num_waits,
                timeline.makespan_ms,
                speedup,
                search_s,
                mem,
            )
        )
    return rows
