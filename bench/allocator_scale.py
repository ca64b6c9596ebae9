"""How allocator replays scale: random:N at 1k, 10k, 100k ops, every model, one and several streams.

Run: nice .venv/bin/python bench/allocator_scale.py [N ...]

Prints, per graph and schedule, the CPU seconds (process time, as the machine
may be shared) each model's ``replay`` takes (liveness and host-order events
included), microseconds per op (flat as N grows means linear time), and the CPU
seconds of the shared liveness + host-order events step alone ("events s"), so
the allocator model's own cost is the difference. The multi-stream rows use the
``asap`` policy and the simulated V100 timeline, so the cross-stream hold logic runs.
"""

from __future__ import annotations

import sys
import time

from streamplan.cost.simulate import simulate
from streamplan.memory.allocators import MODELS, replay
from streamplan.memory.host_order import events_from_liveness
from streamplan.memory.liveness import liveness
from streamplan.models import load_model
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import make_schedule

MIB = 1 << 20


def main(sizes: list[int]) -> None:
    print(
        f"{'graph':<14} {'schedule':<10} {'model':<11} {'seconds':>8} {'us/op':>7} {'alloc MiB':>10} {'resv MiB':>9}"
    )
    for n in sizes:
        graph = load_model(f"random:{n}")
        for policy in ("sequential", "asap"):
            schedule = make_schedule(graph, policy, ScheduleContext(max_streams=4))
            timeline = simulate(graph, schedule, "v100") if schedule.num_streams > 1 else None
            t0 = time.process_time()
            events_from_liveness(liveness(graph, schedule), schedule)
            events_s = time.process_time() - t0
            for model in MODELS:
                t0 = time.process_time()
                r = replay(graph, schedule, model, timeline=timeline)
                dt = time.process_time() - t0
                print(
                    f"random:{n:<7} {policy:<10} {model:<11} {dt:8.3f} {1e6 * dt / n:7.1f} "
                    f"{r.allocated_peak_bytes / MIB:10.2f} {r.reserved_peak_bytes / MIB:9.2f} {events_s:8.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000, 10_000, 100_000])
