"""The knobs ``plan`` prescribes under a budget, for a range of budgets (some below what any
setting of the knobs needs, where rematerialization joins the knobs), beside the fastest
setting of the grid that fits and the frameworks' defaults.

The grid is evaluated once without a budget (every setting's worst-case allocator peak:
torch-cuda reserved under maximal run-ahead, parameters and optimizer state included; and,
for the front, the device memory it runs in when the allocator returns its cache). Each
budget then runs ``plan`` itself (``remat.knobs.prescribe_with_remat``): a setting fits when
the allocator, replayed with the budget as its device memory, never runs out; the choice is
the fastest that fits without returning cached memory, else the fastest that fits by
returning it; settings of the front that could beat it get recomputations.

    PYTHONPATH=src HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python bench/knob_plans.py \
        --model bench/models/llama.py:llama_1b_short [--budgets 2.6 3.5 4.2 6 8]
"""

from __future__ import annotations

import argparse
import time

from streamplan.budget.knobs import prescribe
from streamplan.cache import CaptureCache
from streamplan.models import ModelRequest
from streamplan.remat.knobs import prescribe_with_remat
from streamplan.schedule.context import ScheduleContext

GIB = 1 << 30
DEFAULTS = {
    "FSDP1 limit_all_gathers=True": "prefetch=1 in_flight=2 reshard record_stream",
    "FSDP1 limit_all_gathers=False": "prefetch=1 in_flight=none reshard record_stream",
    "FSDP2": "prefetch=1 in_flight=none reshard no-record_stream",
}
CLASS = ("fits", "fits, returns its cache", "does not fit")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bench/models/llama.py:llama_1b_short")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--plan", default="fsdp=8")
    ap.add_argument("--device", default="h100")
    ap.add_argument("--budgets", type=float, nargs="*", help="GiB (default: spread around the front)")
    args = ap.parse_args()
    ctx = ScheduleContext(cost=args.device)
    step = ModelRequest(args.model, batch=args.batch, train=True, optimizer="adam").load(cache=CaptureCache())
    t0 = time.perf_counter()
    grid = prescribe(step, args.plan, ctx=ctx)
    print(
        f"{args.model} ({len(step.nodes)} ops), {args.plan} on {args.device}: {len(grid.points)} settings "
        f"evaluated in {time.perf_counter() - t0:.1f} s"
    )
    by_knobs = {p.knobs: p for p in grid.points}
    for name, knobs in DEFAULTS.items():
        p = by_knobs.get(knobs)
        if p is not None:
            print(f"  {name}: step {p.step_ms:.1f} ms, worst-case peak {p.peak_bytes / GIB:.2f} GiB")
    print("  front (step ms, peak GiB, runs in GiB):")
    for p in grid.front:
        print(f"    {p.step_ms:8.1f} {p.peak_bytes / GIB:6.2f} {p.needed_bytes / GIB:6.2f}  {p.knobs}")
    if args.budgets:
        budgets = [int(b * GIB) for b in args.budgets]
    else:
        least = min(p.needed_bytes for p in grid.front)
        peaks = sorted(p.peak_bytes for p in grid.points)
        budgets = [int(least * 0.8), int(least * 0.95), least, peaks[len(peaks) // 2], peaks[-1]]
    print(
        "| budget GiB | chosen knobs | recomputed ops | peak GiB | runs in GiB | fit | step ms "
        "| fastest grid setting that fits: without / by returning the cache, ms | chosen over the first | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for b in sorted(budgets):
        t1 = time.perf_counter()
        plan = prescribe_with_remat(step, args.plan, budget_bytes=b, ctx=ctx)
        seconds = time.perf_counter() - t1
        grid_points = [p for p in plan.points if not p.recomputed_ops]
        clean = min((p.step_ms for p in grid_points if p.fit_class == 0), default=None)
        returning = min((p.step_ms for p in grid_points if p.fit_class == 1), default=None)
        fastest = (
            f"{'-' if clean is None else f'{clean:.1f}'} / {'-' if returning is None else f'{returning:.1f}'}"
        )
        c = plan.chosen
        if c is None:
            print(f"| {b / GIB:.2f} | none fits | | | | | | {fastest} | | {seconds:.0f} |")
            continue
        assert c.fits and (c.needed_bytes is None or c.needed_bytes <= b)
        over = "-" if clean is None else f"{100 * (c.step_ms / clean - 1):+.1f}%"
        needs = "-" if c.needed_bytes is None else f"{c.needed_bytes / GIB:.2f}"
        print(
            f"| {b / GIB:.2f} | {c.knobs} | {c.recomputed_ops} | {c.peak_bytes / GIB:.2f} | {needs} | "
            f"{CLASS[c.fit_class]} | {c.step_ms:.1f} | {fastest} | {over} | {seconds:.0f} |"
        )


if __name__ == "__main__":
    main()
