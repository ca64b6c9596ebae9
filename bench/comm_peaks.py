"""The peak of one FSDP rank as a function of the knobs: the shape of pytorch/pytorch#98354.

For each model, one rank's program under FSDP over 8 ranks (Adam, bf16 where the model is),
scheduled by ``overlap`` with every combination of in-flight limit, prefetch depth,
record_stream and reshard-after-forward below, simulated on an H100 profile (NVLink 4 within
the node). Per row: the host-order figure (allocated at launch), bytes held at host launch
(allocated + held back by record_stream) as the worst case over every timing and on the
simulated timeline, the ``torch-cuda`` replay under maximal run-ahead, the simulated step,
the communication it leaves exposed, and what the collectives hold at the held peak.
Everything counts activations, parameters (the shards) and optimizer state.

    PYTHONPATH=src HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python bench/comm_peaks.py
    PYTHONPATH=src ... python bench/comm_peaks.py --model resnet50 --batch 32
"""

from __future__ import annotations

import argparse
import time

from streamplan.cache import CaptureCache
from streamplan.cost.overlap import comm_overlap
from streamplan.cost.simulate import simulate
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.includes import EVERYTHING
from streamplan.memory.allocators import replay
from streamplan.memory.comm_explain import comm_peak_note
from streamplan.memory.host_order import trace_from_liveness
from streamplan.memory.launch_time import held_peak
from streamplan.memory.liveness import liveness
from streamplan.models import ModelRequest
from streamplan.parallel import rank_program
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import make_schedule

GIB = 1 << 30
ROWS = (  # (label, reshard, schedule knobs)
    (
        "FSDP1 limit_all_gathers=False",
        True,
        {"in_flight": None, "forward_prefetch": 1, "backward_prefetch": 1},
    ),
    ("FSDP1 limit_all_gathers=True", True, {"in_flight": 2, "forward_prefetch": 1, "backward_prefetch": 1}),
    ("in_flight=1", True, {"in_flight": 1, "forward_prefetch": 1, "backward_prefetch": 1}),
    ("prefetch=2, unbounded", True, {"in_flight": None, "forward_prefetch": 2, "backward_prefetch": 2}),
    ("prefetch=2, in_flight=3", True, {"in_flight": 3, "forward_prefetch": 2, "backward_prefetch": 2}),
    ("prefetch=0, in_flight=2", True, {"in_flight": 2, "forward_prefetch": 0, "backward_prefetch": 0}),
    ("no record_stream (FSDP2)", True, {"in_flight": None, "record_stream": False}),
    (
        "no record_stream, prefetch=2",
        True,
        {"in_flight": None, "record_stream": False, "forward_prefetch": 2, "backward_prefetch": 2},
    ),
    ("reshard=false, in_flight=2", False, {"in_flight": 2}),
)


def analyse(graph, knobs: dict, device: str) -> dict:
    t0 = time.perf_counter()
    s = make_schedule(graph, "overlap", ScheduleContext(options=FrozenDict(knobs)))
    tl = simulate(graph, s, device)
    live = liveness(graph, s, includes=EVERYTHING)
    host = trace_from_liveness(live, s).peak_bytes
    worst = held_peak(live, s)
    sim = held_peak(live, s, timeline=tl)
    tc = replay(graph, s, "torch-cuda", includes=EVERYTHING, live=live, run_ahead=True)
    note = comm_peak_note(graph, s, worst)
    ov = comm_overlap(graph, tl)
    gathered = [b for b in note.buffers if b.role == "gathered"]
    return {
        "host": host,
        "worst": worst.peak_bytes,
        "sim": sim.peak_bytes,
        "reserved": tc.reserved_peak_bytes,
        "step_ms": tl.makespan_ms,
        "exposed_ms": ov.exposed_ms,
        "comm_ms": ov.comm_ms,
        "at_peak": f"{len(gathered)} gathered ({sum(b.held for b in gathered)} held), "
        f"{sum(b.role == 'gradients' for b in note.buffers)} grad buffers",
        "seconds": time.perf_counter() - t0,
        "host_waits": len(s.host_waits),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bench/models/llama.py:llama_1b")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--device", default="h100")
    ap.add_argument("--optimizer", default="adam")
    args = ap.parse_args()
    t0 = time.perf_counter()
    step = ModelRequest(args.model, batch=args.batch, train=True, optimizer=args.optimizer).load(
        cache=CaptureCache()
    )
    print(
        f"{args.model} at batch {args.batch or 'default'}: {len(step.nodes)} ops, captured or cached in "
        f"{time.perf_counter() - t0:.1f} s; FSDP over {args.ranks} ranks on {args.device}",
        flush=True,
    )
    programs = {}
    print(
        "| knobs | host order | held, worst case | held, simulated | torch-cuda reserved (run-ahead) | step ms | "
        "exposed comm ms | collectives at the held peak | analysis s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, reshard, knobs in ROWS:
        if reshard not in programs:
            t = time.perf_counter()
            programs[reshard] = rank_program(step, f"fsdp={args.ranks},reshard={str(reshard).lower()}")
            transform_s = time.perf_counter() - t
        r = analyse(programs[reshard], knobs, args.device)
        print(
            f"| {label} | {r['host'] / GIB:.2f} | {r['worst'] / GIB:.2f} | {r['sim'] / GIB:.2f} | "
            f"{r['reserved'] / GIB:.2f} | {r['step_ms']:.1f} | {r['exposed_ms']:.1f} | {r['at_peak']} | "
            f"{r['seconds'] + transform_s:.1f} |",
            flush=True,
        )
        transform_s = 0.0


if __name__ == "__main__":
    main()
