"""Run the calibration micro-benchmarks on this machine's CPU runtime or its CUDA device.

``measure_device("cpu")`` runs every graph of ``runtime.calibrate_graphs`` through
streamplan's own CPU runtime (one worker thread per stream, torch at one thread),
exactly as ``streamplan run --on cpu`` runs a model, and reads the per-op spans the
runtime records: the calibration measures the executor the predictions are about,
its per-op interpreter work and thread wake-ups included.

``measure_device("cuda")`` launches the same graphs onto CUDA streams through the
runtime's host loop (``runtime.cuda``), with and without CUDA-graph capture, and
times single ops on the device with CUDA events behind a sleep kernel (so the host
issuing the calls is never what is measured).

Every timing is a median over repetitions; the repetitions of the one-stream and
multi-stream runs of a contention case alternate, so that a machine whose load
changes meanwhile biases neither side. A small fixed model (``probe_graph``) is timed
at the start and after every phase: how much its time varies is the machine's drift
while the constants were measured (a laptop changing clocks, other work on a shared
machine), which the profile records and ``calibrate`` warns about. The result is plain
data (``cost.benchmarks.DeviceMeasurements``) that ``cost.fit`` turns into a profile.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import date
from typing import Any

import torch

from streamplan.cost.benchmarks import DeviceMeasurements, TimedRun
from streamplan.errors import ExecutionError
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.progress import ProgressFn, no_progress
from streamplan.runtime.calibrate_graphs import (
    chain_graph,
    corun_cases,
    op_bench_graph,
    pingpong_schedule,
    probe_graph,
    view_chain_graph,
)
from streamplan.runtime.execute import run
from streamplan.runtime.interpret import call_node, initial_env, params_from_module
from streamplan.schedule.events import with_derived_waits

SLEEP_S_PER_CALL = 60e-6  # a sleep long enough for the host to queue this much per timed call
PROBE_REPS = 3  # repetitions of the steadiness probe at each phase (median)


class _Probe:
    """Times the steadiness probe (``probe_graph``) each time it is called: once per phase."""

    def __init__(self, timer: Callable[[Graph, StreamSchedule], float]):
        self.graph = probe_graph()
        self.schedule = _sequential(self.graph)
        self.timer = timer
        self.ms: list[float] = []

    def __call__(self) -> None:
        self.ms.append(float(self.timer(self.graph, self.schedule)))


def measure_device(
    target: str = "cpu",
    *,
    quick: bool = False,
    repeat: int | None = None,
    sizes: str | None = None,
    progress: ProgressFn = no_progress,
) -> DeviceMeasurements:
    """Run the micro-benchmarks on ``target`` (``cpu`` or ``cuda``) and return what was measured.

    ``quick`` runs a few sizes and repetitions (seconds, for tests); the full run takes
    under a minute on a 2-core machine. ``repeat`` overrides the repetitions. ``sizes``
    picks the problem sizes of another target (``"cpu"``: small problems; what a test
    of the CUDA path behind a fake backend, which computes on the CPU, wants).
    """
    if target not in ("cpu", "cuda"):
        raise ExecutionError(f"unknown calibration target {target!r}", hint="use 'cpu' or 'cuda'")
    if target == "cuda" and not torch.cuda.is_available():
        raise ExecutionError("no CUDA device is available here", hint="calibrate --on cpu instead")
    reps = repeat or (3 if quick else 7)
    t0 = time.perf_counter()
    progress("calibrate: capturing the op micro-benchmarks", None, None)
    size_class = sizes or target
    bench = op_bench_graph(size_class, quick=quick)
    params = params_from_module(bench.graph, bench.module) if bench.inputs else None
    inputs = list(bench.inputs) if bench.inputs else None
    chain = chain_graph(100 if quick else 400)
    if target == "cpu":
        m = _measure_cpu(bench.graph, inputs, params, chain, quick, reps, progress)
    else:
        m = _measure_cuda(bench.graph, inputs, params, chain, quick, reps, progress, size_class)
    m["op_ms"] = {op: ms for op, ms in m["op_ms"].items() if bench.is_sample(bench.graph.node(op))}
    meta = {
        "date": date.today().isoformat(),
        "host": platform.node(),
        "machine": platform.machine(),
        "cpu_count": str(os.cpu_count()),
        "torch": torch.__version__,
        "mode": "quick" if quick else "full",
        "repetitions": str(reps),
        "elapsed_s": f"{time.perf_counter() - t0:.1f}",
    }
    return DeviceMeasurements(**m, meta=meta)


# -- CPU ----------------------------------------------------------------------------------
def _measure_cpu(
    bench: Graph, inputs: Any, params: Any, chain: Graph, quick: bool, reps: int, progress: ProgressFn
) -> dict[str, Any]:
    progress("calibrate: timing ops on the CPU runtime", 0, 3)
    probe = _Probe(lambda g, s: run(g, s, repeat=PROBE_REPS, warmup=1).measured_ms)
    probe()
    seq = _sequential(bench)
    r = run(bench, seq, inputs, params=params, repeat=reps, warmup=1)
    probe()
    op_ms, spread = _span_medians(r.timelines, bench)
    ops_run = TimedRun("ops", "overhead", bench, seq, r.measured_ms, r.times_ms)
    progress("calibrate: per-op overhead and events", 1, 3)
    chain_seq = _sequential(chain)
    rc = run(chain, chain_seq, repeat=reps, warmup=1)
    tiny = statistics.median(v for v in _span_medians(rc.timelines, chain)[0].values())
    per_op = _per_op_ms(chain, reps)
    views = view_chain_graph(len(chain.nodes))
    view_ms = _per_op_ms(views, reps, make=view_chain_graph)
    runs = [ops_run, TimedRun("chain", "overhead", chain, chain_seq, rc.measured_ms, rc.times_ms)]
    ping = pingpong_schedule(chain)
    rp = run(chain, ping, repeat=reps, warmup=1)
    runs.append(TimedRun("pingpong", "events", chain, ping, rp.measured_ms, rp.times_ms, pair="chain"))
    probe()
    progress("calibrate: co-running streams", 2, 3)
    for case in corun_cases("cpu", quick=quick):
        one, many = case.schedules()
        (t1, ts1), (tk, tsk) = _alternate(
            [lambda s=one, g=case.graph: run(g, s, repeat=1, warmup=0).times_ms[0],
             lambda s=many, g=case.graph: run(g, s, repeat=1, warmup=0).times_ms[0]],
            reps,
        )  # fmt: skip
        base = f"corun {case.name} 1 stream"
        runs.append(TimedRun(base, "contention", case.graph, one, t1, ts1))
        runs.append(TimedRun(f"corun {case.name}", "contention", case.graph, many, tk, tsk, pair=base))
    probe()
    progress("calibrate: done measuring", 3, 3)
    return {
        "target": "cpu",
        "device_name": f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores), CPU runtime",
        "cores": os.cpu_count() or 1,
        "op_graph": bench,
        "op_ms": op_ms,
        "tiny_op_ms": tiny,
        "per_op_ms": per_op,
        "view_ms": view_ms,
        "runs": tuple(runs),
        "op_spread": spread,
        "probe_ms": tuple(probe.ms),
    }


def _per_op_ms(chain: Graph, reps: int, make: Callable[[int], Graph] = chain_graph) -> float:
    """The slope of run time against chain length (a run's own start-up cost, and whatever
    ``make`` adds beside the chain, cancel out)."""
    n = len(chain.nodes)
    short = make(n // 4)
    (t_long, _), (t_short, _) = _alternate(
        [lambda: run(chain, _sequential(chain), repeat=1).times_ms[0],
         lambda: run(short, _sequential(short), repeat=1).times_ms[0]],
        reps,
    )  # fmt: skip
    return max(t_long - t_short, 0.0) / (n - n // 4) or t_long / n


def _sequential(graph: Graph) -> StreamSchedule:
    ids = graph.node_ids
    return with_derived_waits(graph, ids, {op: 0 for op in ids}, "sequential")


def _span_medians(timelines: Any, graph: Graph) -> tuple[dict[str, float], float]:
    """Median span per op over the runs' measured timelines, and the median relative spread."""
    spans: dict[str, list[float]] = {}
    for tl in timelines:
        for s in tl.spans:
            spans.setdefault(s.op, []).append(s.end_ms - s.start_ms)
    medians = {op: statistics.median(v) for op, v in spans.items()}
    spreads = [(max(v) - min(v)) / medians[op] for op, v in spans.items() if medians[op] > 0 and len(v) > 1]
    return medians, statistics.median(spreads) if spreads else 0.0


def _alternate(measures: list[Any], reps: int) -> list[tuple[float, tuple[float, ...]]]:
    """Call each measurement in turn, ``reps`` rounds (after one warm-up round); medians and samples."""
    for m in measures:
        m()
    samples: list[list[float]] = [[] for _ in measures]
    for _ in range(reps):
        for i, m in enumerate(measures):
            samples[i].append(float(m()))
    return [(statistics.median(s), tuple(s)) for s in samples]


# -- CUDA ---------------------------------------------------------------------------------
def _cuda_device() -> str:
    """Where the CUDA path puts tensors (the backend's device: ``cuda``; the CPU under a fake)."""
    from streamplan.runtime.backend_api import TorchCudaBackend

    return TorchCudaBackend.device


def _cuda_times(
    graph: Graph, schedule: StreamSchedule, *, reps: int, cuda_graph: bool
) -> tuple[float, tuple]:
    """Median and samples of ``reps`` timed launches of ``schedule`` on CUDA streams (after a warm-up)."""
    from streamplan.runtime.cuda import measure_cuda

    env = initial_env(graph, None, None, device=_cuda_device())
    with torch.inference_mode():
        m = measure_cuda(graph, schedule, env, repeat=reps, warmup=1, cuda_graph=cuda_graph)
    return statistics.median(m.times_ms), tuple(m.times_ms)


def _measure_cuda(
    bench: Graph,
    inputs: Any,
    params: Any,
    chain: Graph,
    quick: bool,
    reps: int,
    progress: ProgressFn,
    sizes: str,
) -> dict[str, Any]:
    dev = _cuda_device()
    progress("calibrate: timing ops on the device", 0, 4)
    probe = _Probe(lambda g, s: _cuda_times(g, s, reps=PROBE_REPS, cuda_graph=False)[0])
    probe()
    env = initial_env(bench, inputs, params, device=dev)
    op_ms = _device_op_times(bench, env, repeat=max(3, reps))
    probe()
    chain_env = initial_env(chain, None, None, device=dev)
    kernel_ms = _device_op_times(chain, chain_env, repeat=max(10, 2 * reps), only=chain.node_ids[:1])
    tiny = next(iter(kernel_ms.values()))
    del env
    progress("calibrate: launches, graphs and events", 1, 4)
    launch_ms = _host_launch_ms(chain, chain_env, reps)
    chain_seq = _sequential(chain)
    runs = []
    for graphs in (False, True):
        sfx = " (CUDA graph)" if graphs else ""
        t, ts = _cuda_times(chain, chain_seq, reps=reps, cuda_graph=graphs)
        runs.append(TimedRun(f"chain{sfx}", "overhead", chain, chain_seq, t, ts, graphs))
        ping = pingpong_schedule(chain)
        t, ts = _cuda_times(chain, ping, reps=reps, cuda_graph=graphs)
        runs.append(TimedRun(f"pingpong{sfx}", "events", chain, ping, t, ts, graphs, f"chain{sfx}"))
    graph_run = runs[2]
    probe()
    progress("calibrate: co-running streams", 2, 4)
    for case in corun_cases(sizes, quick=quick):
        one, many = case.schedules()
        for graphs in (False, True):
            sfx = " (CUDA graph)" if graphs else ""
            (t1, ts1), (tk, tsk) = _alternate(
                [lambda s=one, g=case.graph, cg=graphs: _cuda_times(g, s, reps=1, cuda_graph=cg)[0],
                 lambda s=many, g=case.graph, cg=graphs: _cuda_times(g, s, reps=1, cuda_graph=cg)[0]],
                reps,
            )  # fmt: skip
            base = f"corun {case.name} 1 stream{sfx}"
            runs.append(TimedRun(base, "contention", case.graph, one, t1, ts1, graphs))
            runs.append(
                TimedRun(f"corun {case.name}{sfx}", "contention", case.graph, many, tk, tsk, graphs, base)
            )
    probe()
    progress("calibrate: done measuring", 4, 4)
    n = len(chain.nodes)
    return {
        "target": "cuda",
        "device_name": str(torch.cuda.get_device_name(0)),
        "cores": _sm_count(),
        "op_graph": bench,
        "op_ms": op_ms,
        "tiny_op_ms": tiny,
        "per_op_ms": runs[0].measured_ms / n,
        "runs": tuple(runs),
        "launch_ms": launch_ms,
        "kernel_ms": tiny,
        "graph_node_ms": graph_run.measured_ms / n,
        "graph_launch_ms": _graph_launch_ms(reps),
        "event_host_ms": _event_host_ms(),
        "probe_ms": tuple(probe.ms),
    }


def _sm_count() -> int:
    try:
        return int(torch.cuda.get_device_properties(0).multi_processor_count)
    except (AttributeError, RuntimeError, AssertionError):
        return 1


def _device_op_times(graph: Graph, env: dict[str, Any], *, repeat: int, only: Any = None) -> dict[str, float]:
    """Device ms per call of each kernel, ``repeat`` calls back to back queued behind a sleep."""
    from streamplan.cost.op_classes import is_view_op

    env = dict(env)
    out: dict[str, float] = {}
    wanted = set(only) if only is not None else None
    with torch.inference_mode():
        for node in graph.nodes:
            outputs = call_node(node, env, _cuda_device())  # warm-up (and the values later ops read)
            if (wanted is None or node.id in wanted) and not is_view_op(graph, node):
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(int(repeat * SLEEP_S_PER_CALL * 1.5e9))
                start.record()
                for _ in range(repeat):
                    call_node(node, env, _cuda_device())
                end.record()
                torch.cuda.synchronize()
                out[node.id] = start.elapsed_time(end) / repeat
            env.update(zip(node.outputs, outputs, strict=True))
    return out


def _host_launch_ms(chain: Graph, env: dict[str, Any], reps: int) -> float:
    """Host ms to issue one op through the runtime's CUDA host loop (the device never waits)."""
    from streamplan.runtime.backend_api import TorchCudaBackend
    from streamplan.runtime.cuda import StreamExecutor

    executor = StreamExecutor(chain, _sequential(chain), TorchCudaBackend())
    samples = []
    with torch.inference_mode():
        for _ in range(reps + 1):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            executor.launch(dict(env))
            samples.append((time.perf_counter() - t0) * 1e3 / len(chain.nodes))
    torch.cuda.synchronize()
    return statistics.median(samples[1:])


def _graph_launch_ms(reps: int) -> float:
    """Host ms of one ``CUDAGraph.replay`` (a small captured graph: the launch is size-independent)."""
    x = torch.zeros(16, device=_cuda_device())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = x.relu()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(8):
            y = y.relu()
    samples = []
    for _ in range(reps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        g.replay()
        samples.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(samples[1:])


def _event_host_ms(n: int = 200) -> float:
    """Host ms of one event record on a stream plus one wait on it from another stream."""
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        ev = torch.cuda.Event()
        ev.record(a)
        b.wait_event(ev)
    elapsed = (time.perf_counter() - t0) * 1e3 / n
    torch.cuda.synchronize()
    return elapsed
