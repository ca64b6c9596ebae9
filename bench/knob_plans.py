"""The knobs ``plan`` prescribes under a budget, for a range of budgets, beside the fastest
setting that fits and the frameworks' defaults.

The grid is evaluated once per model (``budget.knobs.prescribe`` without a budget); each
budget then keeps the fastest setting whose worst-case allocator peak (torch-cuda reserved
under maximal run-ahead, parameters and optimizer state included) fits it.

    PYTHONPATH=src HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python bench/knob_plans.py \
        --model bench/models/llama.py:llama_8b_short
"""

from __future__ import annotations

import argparse
import time

from streamplan.budget.knobs import prescribe
from streamplan.cache import CaptureCache
from streamplan.models import ModelRequest
from streamplan.parallel import ParallelPlan
from streamplan.schedule.context import ScheduleContext

GIB = 1 << 30
DEFAULTS = {
    "FSDP1 limit_all_gathers=True": "prefetch=1 in_flight=2 reshard record_stream",
    "FSDP1 limit_all_gathers=False": "prefetch=1 in_flight=none reshard record_stream",
    "FSDP2": "prefetch=1 in_flight=none reshard no-record_stream",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bench/models/llama.py:llama_1b_short")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--plan", default="fsdp=8")
    ap.add_argument("--device", default="h100")
    args = ap.parse_args()
    step = ModelRequest(args.model, batch=args.batch, train=True, optimizer="adam").load(cache=CaptureCache())
    t0 = time.perf_counter()
    grid = prescribe(step, args.plan, ctx=ScheduleContext(cost=args.device))
    print(
        f"{args.model} ({len(step.nodes)} ops), {args.plan} on {args.device}: {len(grid.points)} settings "
        f"evaluated in {time.perf_counter() - t0:.1f} s"
    )
    by_knobs = {p.knobs: p for p in grid.points}
    for name, knobs in DEFAULTS.items():
        p = by_knobs.get(knobs)
        if p is not None:
            print(f"  {name}: step {p.step_ms:.1f} ms, worst-case peak {p.peak_bytes / GIB:.2f} GiB")
    peaks = sorted(p.peak_bytes for p in grid.points)
    budgets = sorted(
        {peaks[0], peaks[len(peaks) // 4], peaks[len(peaks) // 2], peaks[3 * len(peaks) // 4], peaks[-1]}
    )
    print("| budget GiB | chosen knobs | peak GiB | step ms | fastest fitting step ms | over it |")
    print("|---|---|---|---|---|---|")
    for b in budgets:
        fitting = [p for p in grid.points if p.peak_bytes <= b]
        chosen = min(fitting, key=lambda p: (p.step_ms, p.peak_bytes))
        fastest = min(p.step_ms for p in fitting)
        assert chosen.peak_bytes <= b
        print(
            f"| {b / GIB:.2f} | {chosen.knobs} | {chosen.peak_bytes / GIB:.2f} | {chosen.step_ms:.1f} | "
            f"{fastest:.1f} | {100 * (chosen.step_ms / fastest - 1):.1f}% |"
        )
    ParallelPlan.parse(args.plan)


if __name__ == "__main__":
    main()
