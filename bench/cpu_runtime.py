"""CPU runtime figures: measured latency per policy (one thread per stream), speedup over sequential.

    python bench/cpu_runtime.py [--models inception_v3 randwire ...] [--repeat 5]

Each stream is one worker thread running torch at one intra-op thread, so the
speedup is bounded by the cores free at the time (2 on the development machine,
shared): expect modest figures. Outputs are checked against eager on every row.
"""

from __future__ import annotations

import argparse
import sys

from streamplan.schedule.context import ScheduleContext

MODELS = ("squeezenet", "inception_v3", "randwire", "nasnet_a", "resnet50")
POLICIES = ("sequential", "wavefront", "asap", "nimble")


def main(argv: list[str] | None = None) -> int:
    import os

    import torch

    from streamplan.frontends.torch_capture import capture
    from streamplan.runtime import compare_outputs, run
    from streamplan.runtime.compare import _flat_tensors
    from streamplan.runtime.interpret import params_from_module
    from streamplan.schedule import make_schedule
    from streamplan.zoo.registry import ZOO

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-streams", type=int, default=4)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"cpu cores: {os.cpu_count()}, torch {torch.__version__}, median of {a.repeat} after 1 warm-up")
    print(f"{'model':14} {'policy':11} {'streams':>7} {'ms':>9} {'speedup':>8} {'peak MiB':>9}  eager")
    for model in a.models:
        module, inputs = ZOO[model].load_factory()(1)
        inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        graph = capture(module.eval(), inputs, name=model)
        params = params_from_module(graph, module)
        with torch.no_grad():
            ref = _flat_tensors(module(*inputs))
        base = None
        for policy in a.policies:
            schedule = make_schedule(graph, policy, ScheduleContext(max_streams=a.max_streams))
            r = run(graph, schedule, list(inputs), params=params, repeat=a.repeat, warmup=1)
            ok = compare_outputs(r.outputs, ref)[0]
            base = base or r.measured_ms
            print(
                f"{model:14} {policy:11} {schedule.num_streams:7d} {r.measured_ms:9.1f} "
                f"{base / r.measured_ms:7.2f}x {r.measured_peak_bytes / 2**20:9.1f}  {'ok' if ok else 'DIFF'}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
