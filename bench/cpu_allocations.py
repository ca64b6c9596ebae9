"""The kernels' real allocations on the CPU against the memory model, every zoo model x policy.

    python bench/cpu_allocations.py [--models squeezenet bert_base ...] [--seeds 3]

For each model (batch 1): measure each op's scratch once (``op_scratch_bytes``: the
peak of what its kernels allocate beyond its outputs), then for each policy run the
schedule on CPU threads under the allocation tracker (``run(track_allocations=True)``)
with ``--seeds`` chaos seeds and keep the largest tracked peak. Beside it: the
executor's own count of live activations, the ``exact`` replay in host order plus the
measured scratch, the worst case over all timings (graph tensors only) and the
scratch of ops that can run at once (the largest one per stream). On one stream the
tracked peak is a deterministic function of the program and the prediction should
equal it; on several, the threads' timing decides, and the worst case plus that
scratch bounds it.
"""

from __future__ import annotations

import argparse
import sys

from streamplan.schedule.context import ScheduleContext

MODELS = ("squeezenet", "inception_v3", "resnet50", "randwire", "nasnet_a", "bert_base", "gpt2")
POLICIES = ("sequential", "memory", "wavefront", "asap", "nimble", "ios")
MIB = 2**20


def main(argv: list[str] | None = None) -> int:
    import importlib.util

    import torch

    from streamplan.cost.measured import MeasuredTable
    from streamplan.frontends.torch_capture import capture
    from streamplan.memory.allocators import OpMemory, replay
    from streamplan.memory.worst_case import worst_case_peak
    from streamplan.runtime import run
    from streamplan.runtime.interpret import initial_env, params_from_module
    from streamplan.runtime.op_timing import op_scratch_bytes
    from streamplan.schedule import make_schedule
    from streamplan.zoo.registry import ZOO

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--seeds", type=int, default=3, help="chaos seeds per multi-stream row")
    ap.add_argument("--max-streams", type=int, default=4)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    head = ("model", "policy", "str", "tracked", "live", "pred", "err", "worst", "scratch", "bound ok")
    print("MiB; tracked: kernel allocations (max over seeds); live: executor's activation count;")
    print("pred: exact replay in host order + measured op scratch; worst: worst case, graph tensors only;")
    print("scratch: the largest op scratch, one per stream (what can run at once)")
    print("  ".join(f"{h:>11}" for h in head))
    for model in a.models:
        entry = ZOO[model]
        if entry.requires and not importlib.util.find_spec(entry.requires):
            print(f"{model}: needs {entry.requires}, skipped")
            continue
        module, inputs = entry.load_factory()(1)
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        graph = capture(module.eval(), inputs, name=model)
        params = params_from_module(graph, module)
        scratch = op_scratch_bytes(graph, initial_env(graph, list(inputs), params))
        extra = OpMemory.from_table(graph, MeasuredTable("cpu", {}, scratch))
        largest = sorted(extra.scratch_bytes.values(), reverse=True)
        for policy in a.policies:
            schedule = make_schedule(graph, policy, ScheduleContext(max_streams=a.max_streams))
            seeds = range(a.seeds) if schedule.num_streams > 1 else range(1)
            tracked = live = 0
            for seed in seeds:
                r = run(
                    graph,
                    schedule,
                    list(inputs),
                    params=params,
                    chaos=schedule.num_streams > 1,
                    chaos_seed=seed,
                    track_allocations=True,
                )
                tracked = max(tracked, r.tracked_peak_bytes or 0)
                live = max(live, r.measured_peak_bytes)
            pred = replay(graph, schedule, "exact", op_memory=extra).allocated_peak_bytes
            worst = worst_case_peak(graph, schedule).upper_bytes
            concurrent_scratch = sum(largest[: schedule.num_streams])
            row = (
                model,
                policy,
                str(schedule.num_streams),
                f"{tracked / MIB:.3f}",
                f"{live / MIB:.3f}",
                f"{pred / MIB:.3f}",
                f"{(pred - tracked) / tracked:+.1%}" if tracked else "",
                f"{worst / MIB:.3f}",
                f"{concurrent_scratch / MIB:.3f}",
                "yes" if tracked <= worst + concurrent_scratch else "NO",
            )
            print("  ".join(f"{c:>11}" for c in row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
