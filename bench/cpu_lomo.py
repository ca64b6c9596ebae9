"""CPU leave-one-model-out: calibrate on micro-benchmarks, predict models the calibration never ran.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 /work/venvs/zoo/bin/python bench/cpu_lomo.py \\
        [--rounds 3] [--models ...] [--timm ...] [--graphs saved.json ...]
        [--policies sequential nimble] [--out cpu_lomo.json]

(timm models need a Python where timm imports; the zoo models run anywhere. ``--save-timm DIR``
writes the timm models' captured graphs there, and ``--graphs DIR/*.json`` runs saved graphs in
another Python: the timm models captured where timm imports, measured with the CPU wheel.)

Each round runs ``calibrate --on cpu`` (the full micro-benchmarks: op kinds at many
sizes, overheads, events, co-running streams; never a model), then, for every model,
runs its schedules for real on the CPU runtime (one worker thread per stream, median
of ``--repeat`` after a warm-up) and simulates them with that round's profile. No
model ever took part in a calibration, so every prediction is of a model left out.

The second error column is the strict leave-one-model-out refinement
(``cost.fit.refine_profile``): the round's profile with a time scale per op family
fitted on the *other* models' measured sequential latencies, then used on the model
left out.

Machine load: before each model a canary (the calibration's chain of tiny ops) is
timed; when the machine's speed has moved by more than ``--canary-tolerance`` since
the round's calibration, the model waits (up to twice) for it to come back, and the
row records the drift that remained. A third column scales the prediction by that
drift (canary now over canary at calibration): what the error would be had the
machine kept the speed it had while calibrating, which separates the model's own
error from the load of a shared machine. Errors are reported per round, with the
median and the spread (min..max over rounds) per row.

A calibration is itself measured on that machine: one whose steadiness probe drifted by
more than ``--calibration-drift`` (``calibration.drift``) is run again, up to twice, and
each row records the drift of the calibration it was predicted with.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ZOO = ("squeezenet", "inception_v3", "resnet50", "googlenet", "nasnet_a", "randwire")
TIMM = ("resnet18", "mobilenetv3_small_100", "efficientnet_b0", "regnetx_002", "densenet121", "mixnet_s")
POLICIES = ("sequential", "nimble", "wavefront")


def timm_graph(name: str):
    import timm
    import torch

    from streamplan.frontends.torch_capture import capture

    model = timm.create_model(name, pretrained=False).eval()
    size = model.default_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(1, *size, generator=torch.Generator().manual_seed(0))
    return capture(model, (x,), name=f"timm:{name}")


def canary_ms(reps: int = 5) -> float:
    from streamplan.runtime import run
    from streamplan.runtime.calibrate_graphs import chain_graph
    from streamplan.schedule import make_schedule

    g = chain_graph(200)
    return run(g, make_schedule(g, "sequential"), repeat=reps, warmup=1).measured_ms


def measure(graph, policy: str, repeat: int, max_streams: int) -> tuple[Any, float, tuple[float, ...]]:
    from streamplan.runtime import run
    from streamplan.schedule import make_schedule
    from streamplan.schedule.context import ScheduleContext

    schedule = make_schedule(graph, policy, ScheduleContext(max_streams=max_streams))
    r = run(graph, schedule, repeat=repeat, warmup=1)
    return schedule, r.measured_ms, r.times_ms


def main(argv: list[str] | None = None) -> int:
    import torch

    from streamplan.app.calibrate import calibrate
    from streamplan.cost import AnalyticCostModel, simulate
    from streamplan.cost.refine import refine_profile
    from streamplan.models import load_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=list(ZOO))
    ap.add_argument(
        "--timm",
        nargs="*",
        default=None,
        help=f"timm models (alone, or by default when timm imports: {TIMM})",
    )
    ap.add_argument("--graphs", nargs="*", default=[], help="saved graphs (JSON) to run as models too")
    ap.add_argument(
        "--save-timm", type=Path, default=None, help="write the timm models' graphs here and stop"
    )
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-streams", type=int, default=4)
    ap.add_argument("--canary-tolerance", type=float, default=0.2)
    ap.add_argument("--calibration-drift", type=float, default=0.15)
    ap.add_argument("--out", default="cpu_lomo.json")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    graphs = {} if a.save_timm is not None else {m: load_model(m, batch=1) for m in a.models}
    names = a.timm
    if names == []:  # --timm alone: the default timm models (timm must import)
        names = list(TIMM)
    if names is None:
        try:
            import timm  # noqa: F401

            names = list(TIMM)
        except ImportError:
            names = []
    for n in names:
        graphs[f"timm:{n}"] = timm_graph(n)
    if a.save_timm is not None:
        from streamplan.ir.serialize import save

        a.save_timm.mkdir(parents=True, exist_ok=True)
        for n in names:
            save(graphs[f"timm:{n}"], a.save_timm / f"{n}.json")
        print(f"{len(names)} timm graphs written to {a.save_timm}")
        return 0
    for path in a.graphs:
        graph = load_model(path)
        graphs[graph.name] = graph
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    for rnd in range(a.rounds):
        for attempt in range(3):
            cal = calibrate("cpu")
            drift = cal.profile.calibration.drift or 0.0
            if drift <= a.calibration_drift or attempt == 2:
                break
            print(
                f"round {rnd + 1}: the calibration drifted {100 * drift:.0f}%: calibrating again", flush=True
            )
        profile = cal.profile
        base_canary = canary_ms()
        print(
            f"round {rnd + 1}: calibrated in {cal.elapsed_s:.0f} s (per op {profile.kernel_fixed_ms * 1e3:.1f} us, "
            f"canary {base_canary:.2f} ms, the calibration's drift {100 * (profile.calibration.drift or 0):.0f}%)",
            flush=True,
        )
        measured: dict[tuple[str, str], dict[str, Any]] = {}
        for name, graph in graphs.items():
            for attempt in range(3):
                c = canary_ms()
                drift = c / base_canary - 1
                if abs(drift) <= a.canary_tolerance or attempt == 2:
                    break
                time.sleep(10)
            for policy in a.policies:
                schedule, ms, times = measure(graph, policy, a.repeat, a.max_streams)
                measured[(name, policy)] = {
                    "graph": graph,
                    "schedule": schedule,
                    "ms": ms,
                    "times": times,
                    "drift": drift,
                    "streams": schedule.num_streams,
                }
        for (name, policy), m in measured.items():
            predicted = simulate(m["graph"], m["schedule"], AnalyticCostModel(profile)).makespan_ms
            # the same profile without the lock's interference: that term's share, on the same runs
            unlocked = no_lock_interference(profile)
            predicted_no_lock = simulate(m["graph"], m["schedule"], AnalyticCostModel(unlocked)).makespan_ms
            # in-place ops (relu_, silu_, add_) costed by their family's pooled curve, as before
            # they had curves of their own: that change's share, on the same runs
            pooled = inplace_as_family(profile, m["graph"])
            predicted_pooled = simulate(m["graph"], m["schedule"], AnalyticCostModel(pooled)).makespan_ms
            # views free again (as before the calibration timed them): that term's share
            free = profile.replace(calibration=dataclasses.replace(profile.calibration, view_ms=0.0))
            predicted_free = simulate(m["graph"], m["schedule"], AnalyticCostModel(free)).makespan_ms
            others = [
                (v["graph"], v["schedule"], v["ms"])
                for (n2, p2), v in measured.items()
                if n2 != name and p2 == "sequential"
            ]
            refined = refine_profile(profile, others)
            refined_ms = simulate(m["graph"], m["schedule"], AnalyticCostModel(refined)).makespan_ms
            row = {
                "round": rnd + 1,
                "model": name,
                "policy": policy,
                "streams": m["streams"],
                "measured_ms": m["ms"],
                "spread": (max(m["times"]) - min(m["times"])) / m["ms"],
                "canary_drift": m["drift"],
                "calibration_drift": profile.calibration.drift,
                "predicted_ms": predicted,
                "error": predicted / m["ms"] - 1,
                "no_lock_interference_error": predicted_no_lock / m["ms"] - 1,
                "inplace_as_family_error": predicted_pooled / m["ms"] - 1,
                "views_free_error": predicted_free / m["ms"] - 1,
                "refined_ms": refined_ms,
                "refined_error": refined_ms / m["ms"] - 1,
                "drift_corrected_error": predicted * (1 + m["drift"]) / m["ms"] - 1,
            }
            rows.append(row)
            print(
                f"  {name:<26} {policy:<10} {m['streams']} str  measured {m['ms']:8.1f} ms "
                f"(spread {100 * row['spread']:3.0f}%, canary {100 * m['drift']:+4.0f}%)  "
                f"calibrated {predicted:8.1f} ({100 * row['error']:+5.1f}%)  "
                f"LOMO-refined {refined_ms:8.1f} ({100 * row['refined_error']:+5.1f}%)  "
                f"drift-corrected {100 * row['drift_corrected_error']:+5.1f}%",
                flush=True,
            )
    summary = _summary(rows)
    Path(a.out).write_text(json.dumps({"rows": rows, "summary": summary, "args": vars(a)}, indent=1))
    print(f"{a.rounds} rounds in {time.perf_counter() - t_start:.0f} s")
    _print_summary(rows, summary)
    return 0


def no_lock_interference(profile):  # noqa: ANN001, ANN201
    """``profile`` with its contention's ``lock_interference`` set to 0 (the model before that term)."""
    cal = profile.calibration
    supply = dataclasses.replace(cal.contention, lock_interference=0.0)
    return profile.replace(calibration=dataclasses.replace(cal, contention=supply))


def inplace_as_family(profile, graph):  # noqa: ANN001, ANN201
    """``profile`` with ``graph``'s in-place kinds costed by their family's pooled curve."""
    from streamplan.cost.kinds import op_features

    cal = profile.calibration
    curves = {c.kind: c for c in cal.curves if not c.kind.endswith("_")}
    for node in graph.nodes:
        f = op_features(graph, node)
        if f.kind.endswith("_") and f.family in curves:
            curves[f.kind] = dataclasses.replace(curves[f.family], kind=f.kind)
    return profile.replace(calibration=dataclasses.replace(cal, curves=tuple(curves.values())))


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, pick in (("sequential", lambda r: r["policy"] == "sequential"),
                       ("multi-stream", lambda r: r["policy"] != "sequential")):  # fmt: skip
        sel = [r for r in rows if pick(r)]
        if not sel:
            continue
        per_row: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in sel:
            per_row.setdefault((r["model"], r["policy"]), []).append(r)
        med = [statistics.median(abs(x["error"]) for x in v) for v in per_row.values()]
        med_ref = [statistics.median(abs(x["refined_error"]) for x in v) for v in per_row.values()]
        med_drift = [statistics.median(abs(x["drift_corrected_error"]) for x in v) for v in per_row.values()]
        med_unlocked = [
            statistics.median(abs(x.get("no_lock_interference_error", x["error"])) for x in v)
            for v in per_row.values()
        ]
        med_free = [
            statistics.median(abs(x.get("views_free_error", x["error"])) for x in v) for v in per_row.values()
        ]
        med_pooled = [
            statistics.median(abs(x.get("inplace_as_family_error", x["error"])) for x in v)
            for v in per_row.values()
        ]
        out[kind] = {
            "rows": len(per_row),
            "mean_abs_error": statistics.fmean(med),
            "max_abs_error": max(med),
            "mean_abs_error_refined": statistics.fmean(med_ref),
            "max_abs_error_refined": max(med_ref),
            "mean_abs_error_drift_corrected": statistics.fmean(med_drift),
            "mean_abs_error_no_lock_interference": statistics.fmean(med_unlocked),
            "max_abs_error_no_lock_interference": max(med_unlocked),
            "mean_abs_error_inplace_as_family": statistics.fmean(med_pooled),
            "max_abs_error_inplace_as_family": max(med_pooled),
            "mean_abs_error_views_free": statistics.fmean(med_free),
            "max_abs_error_views_free": max(med_free),
        }
    return out


def _print_summary(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    per_row: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        per_row.setdefault((r["model"], r["policy"]), []).append(r)
    print(f"{'model':<26} {'policy':<10} {'measured ms (min..max)':>24} {'error median (min..max)':>26} "
          f"{'refined (min..max)':>22}")  # fmt: skip
    for (model, policy), v in per_row.items():
        ms = [x["measured_ms"] for x in v]
        e = [100 * x["error"] for x in v]
        f = [100 * x["refined_error"] for x in v]
        print(
            f"{model:<26} {policy:<10} {statistics.median(ms):8.1f} ({min(ms):6.1f}..{max(ms):6.1f}) "
            f"{statistics.median(e):+7.1f}% ({min(e):+5.0f}..{max(e):+4.0f}) "
            f"{statistics.median(f):+7.1f}% ({min(f):+4.0f}..{max(f):+4.0f})"
        )
    for kind, s in summary.items():
        print(
            f"{kind}: {s['rows']} rows, mean |error| {100 * s['mean_abs_error']:.1f}% (max "
            f"{100 * s['max_abs_error']:.1f}%); LOMO-refined {100 * s['mean_abs_error_refined']:.1f}% "
            f"(max {100 * s['max_abs_error_refined']:.1f}%); drift-corrected "
            f"{100 * s['mean_abs_error_drift_corrected']:.1f}%; without the lock's interference "
            f"{100 * s['mean_abs_error_no_lock_interference']:.1f}% (max "
            f"{100 * s['max_abs_error_no_lock_interference']:.1f}%); in-place ops as their family "
            f"{100 * s['mean_abs_error_inplace_as_family']:.1f}% (max "
            f"{100 * s['max_abs_error_inplace_as_family']:.1f}%); views free "
            f"{100 * s['mean_abs_error_views_free']:.1f}% (max {100 * s['max_abs_error_views_free']:.1f}%)"
        )


if __name__ == "__main__":
    sys.exit(main())
