"""What each op costs alone on the device, in the cost model's measured-table form.

``op_times_ms``: the graph is run once in graph order keeping every value; each
distinct op signature (``cost.measured.op_signature``) is timed alone: ``repeat``
back-to-back calls between two CUDA events (``time.perf_counter`` on the CPU, torch
at one thread), after one warm-up call, and the mean per call is kept.

``op_scratch_bytes``: the same walk, but each new signature is called once more
after its warm-up and the memory it took beyond what it returned is kept: on CUDA
the caching allocator's peak during the call minus what is allocated when it
returns (outputs held), so cuDNN workspaces count; on the CPU the peak of tensors
created inside the call (a dispatch-mode tracker sees the kernels a composite op
runs) minus those still alive when it returns.

``stream_workspace_bytes``: what a fresh CUDA stream keeps allocated after its first
matmuls (cuBLAS/cuBLASLt workspaces held by the caching allocator).
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


def op_scratch_bytes(graph: Graph, env: dict[str, Any], *, device: str = "cpu") -> dict[str, int]:
    """Transient bytes per op signature beyond the op's outputs (``MeasuredTable.scratch_bytes``)."""
    from streamplan.cost.measured import op_signature
    from streamplan.runtime.execute import one_thread

    cuda = device.startswith("cuda")
    env = dict(env)
    scratch: dict[str, int] = {}
    threads = contextlib.nullcontext() if cuda else one_thread()
    with torch.inference_mode(), threads:
        for node in graph.nodes:
            sig = op_signature(graph, node)
            if sig not in scratch:
                call_node(node, env, device)  # warm-up: lazy library state is not scratch
                scratch[sig] = _cuda_scratch(node, env, device) if cuda else _cpu_scratch(node, env)
            env.update(zip(node.outputs, call_node(node, env, device), strict=True))
    return scratch


def _cuda_scratch(node: Any, env: dict[str, Any], device: str) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    outputs = call_node(node, env, device)
    torch.cuda.synchronize()
    scratch = torch.cuda.max_memory_allocated() - torch.cuda.memory_allocated()
    del outputs
    return max(0, int(scratch))


def _cpu_scratch(node: Any, env: dict[str, Any]) -> int:
    from streamplan.runtime.measure import AllocatedBytes

    counter = AllocatedBytes.of_tensors(env.values())
    with counter.mode():
        outputs = call_node(node, env, "cpu")
    scratch = counter.peak_bytes - counter.live_bytes
    del outputs
    return max(0, scratch)


def stream_workspace_bytes(device: str = "cuda") -> int:
    """Bytes a fresh CUDA stream keeps allocated after its first mm and addmm (0 off CUDA)."""
    if not device.startswith("cuda"):
        return 0
    a = torch.randn(64, 64, device=device)
    bias = torch.randn(64, device=device)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with torch.cuda.stream(stream):
        c = a @ a
        d = torch.nn.functional.linear(a, a, bias)  # the cuBLASLt path where torch uses it
    torch.cuda.synchronize()
    kept = (
        torch.cuda.memory_allocated() - before - c.untyped_storage().nbytes() - d.untyped_storage().nbytes()
    )
    return max(0, int(kept))
