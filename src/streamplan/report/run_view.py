"""``streamplan run``: execute a schedule, compare outputs with eager, predictions with measurements."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

from streamplan.report.units import fmt_bytes, fmt_ms


def device_profile_for(device: str) -> str:
    """The cost-model profile for a runtime device: ``cpu``, or the GPU's family when known."""
    if device == "cpu":
        return "cpu"
    import torch

    name = torch.cuda.get_device_name(0).lower() if torch.cuda.is_available() else ""
    for family in ("h200", "h100", "a100", "v100"):
        if family in name:
            return family
    return "h100"


def _rel(pred: float | None, meas: float | None) -> float | None:
    if pred is None or not meas:
        return None
    return (pred - meas) / meas


def run_command(
    out: Console,
    emit_json: Callable,
    model: str,
    *,
    policy: str,
    device: str,
    max_streams: int,
    batch: int | None,
    chaos: bool,
    repeat: int,
    seed: int,
    as_json: bool,
    trace: str | None = None,
    force: bool = False,
    schedule_file: str | None = None,
) -> None:
    from streamplan.cost.simulate import simulate
    from streamplan.errors import ModelSpecError
    from streamplan.memory.simulated import simulated_memory
    from streamplan.memory.worst_case import worst_case_peak
    from streamplan.models import load_model
    from streamplan.runtime import run_and_compare

    if device not in ("cpu", "cuda"):
        raise ModelSpecError(f"unknown run device {device!r}", hint="use --device cpu or --device cuda")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ModelSpecError("no CUDA device is available here", hint="use --device cpu")
        if trace:
            raise ModelSpecError(
                "--trace records per-op times on the CPU runtime only",
                hint="drop --trace, or use torch.profiler around streamplan.runtime.run on the GPU",
            )
    if trace:
        from streamplan.report.files import check_output

        check_output(trace, force=force, protected=(model,))
    graph = load_model(model, batch=batch)
    saved = None
    if schedule_file:
        from streamplan.schedule.schedule import StreamSchedule

        saved = StreamSchedule.load(schedule_file)
        policy = saved.policy
    target = model
    if ".py:" in model:  # the user's module gives the weights and the eager reference
        from streamplan.models import load_python_module

        module, inputs = load_python_module(model, batch=batch)
        target = (module, inputs if isinstance(inputs, (tuple, list)) else (inputs,))
    cmp = run_and_compare(
        target,
        policy,
        device=device,
        chaos=chaos,
        repeat=repeat,
        warmup=1 if repeat > 1 else 0,
        batch=batch,
        max_streams=max_streams,
        seed=seed,
        graph=graph,
        track_allocations=True,
        schedule=saved,
    )
    profile = device_profile_for(device)
    tl = simulate(graph, cmp.schedule, profile)
    if trace:
        from streamplan.report.files import write_output
        from streamplan.report.trace import dumps_traces

        measured = cmp.result.timeline
        name = f"{graph.name} {policy}"
        traces = [(measured, f"{name} measured on cpu"), (tl, f"{name} simulated ({profile} profile)")]
        write_output(trace, dumps_traces(traces), force=force, protected=(model,))
        if not as_json:
            out.print(f"  wrote {trace}: measured and simulated timelines (open in ui.perfetto.dev)")
    sim_peak = simulated_memory(graph, cmp.schedule, tl).peak_bytes
    worst = worst_case_peak(graph, cmp.schedule)
    cmp = cmp.with_predictions(predicted_peak_bytes=sim_peak, predicted_ms=tl.makespan_ms)
    d = cmp.to_dict()
    d["profile"] = profile
    d["predicted_worst_case_peak_bytes"] = {
        "lower": worst.lower_bytes,
        "upper": worst.upper_bytes,
        "exact": worst.exact,
    }
    d["peak_relative_error"] = _rel(sim_peak, cmp.measured_peak_bytes)
    # chaos delays are part of the measured time: a latency comparison would mean nothing
    d["latency_relative_error"] = None if chaos else _rel(tl.makespan_ms, cmp.measured_ms)
    d["latency_includes_chaos_delays"] = chaos
    d["memory_includes"] = "activations"
    if device == "cuda":
        from streamplan.memory.allocators import replay

        tc = replay(
            graph,
            cmp.schedule,
            "torch-cuda",
            timeline=tl,
            include_inputs=True,
            include_params=True,
            op_memory=_op_memory(graph, cmp),
        )
        d["predicted_max_memory_allocated_bytes"] = tc.allocated_peak_bytes
        d["predicted_max_memory_reserved_bytes"] = tc.reserved_peak_bytes
        d["allocated_relative_error"] = _rel(tc.allocated_peak_bytes, d["max_memory_allocated_bytes"])
        d["prediction_includes_op_memory"] = tc.op_memory
    tracked = cmp.result.tracked_peak_bytes
    if tracked is not None:
        d["predicted_tracked_peak_bytes"] = _tracked_prediction(graph, cmp)
        d["tracked_peak_relative_error"] = _rel(d["predicted_tracked_peak_bytes"], tracked)
    if as_json:
        emit_json(d)
        return
    ok = "[green]yes[/green]" if cmp.matches_eager else "[red]NO[/red]"
    out.print(
        f"{graph.name} / {policy} on {device}{' with chaos delays' if chaos else ''}: "
        f"{cmp.schedule.num_streams} streams, {cmp.schedule.num_events} events"
    )
    out.print(
        f"  outputs match eager: {ok} (max abs error {cmp.max_abs_error:.3g}, max rel {cmp.max_rel_error:.3g})"
    )
    rel_ms = d["latency_relative_error"]
    rel_b = d["peak_relative_error"]
    out.print(
        f"  latency   measured {fmt_ms(cmp.measured_ms)} (median of {repeat}"
        + (", chaos delays included: run without --chaos to time it" if chaos else "")
        + f"), predicted {fmt_ms(tl.makespan_ms)} on the {profile} profile"
        + (f" ({rel_ms:+.0%})" if rel_ms is not None else "")
    )
    out.print(
        f"  peak live activations measured {fmt_bytes(cmp.measured_peak_bytes)}, simulated {fmt_bytes(sim_peak)}"
        + (f" ({rel_b:+.1%})" if rel_b is not None else "")
        + f", worst case over all timings {fmt_bytes(worst.upper_bytes)}"
    )
    if device == "cuda":
        out.print(
            f"  max_memory_allocated measured {fmt_bytes(d['max_memory_allocated_bytes'])}, predicted "
            f"{fmt_bytes(d['predicted_max_memory_allocated_bytes'])}; reserved measured "
            f"{fmt_bytes(d['max_memory_reserved_bytes'])}, predicted {fmt_bytes(d['predicted_max_memory_reserved_bytes'])}"
            + (
                " (torch-cuda replay with the op scratch and stream workspaces measured first)"
                if tc.op_memory
                else ""
            )
        )
    if tracked is not None:
        rel_t = d["tracked_peak_relative_error"]
        out.print(
            f"  kernel allocations (op scratch included) measured {fmt_bytes(tracked)}, predicted "
            f"{fmt_bytes(d['predicted_tracked_peak_bytes'])} in host order with measured op scratch"
            + (f" ({rel_t:+.1%})" if rel_t is not None else "")
        )
    if device == "cpu" and cmp.schedule.num_streams > 1:
        out.print(
            "  note: on this CPU each stream is a thread; with few cores, multi-stream runs are rarely faster."
        )


def _op_memory(graph, cmp):
    """The op scratch and stream workspaces measured before the run, as the replay takes them."""
    from streamplan.cost.measured import MeasuredTable
    from streamplan.memory.allocators import OpMemory

    table = MeasuredTable(
        cmp.device, {}, cmp.meta.get("op_scratch_bytes", {}), cmp.meta.get("stream_workspace_bytes", 0)
    )
    return OpMemory.from_table(graph, table)


def _tracked_prediction(graph, cmp) -> int:
    """The ``exact`` allocator in host order plus the op scratch measured before the run."""
    from streamplan.memory.allocators import replay

    return replay(graph, cmp.schedule, "exact", op_memory=_op_memory(graph, cmp)).allocated_peak_bytes
