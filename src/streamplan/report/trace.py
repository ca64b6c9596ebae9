"""Chrome / Perfetto trace export of a simulated ``Timeline`` (open in ui.perfetto.dev)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from streamplan.cost.timeline import Timeline


def timeline_to_trace(
    timeline: Timeline,
    *,
    name: str = "streamplan",
    live_bytes: Sequence[tuple[float, int]] | None = None,
    pid: int = 0,
) -> dict:
    """Trace events: one track per stream (ops as complete events), a host track with the
    launches, and optionally a counter track of live bytes over time; all under process
    ``pid`` (``dumps_traces`` puts several timelines side by side)."""
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}},
        {"name": "thread_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "host launches"}},
    ]
    for s in sorted(timeline.stream_busy_ms):
        events.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": s + 1, "args": {"name": f"stream {s}"}}
        )
    for span in timeline.spans:
        events.append(
            {
                "name": span.op,
                "ph": "X",
                "pid": pid,
                "tid": span.stream + 1,
                "ts": span.start_ms * 1000.0,
                "dur": max(0.0, (span.end_ms - span.start_ms) * 1000.0),
                "args": {"stream": span.stream, "launch_ms": span.launch_ms},
            }
        )
        events.append(
            {
                "name": f"launch {span.op}",
                "ph": "i",
                "s": "t",
                "pid": pid,
                "tid": 0,
                "ts": span.launch_ms * 1000.0,
            }
        )
    if live_bytes:
        for t_ms, b in live_bytes:
            events.append(
                {
                    "name": "live activation bytes",
                    "ph": "C",
                    "pid": pid,
                    "ts": t_ms * 1000.0,
                    "args": {"bytes": b},
                }
            )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"makespan_ms": timeline.makespan_ms, "device": timeline.device},
    }


def dumps_trace(timeline: Timeline, **kwargs) -> str:
    return json.dumps(timeline_to_trace(timeline, **kwargs))


def dumps_traces(timelines: Sequence[tuple[Timeline, str]]) -> str:
    """Several timelines in one trace, one process each (e.g. measured above simulated)."""
    events: list[dict] = []
    for pid, (timeline, name) in enumerate(timelines):
        events.extend(timeline_to_trace(timeline, name=name, pid=pid)["traceEvents"])
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"})
