"""``run``: execute a scheduled graph for real and measure it (CPU threads or CUDA streams)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

from streamplan.cost.timeline import Timeline
from streamplan.errors import ExecutionError, ScheduleError
from streamplan.ir.graph import Graph
from streamplan.runtime.cpu import execute_cpu
from streamplan.runtime.interpret import check_supported, initial_env
from streamplan.runtime.measure import AllocatedBytes, LiveBytes, RunResult, median_ms
from streamplan.schedule.schedule import StreamSchedule


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
    """
    check_schedule_covers(graph, schedule)
    check_supported(graph)
    env0 = initial_env(graph, inputs, params, seed=seed, device=device)
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
            counter = AllocatedBytes.of_tensors(env0.values())
            chaos_base = seed if chaos_seed is None else chaos_seed
            outputs = execute_cpu(
                graph, schedule, dict(env0), chaos=chaos, seed=chaos_base + warmup, allocations=counter
            )
            tracked = counter.peak_bytes
    return RunResult(
        outputs,
        median_ms(times_ms),
        tuple(times_ms),
        peak,
        "cpu",
        schedule.policy,
        schedule.num_streams,
        meta={"chaos": chaos, "seed": seed},
        tracked_peak_bytes=tracked,
        timelines=tuple(timelines),
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
) -> RunResult:
    if not torch.cuda.is_available():
        raise ExecutionError(
            "device 'cuda' requested but torch.cuda.is_available() is False", hint="use --device cpu"
        )
    from streamplan.runtime.cuda import measure_cuda

    with torch.inference_mode():
        m = measure_cuda(
            graph, schedule, env0, repeat=repeat, warmup=warmup, cuda_graph=cuda_graph, chaos_seed=chaos_seed
        )
    return RunResult(
        m["outputs"],
        median_ms(m["times_ms"]),
        tuple(m["times_ms"]),
        m["peak_bytes"],
        device,
        schedule.policy,
        schedule.num_streams,
        m["max_memory_allocated_bytes"],
        m["max_memory_reserved_bytes"],
        meta={
            "cuda_graph": cuda_graph,
            "chaos": chaos_seed is not None,
            "resident_bytes": m["resident_bytes"],
        },
    )


def check_schedule_covers(graph: Graph, schedule: StreamSchedule) -> None:
    """Every node launched exactly once, with a stream; every wait on an op launched earlier.

    Structure only: whether the waits order every dependency is deliberately *not*
    checked here (that is the verifier's job; a missing wait must show up when run).
    """
    order = schedule.launch_order
    if sorted(order) != sorted(graph.node_ids):
        missing = sorted(set(graph.node_ids) - set(order))
        extra = sorted(set(order) - set(graph.node_ids))
        raise ScheduleError(
            f"schedule does not launch every node exactly once (missing {missing[:5]}, unknown {extra[:5]})",
            where=graph.name,
            hint="was it made for this graph?",
        )
    missing_stream = [op for op in order if op not in schedule.streams]
    if missing_stream:
        raise ScheduleError(f"ops without a stream: {missing_stream[:5]}", where=graph.name)
    index = {op: i for i, op in enumerate(order)}
    for w in schedule.waits:
        if w.after not in index or w.before not in index:
            raise ScheduleError(
                f"wait {w.after} -> {w.before} names an op the schedule does not launch", where=graph.name
            )
        if index[w.after] >= index[w.before]:
            raise ScheduleError(
                f"%{w.before} waits for %{w.after}, which is launched later: deadlock",
                where=graph.name,
                hint="an event can only be waited for after it is recorded",
            )


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch at one intra-op thread for the duration (each worker thread is one 'stream')."""
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)
