"""Standalone latency of each op, measured on the device, in the cost model's measured-table form.

The graph is run once in graph order keeping every value; then each distinct op
signature (``cost.measured.op_signature``) is timed alone: ``repeat`` back-to-back
calls between two CUDA events (``time.perf_counter`` on the CPU, torch at one
thread), after one warm-up call, and the mean per call is kept.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch

from streamplan.ir.graph import Graph
from streamplan.runtime.interpret import call_node


def op_times_ms(
    graph: Graph, env: dict[str, Any], *, device: str = "cpu", repeat: int = 10
) -> dict[str, float]:
    """Measured ms per op signature (``{"<signature>": ms}``), as ``MeasuredTable.ops`` wants."""
    from streamplan.cost.measured import op_signature

    cuda = device.startswith("cuda")
    env = dict(env)
    times: dict[str, float] = {}
    from streamplan.runtime.execute import one_thread

    threads = contextlib.nullcontext() if cuda else one_thread()  # as the CPU executor runs ops
    with torch.inference_mode(), threads:
        for node in graph.nodes:
            sig = op_signature(graph, node)
            if sig not in times:
                call_node(node, env, device)  # warm-up (and the outputs below)
                times[sig] = _time_calls(node, env, device, repeat, cuda)
            env.update(zip(node.outputs, call_node(node, env, device), strict=True))
    return times


def _time_calls(node: Any, env: dict[str, Any], device: str, repeat: int, cuda: bool) -> float:
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(repeat):
            call_node(node, env, device)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / repeat
    t0 = time.perf_counter()
    for _ in range(repeat):
        call_node(node, env, device)
    return (time.perf_counter() - t0) * 1e3 / repeat
