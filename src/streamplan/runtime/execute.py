"""``run``: execute a scheduled graph for real and measure it (CPU threads or CUDA streams)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from streamplan.cost.timeline import Timeline
from streamplan.errors import ExecutionError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule, check_structure
from streamplan.runtime.cpu import execute_cpu
from streamplan.runtime.interpret import Restorer, check_supported, initial_env
from streamplan.runtime.measure import AllocatedBytes, LiveBytes, RunResult, median_ms


def run(
    graph: Graph,
    schedule: StreamSchedule,
    inputs: Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    params: Mapping[str, Any] | None = None,
    device: str = "cpu",
    chaos: bool = False,
    seed: int = 0,
    repeat: int = 1,
    warmup: int = 0,
    cuda_graph: bool = False,
    chaos_seed: int | None = None,
    track_allocations: bool = False,
) -> RunResult:
    """Execute ``schedule`` on ``graph`` and return the outputs and measured figures.

    ``inputs``: tensors in ``graph.inputs`` order (or a mapping by value id);
    ``params``: value id -> tensor. Leaves given by neither get seeded random tensors
    (``seed``). ``device="cpu"`` runs one thread per stream (torch at one intra-op
    thread; ``chaos`` adds random delays seeded by ``chaos_seed``, default ``seed``,
    plus the repetition number);
    ``device="cuda"`` launches onto CUDA streams (``cuda_graph`` captures and replays).
    Timing is the median over ``repeat`` runs after ``warmup`` untimed runs.
    ``track_allocations`` (CPU; ignored on CUDA, whose allocator counts for itself)
    adds one untimed run that counts every storage the kernels allocate, op scratch
    included (``RunResult.tracked_peak_bytes``).
    Leaves the graph writes in place (a training step's parameters and optimizer state)
    are restored before each run, so every repetition computes the same step; the
    outputs are the last run's (an updated parameter is the given tensor, updated).
    """
    check_structure(graph, schedule)  # unordered dependencies are left for chaos runs to expose
    check_supported(graph)
    env0 = initial_env(graph, inputs, params, seed=seed, device=device)
    restore = Restorer(graph, env0)
    if device.startswith("cuda"):
        return _run_cuda(
            graph,
            schedule,
            env0,
            device=device,
            repeat=repeat,
            warmup=warmup,
            cuda_graph=cuda_graph,
            chaos_seed=(seed if chaos_seed is None else chaos_seed) if chaos and not cuda_graph else None,
            restore=restore,
        )
    if device != "cpu":
        raise ExecutionError(f"unknown device {device!r}", hint="use 'cpu' or 'cuda'")
    times_ms: list[float] = []
    peak = 0
    outputs: tuple[Any, ...] = ()
    timelines: list[Timeline] = []
    with one_thread(), torch.inference_mode():
        for r in range(warmup + max(1, repeat)):
            tracker = LiveBytes()
            outputs = ()
            restore()
            t0 = time.perf_counter()
            outputs = execute_cpu(
                graph,
                schedule,
                dict(env0),
                chaos=chaos,
                seed=(seed if chaos_seed is None else chaos_seed) + r,
                tracker=tracker,
                timeline=timelines if r >= warmup else None,
            )
            elapsed_ms = (time.perf_counter() - t0) * 1e3
            if r >= warmup:
                times_ms.append(elapsed_ms)
                peak = max(peak, tracker.peak_bytes)
        tracked = None
        if track_allocations:
            outputs = ()
            restore()
            counter = AllocatedBytes.of_tensors(env0.values())
            chaos_base = seed if chaos_seed is None else chaos_seed
            outputs = execute_cpu(
                graph, schedule, dict(env0), chaos=chaos, seed=chaos_base + warmup, allocations=counter
            )
            tracked = counter.peak_bytes
    return RunResult(
        outputs=outputs,
        measured_ms=median_ms(times_ms),
        times_ms=tuple(times_ms),
        measured_peak_bytes=peak,
        device="cpu",
        policy=schedule.policy,
        num_streams=schedule.num_streams,
        tracked_peak_bytes=tracked,
        timelines=tuple(timelines),
        chaos=chaos,
        seed=seed,
    )


def _run_cuda(
    graph: Graph,
    schedule: StreamSchedule,
    env0: dict[str, Any],
    *,
    device: str,
    repeat: int,
    warmup: int,
    cuda_graph: bool,
    chaos_seed: int | None,
    restore: Restorer | None = None,
) -> RunResult:
    if not torch.cuda.is_available():
        raise ExecutionError(
            "device 'cuda' requested but torch.cuda.is_available() is False",
            hint='run on the CPU instead (device="cpu")',
        )
    from streamplan.runtime.cuda import measure_cuda

    with torch.inference_mode():
        m = measure_cuda(
            graph,
            schedule,
            env0,
            repeat=repeat,
            warmup=warmup,
            cuda_graph=cuda_graph,
            chaos_seed=chaos_seed,
            before_run=restore,
        )
    return RunResult(
        outputs=m.outputs,
        measured_ms=median_ms(list(m.times_ms)),
        times_ms=m.times_ms,
        measured_peak_bytes=m.peak_bytes,
        device=device,
        policy=schedule.policy,
        num_streams=schedule.num_streams,
        max_memory_allocated_bytes=m.max_memory_allocated_bytes,
        max_memory_reserved_bytes=m.max_memory_reserved_bytes,
        chaos=chaos_seed is not None,
        seed=chaos_seed or 0,
        cuda_graph=cuda_graph,
        resident_bytes=m.resident_bytes,
    )


def op_mode() -> contextlib.AbstractContextManager:
    """The autograd mode the CPU executor's threads run ops in (grad off, not inference mode:
    a thread does not inherit its caller's inference mode); what measures an op alone
    (``op_timing``) calls it in the same mode, so it sees the same kernels."""
    return torch.no_grad()


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch at one intra-op thread for the duration (each worker thread is one 'stream')."""
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)
