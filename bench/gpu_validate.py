"""GPU validation: measured vs predicted latency and memory, every model x batch x policy.

For each model and batch: capture once, run eager once (the reference), time every
op alone (the cost model's measured table), then for every policy, with and
without CUDA graphs: run the schedule on CUDA streams, check the outputs against
eager, and put the measured latency (CUDA events, median) and
``max_memory_allocated``/``max_memory_reserved`` next to the simulator's makespan
(the analytic profile of the GPU found, then again with the measured op table) and the ``torch-cuda``
allocator replay (inputs and params included, on the simulated timeline), twice: from
the graph's tensors alone, and with the ops' own memory measured here added (scratch
per op, e.g. cuDNN workspaces, and what a stream keeps after its first matmul; see
``streamplan.memory.allocators.op_memory``).

    python bench/gpu_validate.py --out gpu_validate.json --measured-out measured_h200.json
    python bench/gpu_validate.py --dry-run          # a tiny subset on the CPU
    python bench/gpu_validate.py --profile mygpu.json   # predictions from a calibrated profile

``--profile`` takes a profile file written by ``streamplan calibrate --on cuda`` (or any
profile name) for every prediction instead of the built-in profile of the GPU found.

Budget rows: for each model and batch, the ``budget`` policy's schedule at ``--budget-factors``
times the sequential peak (inputs and params counted, as ``max_memory_allocated`` counts them),
run for real with and without CUDA graphs; the measured ``max_memory_allocated`` is set beside
the budget (``fits_budget``), and beside the budget plus what the tensor figures leave out and
the ``torch-cuda`` replay predicts for that schedule (allocator rounding, op scratch, stream
workspaces: ``fits_budget_with_overheads``).

The run keeps to ``--budget-s`` (default 480 s): each model gets an equal share of
what is left; rows that do not fit are reported as skipped. The table prints last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamplan.ir.includes import EVERYTHING
from streamplan.schedule.context import ScheduleContext

MODELS = ("inception_v3", "randwire", "nasnet_a", "squeezenet", "resnet50", "bert_base")
BATCHES = (1, 32)
MIB = 2**20


@dataclass
class Measured:
    """What the run measures besides the rows: the measured table's contents."""

    ops: dict[str, float] = field(default_factory=dict)
    in_situ_ops: dict[str, float] = field(default_factory=dict)  # CPU: from the sequential runs
    scratch: dict[str, int] = field(default_factory=dict)
    stream_workspace_bytes: int = 0

    def table(self, device: str):
        from streamplan.cost.measured import MeasuredTable

        return MeasuredTable(device, dict(self.ops), dict(self.scratch), self.stream_workspace_bytes)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--batches", nargs="*", type=int, default=list(BATCHES))
    ap.add_argument("--policies", nargs="*", default=None, help="default: every registered policy")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per row (median)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--op-repeat", type=int, default=10, help="calls per op for the measured table")
    ap.add_argument("--max-streams", type=int, default=8)
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--no-cuda-graphs", action="store_true")
    ap.add_argument(
        "--budget-factors", nargs="*", type=float, default=[1.0, 1.5], help="budgets, x the sequential peak"
    )
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--profile", default=None, help="cost-model profile for the predictions (a calibrate file or a name)"
    )
    ap.add_argument("--out", default="gpu_validate.json", help="full results (JSON)")
    ap.add_argument("--measured-out", default=None, help="measured op table (streamplan.measured JSON)")
    ap.add_argument("--dry-run", action="store_true", help="tiny subset on the CPU, to check the script")
    a = ap.parse_args(argv)
    if a.dry_run:
        a.device, a.models, a.batches = "cpu", ["squeezenet"], [1]
        a.policies = a.policies or ["sequential", "nimble"]
        a.budget_factors = [1.0]
        a.repeat, a.warmup, a.op_repeat, a.no_cuda_graphs = 2, 0, 2, True
    return a


def main(argv: list[str] | None = None) -> int:
    import torch

    from streamplan.schedule.registry import POLICIES

    a = _args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: use --dry-run for the CPU check", file=sys.stderr)
        return 2
    policies = a.policies or list(POLICIES)
    graph_modes = (False,) if a.no_cuda_graphs or not a.device.startswith("cuda") else (False, True)
    t_start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    from streamplan.runtime.op_timing import stream_workspace_bytes

    measured = Measured(stream_workspace_bytes=stream_workspace_bytes(a.device))
    kept: list[tuple[dict[str, Any], Any, Any]] = []  # row, graph, schedule (for the re-simulation)
    budget_rows: list[dict[str, Any]] = []
    jobs = [(m, b) for m in a.models for b in a.batches]
    for k, (model, batch) in enumerate(jobs):
        left_s = a.budget_s - (time.perf_counter() - t_start)
        share_s = left_s / (len(jobs) - k)
        if share_s < 5:
            rows.append({"model": model, "batch": batch, "skipped": "time budget"})
            continue
        _validate_model(
            a,
            model,
            batch,
            policies,
            graph_modes,
            time.perf_counter() + share_s,
            rows,
            measured,
            kept,
            budget_rows,
        )
    sim_device = _profile(a)
    _resimulate(kept, measured.ops, sim_device)
    if measured.in_situ_ops:
        _resimulate(kept, measured.in_situ_ops, sim_device, key="simulated_in_situ_table_ms")
    result = {
        "device": _device_name(a.device),
        "args": vars(a),
        "rows": rows,
        "budget_rows": budget_rows,
        "elapsed_s": time.perf_counter() - t_start,
        "stream_workspace_bytes": measured.stream_workspace_bytes,
        "summary": {**_summary(rows), **_budget_summary(budget_rows)},
    }
    Path(a.out).write_text(json.dumps(result, indent=1, default=str))
    if a.measured_out:
        measured.table(_profile_name(sim_device)).save(a.measured_out)
    _print_table(rows, result)
    _print_budget_table(budget_rows)
    return 0


def _validate_model(
    a, model, batch, policies, graph_modes, deadline, rows, measured, kept, budget_rows
) -> None:
    import torch

    from streamplan.cost.simulate import simulate
    from streamplan.frontends.torch_capture import capture
    from streamplan.memory.allocators import OpMemory, replay
    from streamplan.runtime import compare_outputs, run
    from streamplan.runtime.compare import _flat_tensors
    from streamplan.runtime.interpret import initial_env, params_from_module
    from streamplan.runtime.op_timing import op_scratch_bytes, op_times_ms
    from streamplan.schedule import make_schedule
    from streamplan.zoo.registry import ZOO

    sim_device = _profile(a)
    try:
        module, inputs = ZOO[model].load_factory()(batch)
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        graph = capture(module.eval(), inputs, name=model)
        module = module.to(a.device)
        inputs = tuple(x.to(a.device) for x in inputs)
        with torch.no_grad():
            reference = _flat_tensors(module(*inputs))
        params = params_from_module(graph, module)
        env = initial_env(graph, list(inputs), params, device=a.device)
        measured.ops.update(op_times_ms(graph, env, device=a.device, repeat=a.op_repeat))
        measured.scratch.update(op_scratch_bytes(graph, env, device=a.device))
        op_memory = OpMemory.from_table(graph, measured.table(_profile_name(sim_device)))
        del env
    except Exception as e:  # a model that cannot run here is reported, the others go on
        rows.append({"model": model, "batch": batch, "error": f"{type(e).__name__}: {e}"[:300]})
        return
    for policy in policies:
        planned = None  # (schedule, timeline, prediction), made once per policy
        for cuda_graph in graph_modes:
            row: dict[str, Any] = {"model": model, "batch": batch, "policy": policy, "cuda_graph": cuda_graph}
            rows.append(row)
            if time.perf_counter() > deadline:
                row["skipped"] = "time budget"
                continue
            try:
                if planned is None:
                    schedule = make_schedule(graph, policy, ScheduleContext(max_streams=a.max_streams))
                    timeline = simulate(graph, schedule, sim_device)
                    predicted, with_ops = (
                        replay(
                            graph,
                            schedule,
                            "torch-cuda",
                            timeline=timeline,
                            includes=EVERYTHING,
                            op_memory=extra,
                        )
                        for extra in (None, op_memory)
                    )
                    planned = (schedule, timeline, predicted, with_ops)
                schedule, timeline, predicted, with_ops = planned
                result = run(
                    graph,
                    schedule,
                    list(inputs),
                    params=params,
                    device=a.device,
                    repeat=a.repeat,
                    warmup=a.warmup,
                    cuda_graph=cuda_graph,
                )
                ok, max_abs, _ = compare_outputs(result.outputs, reference)
                resident = result.resident_bytes
                row.update(
                    num_streams=schedule.num_streams,
                    num_events=schedule.num_events,
                    search_time_s=schedule.meta.get("search_time_s"),
                    matches_eager=ok,
                    max_abs_error=max_abs,
                    measured_ms=result.measured_ms,
                    # a captured CUDA graph is predicted with the profile's CUDA-graph mode
                    simulated_ms=_graph_makespan(graph, schedule, sim_device)
                    if cuda_graph
                    else timeline.makespan_ms,
                    measured_allocated_bytes=result.max_memory_allocated_bytes,
                    measured_reserved_bytes=result.max_memory_reserved_bytes,
                    predicted_allocated_bytes=predicted.allocated_peak_bytes,
                    predicted_reserved_bytes=predicted.reserved_peak_bytes,
                    predicted_allocated_op_memory_bytes=with_ops.allocated_peak_bytes,
                    predicted_reserved_op_memory_bytes=with_ops.reserved_peak_bytes,
                    measured_resident_bytes=resident,
                    predicted_resident_bytes=predicted.resident_bytes,
                    # allocated before the timed runs beyond inputs+params: cuBLAS workspaces per stream...
                    unmodelled_resident_bytes=None
                    if resident is None
                    else resident - predicted.resident_bytes,
                    measured_peak_live_bytes=result.measured_peak_bytes,
                )
                kept.append((row, graph, schedule))
                if policy == "sequential" and result.timelines:  # the CPU runtime times ops in place
                    from streamplan.cost.measured import measured_op_times

                    measured.in_situ_ops.update(measured_op_times(graph, result.timelines))
                del result
            except Exception as e:
                row["error"] = f"{type(e).__name__}: {e}"[:300]
    _speedups([r for r in rows if r.get("model") == model and r.get("batch") == batch])
    for factor in a.budget_factors:
        _validate_budget(
            a, model, batch, factor, graph, inputs, params, reference, graph_modes, deadline, budget_rows
        )
    if a.device.startswith("cuda"):
        torch.cuda.empty_cache()


def _validate_budget(
    a, model, batch, factor, graph, inputs, params, reference, graph_modes, deadline, out
) -> None:
    """The budget policy's schedule run for real: measured max_memory_allocated against the budget."""
    import importlib.util

    from streamplan.app.context import make_context
    from streamplan.cost.simulate import simulate
    from streamplan.memory.allocators import replay
    from streamplan.memory.worst_case import worst_case_peak
    from streamplan.runtime import compare_outputs, run
    from streamplan.schedule import MemoryBudget, make_schedule

    sim_device = _profile(a)
    for cuda_graph in graph_modes:
        row: dict[str, Any] = {"model": model, "batch": batch, "factor": factor, "cuda_graph": cuda_graph}
        out.append(row)
        if time.perf_counter() > deadline:
            row["skipped"] = "time budget"
            continue
        if importlib.util.find_spec("ortools") is None:  # the worst-case analysis needs CP-SAT
            row["skipped"] = "ortools missing (carry it as a wheel: bench/gpu_session.sh)"
            continue
        try:
            budget = MemoryBudget(factor=factor, includes=EVERYTHING)
            ctx = make_context(
                device=sim_device,
                cuda_graphs=cuda_graph and _has_graphs(sim_device),
                max_streams=a.max_streams,
            ).replace(budget=budget)
            schedule = make_schedule(graph, "budget", ctx)
            limit = int(schedule.meta["budget_bytes"])
            worst = worst_case_peak(graph, schedule, includes=EVERYTHING)
            timeline = simulate(graph, schedule, ctx.cost)
            exact = replay(graph, schedule, "exact", timeline=timeline, includes=EVERYTHING)
            predicted = replay(graph, schedule, "torch-cuda", timeline=timeline, includes=EVERYTHING)
            result = run(
                graph,
                schedule,
                list(inputs),
                params=params,
                device=a.device,
                repeat=a.repeat,
                warmup=a.warmup,
                cuda_graph=cuda_graph,
            )
            ok, _, _ = compare_outputs(result.outputs, reference)
            allocated = result.max_memory_allocated_bytes
            overhead = max(0, predicted.allocated_peak_bytes - exact.allocated_peak_bytes)
            row.update(
                budget_bytes=limit,
                streams=schedule.num_streams,
                source=schedule.meta.get("source"),
                worst_case_upper_bytes=worst.upper_bytes,
                simulated_ms=timeline.makespan_ms,
                measured_ms=result.measured_ms,
                matches_eager=ok,
                measured_allocated_bytes=allocated,
                predicted_allocated_bytes=predicted.allocated_peak_bytes,
                predicted_overhead_bytes=overhead,
                fits_budget=None if allocated is None else allocated <= limit,
                fits_budget_with_overheads=None if allocated is None else allocated <= limit + overhead,
            )
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:300]


def _budget_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in rows if "measured_ms" in r]
    measured = [r for r in done if r.get("measured_allocated_bytes") is not None]
    return {
        "budget_rows_run": len(done),
        "budget_rows_worst_case_within": sum(r["worst_case_upper_bytes"] <= r["budget_bytes"] for r in done),
        "budget_rows_measured": len(measured),
        "budget_rows_fit": sum(bool(r["fits_budget"]) for r in measured),
        "budget_rows_fit_with_overheads": sum(bool(r["fits_budget_with_overheads"]) for r in measured),
        "budget_rows_match_eager": all(r["matches_eager"] for r in done),
    }


def _print_budget_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    print("budget schedules (inputs + params counted), measured max_memory_allocated against the budget:")
    head = (
        "model",
        "bs",
        "x",
        "cg",
        "str",
        "budget MiB",
        "worst MiB",
        "alloc MiB",
        "+ovh MiB",
        "fits",
        "ms",
        "eager",
    )
    lines = [head]
    for r in rows:
        base = (r["model"], str(r["batch"]), f"{r['factor']:g}", "y" if r["cuda_graph"] else "n")
        if "measured_ms" not in r:
            lines.append(base + ((r.get("skipped") or "error: " + r.get("error", "?"))[:60],) + ("",) * 7)
            continue
        alloc = r["measured_allocated_bytes"]
        fits = "-" if r["fits_budget"] is None else ("yes" if r["fits_budget"] else "over")
        if r["fits_budget"] is False and r["fits_budget_with_overheads"]:
            fits = "with ovh"
        lines.append(
            base
            + (
                str(r["streams"]),
                f"{r['budget_bytes'] / MIB:.1f}",
                f"{r['worst_case_upper_bytes'] / MIB:.1f}",
                "-" if alloc is None else f"{alloc / MIB:.1f}",
                f"{r['predicted_overhead_bytes'] / MIB:.1f}",
                fits,
                f"{r['measured_ms']:.3f}",
                "ok" if r["matches_eager"] else "DIFF",
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _graph_makespan(graph, schedule, sim_device: str) -> float:
    from streamplan.cost import AnalyticCostModel, simulate

    return simulate(graph, schedule, AnalyticCostModel(sim_device, cuda_graphs=True)).makespan_ms


def _speedups(rows: list[dict[str, Any]]) -> None:
    base = {
        r["cuda_graph"]: r["measured_ms"]
        for r in rows
        if r.get("policy") == "sequential" and "measured_ms" in r
    }
    for r in rows:
        if "measured_ms" in r and r.get("cuda_graph") in base and r["measured_ms"] > 0:
            r["speedup"] = base[r["cuda_graph"]] / r["measured_ms"]


def _resimulate(
    kept, table_ops: dict[str, float], sim_device: str, key: str = "simulated_measured_table_ms"
) -> None:
    from streamplan.cost.measured import MeasuredCostModel, MeasuredTable
    from streamplan.cost.simulate import simulate

    table = MeasuredTable(_profile_name(sim_device), table_ops)
    models: dict[bool, MeasuredCostModel] = {}  # with and without CUDA graphs, made when needed
    for row, graph, schedule in kept:
        graphs = bool(row.get("cuda_graph"))
        try:
            if graphs not in models:
                models[graphs] = MeasuredCostModel(table, fallback=sim_device, cuda_graphs=graphs)
            row[key] = simulate(graph, schedule, models[graphs]).makespan_ms
        except Exception as e:
            row["resimulate_error"] = f"{type(e).__name__}: {e}"[:200]


def _rel(pred: float | None, meas: float | None) -> float | None:
    if pred is None or not meas:
        return None
    return (pred - meas) / meas


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in rows if "measured_ms" in r]
    analytic = [abs(_rel(r["simulated_ms"], r["measured_ms"])) for r in done]
    table = [
        abs(_rel(r["simulated_measured_table_ms"], r["measured_ms"]))
        for r in done
        if "simulated_measured_table_ms" in r
    ]
    in_situ = [
        abs(_rel(r["simulated_in_situ_table_ms"], r["measured_ms"]))
        for r in done
        if "simulated_in_situ_table_ms" in r
    ]
    eager_rows = [r for r in done if not r["cuda_graph"] and r.get("measured_allocated_bytes")]
    alloc_err = [abs(_rel(r["predicted_allocated_bytes"], r["measured_allocated_bytes"])) for r in eager_rows]
    alloc_err_ops = [
        abs(_rel(r["predicted_allocated_op_memory_bytes"], r["measured_allocated_bytes"])) for r in eager_rows
    ]
    return {
        "rows_run": len(done),
        "rows_skipped": sum(1 for r in rows if "skipped" in r),
        "rows_failed": sum(1 for r in rows if "error" in r),
        "all_match_eager": all(r["matches_eager"] for r in done),
        "latency_mean_abs_rel_error_analytic": statistics.fmean(analytic) if analytic else None,
        "latency_mean_abs_rel_error_measured_table": statistics.fmean(table) if table else None,
        "latency_mean_abs_rel_error_in_situ_table": statistics.fmean(in_situ) if in_situ else None,
        "allocated_rows_within_2pct": sum(1 for e in alloc_err if e <= 0.02),
        "allocated_rows": len(alloc_err),
        "allocated_max_abs_rel_error": max(alloc_err) if alloc_err else None,
        "allocated_rows_within_2pct_with_op_memory": sum(1 for e in alloc_err_ops if e <= 0.02),
        "allocated_max_abs_rel_error_with_op_memory": max(alloc_err_ops) if alloc_err_ops else None,
    }


def _profile(a: argparse.Namespace) -> str:
    """The cost-model profile of the predictions: ``--profile``, else the built-in one of the device
    the rows run on (h100, h200...; cpu for the CPU)."""
    from streamplan.app.run import profile_for

    if a.profile:
        return a.profile
    return profile_for("cpu" if not a.device.startswith("cuda") else "cuda")


def _profile_name(profile: str) -> str:
    from streamplan.cost import get_device

    return get_device(profile).name


def _has_graphs(profile: str) -> bool:
    from streamplan.cost import get_device

    return get_device(profile).has_cuda_graphs


def _device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "cpu"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.1f}%"


def _print_table(rows: list[dict[str, Any]], result: dict[str, Any]) -> None:
    head = (
        "model",
        "bs",
        "policy",
        "cg",
        "str",
        "ms",
        "speedup",
        "sim ms",
        "sim+tbl ms",
        "alloc MiB",
        "pred MiB",
        "err",
        "+ops MiB",
        "err",
        "resv MiB",
        "pred MiB",
        "err",
        "eager",
    )
    lines = [head]
    for r in rows:
        base = (
            r.get("model", ""),
            str(r.get("batch", "")),
            r.get("policy", ""),
            "y" if r.get("cuda_graph") else "n",
        )
        if "measured_ms" not in r:
            lines.append(base + (r.get("skipped") or ("error: " + r.get("error", "?"))[:60],) + ("",) * 13)
            continue
        alloc, resv = r["measured_allocated_bytes"], r["measured_reserved_bytes"]
        lines.append(
            base
            + (
                str(r["num_streams"]),
                f"{r['measured_ms']:.3f}",
                f"{r.get('speedup', 0):.2f}x",
                f"{r['simulated_ms']:.3f}",
                f"{r.get('simulated_measured_table_ms', float('nan')):.3f}",
                f"{alloc / MIB:.1f}" if alloc else "-",
                f"{r['predicted_allocated_bytes'] / MIB:.1f}",
                _pct(_rel(r["predicted_allocated_bytes"], alloc)),
                f"{r['predicted_allocated_op_memory_bytes'] / MIB:.1f}",
                _pct(_rel(r["predicted_allocated_op_memory_bytes"], alloc)),
                f"{resv / MIB:.1f}" if resv else "-",
                f"{r['predicted_reserved_bytes'] / MIB:.1f}",
                _pct(_rel(r["predicted_reserved_bytes"], resv)),
                "ok" if r["matches_eager"] else "DIFF",
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    print(f"device: {result['device']}, {result['elapsed_s']:.0f} s")
    for k, v in result["summary"].items():
        print(f"  {k}: {v}")
    for line in lines:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
