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

Measuring has no side effects: the walk writes copies of the leaves the graph writes in
place (the user's inputs, parameters, optimizer state), and the extra calls of an op that
writes its inputs (``add_`` on an intermediate) write copies of them, so every value the
walk goes on with is computed once, as in a run. Ops are called in the autograd mode the
CPU executor's threads run them in (``op_mode``): under ``inference_mode`` some composite
ops (``upsample_bicubic2d``) reach the kernel tracker as their Python decomposition, with
temporaries the real kernel never allocates.
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
    from streamplan.runtime.execute import one_thread, op_mode

    cuda = device.startswith("cuda")
    env = _own_leaves(graph, env)
    times: dict[str, float] = {}
    threads = contextlib.nullcontext() if cuda else one_thread()  # as the CPU executor runs ops
    with op_mode(), threads:
        for node in graph.nodes:
            sig = op_signature(graph, node)
            if sig not in times:
                call_node(node, _trial_env(node, env), device)  # warm-up
                times[sig] = _time_calls(node, env, device, repeat, cuda)
            env.update(zip(node.outputs, call_node(node, env, device), strict=True))
    return times


def _own_leaves(graph: Graph, env: dict[str, Any]) -> dict[str, Any]:
    """``env`` with copies of the leaves the graph writes in place: the walk must not change
    the caller's tensors (a run or an eager reference uses them next)."""
    from streamplan.runtime.interpret import written_leaves

    env = dict(env)
    for vid in written_leaves(graph):
        if isinstance(env.get(vid), torch.Tensor):
            env[vid] = env[vid].clone()
    return env


def _trial_env(node: Any, env: dict[str, Any]) -> dict[str, Any]:
    """What an extra call of ``node`` may read: ``env`` with copies of the values it writes in
    place, so that only the walk's own call (the one a run makes) writes the real ones."""
    if not node.mutates:
        return env
    trial = dict(env)
    for vid in node.mutates:
        if isinstance(trial.get(vid), torch.Tensor):
            trial[vid] = trial[vid].clone()
    return trial


def _time_calls(node: Any, env: dict[str, Any], device: str, repeat: int, cuda: bool) -> float:
    trials = [_trial_env(node, env) for _ in range(repeat)] if node.mutates else [env] * repeat
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for trial in trials:
            call_node(node, trial, device)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / repeat
    t0 = time.perf_counter()
    for trial in trials:
        call_node(node, trial, device)
    return (time.perf_counter() - t0) * 1e3 / repeat


def op_scratch_bytes(graph: Graph, env: dict[str, Any], *, device: str = "cpu") -> dict[str, int]:
    """Transient bytes per op signature beyond the op's outputs (``MeasuredTable.scratch_bytes``)."""
    from streamplan.cost.measured import op_signature
    from streamplan.runtime.execute import one_thread, op_mode

    cuda = device.startswith("cuda")
    env = _own_leaves(graph, env)
    scratch: dict[str, int] = {}
    threads = contextlib.nullcontext() if cuda else one_thread()
    with op_mode(), threads:
        for node in graph.nodes:
            sig = op_signature(graph, node)
            if sig not in scratch:
                call_node(node, _trial_env(node, env), device)  # warm-up: lazy library state is not scratch
                trial = _trial_env(node, env)
                scratch[sig] = _cuda_scratch(node, trial, device) if cuda else _cpu_scratch(node, trial)
                del trial
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
