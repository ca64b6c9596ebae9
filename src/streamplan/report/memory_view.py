"""``streamplan memory`` and ``streamplan explain``: every memory figure and why."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from streamplan.ir.graph import Graph
from streamplan.report.pipeline import measured_cost, measured_note, scheduled_and_simulated


def memory_command(
    out: Console,
    emit_json: Callable,
    graph: Graph,
    *,
    policy: str,
    device: str,
    max_streams: int,
    include_inputs: bool,
    include_params: bool,
    device_memory_bytes: int | None,
    as_json: bool,
    measured: str | None = None,
) -> None:
    """Print the memory report of one schedule and its host-order trace (one line per launch).

    ``measured`` (a measured table) times the simulation and adds the ops' own memory
    to the ``torch-cuda`` replay.
    """
    from streamplan.memory.allocators import MODELS, OpMemory, replay
    from streamplan.memory.report import analyze_memory

    cost = measured_cost(measured, device)
    op_memory = OpMemory.from_table(graph, cost.table) if cost is not None else None
    s, tl = scheduled_and_simulated(
        graph, policy, max_streams=max_streams, device=device, progress=not as_json, cost=cost
    )
    report = analyze_memory(
        graph,
        s,
        timeline=tl,
        include_inputs=include_inputs,
        include_params=include_params,
        device_memory_bytes=device_memory_bytes,
        op_memory=op_memory,
    )
    allocators = {
        m: replay(
            graph,
            s,
            m,
            timeline=tl,
            include_inputs=include_inputs,
            include_params=include_params,
            device_memory_bytes=device_memory_bytes if m == "torch-cuda" else None,
            op_memory=op_memory if m == "torch-cuda" else None,
        )
        for m in MODELS
    }
    if as_json:
        d = report.to_dict()
        d["device"] = device
        d["makespan_ms"] = tl.makespan_ms
        if cost is not None:
            d["measured"] = {"hits": cost.hits, "misses": cost.misses, "op_memory": bool(op_memory)}
        d["host_order_trace"] = report.host_order.to_dict()
        d["allocators"] = {m: r.to_dict(trace=False) for m, r in allocators.items()}
        emit_json(d)
        return
    for line in report.lines():
        out.print(line, markup=False)
    if cost is not None:
        extra = (
            " and op scratch/workspaces in torch-cuda"
            if op_memory is not None and not op_memory.empty
            else ""
        )
        out.print(f"  {measured_note(cost)}{extra}", markup=False)
    out.print("  allocator replays of the host order (allocated / reserved peak):", markup=False)
    for m, r in allocators.items():
        oom = (
            f"  OUT OF MEMORY at {r.oom.op} ({r.oom.requested_bytes / (1 << 20):.2f} MiB requested)"
            if r.oom
            else ""
        )
        out.print(
            f"    {m:11} {r.allocated_peak_bytes / (1 << 20):10.3f} MiB / "
            f"{r.reserved_peak_bytes / (1 << 20):.3f} MiB{oom}",
            markup=False,
        )
    out.print("")
    for line in report.host_order.lines():
        out.print(line, markup=False)


def explain_command(
    out: Console,
    emit_json: Callable,
    graph: Graph,
    *,
    policy: str,
    vs: str | None,
    device: str,
    max_streams: int,
    as_json: bool,
) -> None:
    """Name the storages at each peak; with ``vs``, the concurrency that made more of them coexist."""
    from streamplan.memory.explain import compare_peaks, explain_peak
    from streamplan.memory.report import analyze_memory
    from streamplan.report.pipeline import scheduled

    s, tl = scheduled_and_simulated(
        graph, policy, max_streams=max_streams, device=device, progress=not as_json
    )
    if vs and vs != policy:
        base = scheduled(graph, vs, max_streams=max_streams, device=device, progress=not as_json)
        result = compare_peaks(graph, base, s)
    else:
        result = explain_peak(graph, s, report=analyze_memory(graph, s, timeline=tl))
    sim_note = _simulated_note(graph, s, tl, device)
    serial_note = _serial_peak_note(graph, s)
    if as_json:
        d = result.to_dict()
        d["simulated"] = sim_note
        d["serial_peak_note"] = serial_note
        emit_json(d)
        return
    for line in result.lines():
        out.print(line, markup=False)
    if hasattr(result, "other"):  # a comparison: also explain the chosen schedule's own peaks
        out.print("")
        for line in result.other.lines():
            out.print(line, markup=False)
    if serial_note:
        out.print(serial_note, markup=False)
    out.print(sim_note["text"], markup=False)


def serial_peak_note(graph, schedule) -> str | None:
    """Say so when the worst-case peak happens where nothing can run concurrently: then no
    stream policy can change it (the first explanation in the seed discussion)."""
    return _serial_peak_note(graph, schedule)


def _serial_peak_note(graph, schedule) -> str | None:
    from streamplan.memory.liveness import liveness
    from streamplan.memory.worst_case import worst_case_peak

    live = liveness(graph, schedule)
    wc = worst_case_peak(graph, schedule, live=live)
    if not wc.running or schedule.num_streams < 2:
        return None
    others = schedule.launch_order
    if any(live.hb.concurrent(u, v) for u in wc.running for v in others if v != u):
        return None
    return (
        f"note: the peak occurs while {', '.join(wc.running)} runs, and no op may run concurrently with "
        f"{'it' if len(wc.running) == 1 else 'them'}: the parallel parts of {graph.name} are not where memory "
        "peaks, so no stream policy changes this peak (only a better order, a smaller batch or "
        "rematerialization can)."
    )


def _simulated_note(graph, schedule, timeline, device: str) -> dict:
    """Where the simulated peak falls, which ops overlap there, and whether launches or kernels
    dominate the predicted timeline (which decides how close it gets to the worst case)."""
    from streamplan.memory.host_order import host_order_peak_bytes
    from streamplan.memory.simulated import simulated_memory
    from streamplan.memory.worst_case import worst_case_peak

    mem = simulated_memory(graph, schedule, timeline)
    worst = worst_case_peak(graph, schedule)
    host = host_order_peak_bytes(graph, schedule)
    busy = sum(timeline.stream_busy_ms.values())
    launch_ms = max((sp.launch_ms for sp in timeline.spans), default=0.0)
    kernels_ms = max(timeline.stream_busy_ms.values(), default=0.0)
    bound = "launch-bound" if launch_ms >= kernels_ms else "kernel-bound"
    running = ", ".join(mem.running_at_peak) or "nothing"
    if schedule.num_streams < 2:
        where = "one stream: nothing overlaps, so every figure agrees"
    elif mem.peak_bytes >= worst.upper_bytes:
        where = f"this timing reaches the worst case: {running} overlap at the peak"
    elif mem.peak_bytes <= host:
        where = (
            "in this timing the branches do not overlap where memory peaks, so it stays at the "
            "host-order figure; slower kernels or faster launches would raise it"
        )
    else:
        where = f"between the host-order and worst-case figures ({running} overlap at the peak)"
    why = (
        "the host issues launches no faster than the kernels run, so streams often sit idle and "
        "branches overlap only briefly"
        if bound == "launch-bound"
        else "kernels take longer than launching them, so queued branches run side by side"
    )
    text = (
        f"simulated on {device}: peak {mem.peak_bytes / (1 << 20):.3f} MiB at {mem.peak_ms:.4f} ms; {where}. "
        f"The timeline is {bound} (last launch at {launch_ms:.4f} ms, busiest stream {kernels_ms:.4f} ms, "
        f"total kernel time {busy:.4f} ms): {why}."
    )
    return {"simulated_peak_bytes": mem.peak_bytes, "peak_ms": mem.peak_ms, "bound": bound, "text": text}
