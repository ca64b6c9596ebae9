"""Calibrate the cost model against IOS's published V100 batch-1 latencies (ANCHORS.md).

Prints, per model, the simulated sequential latency beside IOS's measured one and
the simulated speedups of wavefront and ios over sequential beside IOS's, plus the
ios search time beside IOS's ~48 s of GPU profiling for Inception V3.

    .venv/bin/python bench/calibrate_ios.py [--device v100] [--cache DIR] [--set name=value ...]
        [--fusion none|first|stream-aware] [--gemm-epilogue]

``--fusion`` schedules the kernels fused in that order (IOS's own kernels were fused:
convolution, batch-norm and ReLU as one); ``--gemm-epilogue`` also fuses pointwise
epilogues into convolutions, as IOS's cuDNN kernels did (Inductor's default does not).
``--set`` overrides a shared profile constant for an experiment (e.g.
``--set kernel_fixed_ms=0.005``); the committed constants live in
``src/streamplan/cost/devices.py`` and are the same for every model.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from streamplan.cost import AnalyticCostModel, get_device, simulate
from streamplan.fusion import FusionRules, kernel_count, schedule_with_fusion
from streamplan.schedule.context import FUSION_MODES, ScheduleContext

# model: (sequential ms, wavefront ms, ios ms) measured by IOS on a V100 at batch 1
IOS_V100 = {
    "inception_v3": (6.51, 4.62, 4.03),
    "randwire": (8.49, 6.27, 6.02),
    "nasnet_a_large": (22.95, 16.78, 16.04),
    "squeezenet": (0.86, 0.98, 0.73),
}
NOTES: dict[str, str] = {}


def load_graph(name: str, cache: Path | None):
    from streamplan.ir.serialize import load, save
    from streamplan.models import load_model

    if cache is not None and (cache / f"{name}.json").exists():
        return load(cache / f"{name}.json")
    graph = load_model(name, batch=1)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        save(graph, cache / f"{name}.json")
    return graph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="v100")
    ap.add_argument("--cache", type=Path, default=None, help="keep captured graphs as JSON here")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--models", nargs="*", default=list(IOS_V100))
    ap.add_argument("--no-ios", action="store_true", help="skip the (slower) ios search")
    ap.add_argument("--fusion", choices=FUSION_MODES, default="none")
    ap.add_argument("--gemm-epilogue", action="store_true", help="fuse pointwise epilogues into convolutions")
    args = ap.parse_args()
    rules = FusionRules(gemm_epilogue=args.gemm_epilogue)
    profile = get_device(args.device)
    for item in args.set:
        key, _, value = item.partition("=")
        current = getattr(profile, key)
        profile = profile.replace(
            **{key: type(current)(float(value)) if not isinstance(current, bool) else value == "1"}
        )
    cost = AnalyticCostModel(profile)
    ctx = ScheduleContext(cost=cost, fusion=args.fusion, time_limit_s=600)  # IOS run to completion

    def run(graph, policy):
        planned = schedule_with_fusion(graph, policy, ctx, rules=rules)
        return planned, simulate(planned.graph, planned.schedule, cost).makespan_ms

    header = (
        f"{'model':<13} {'ops':>4} {'kern':>4} {'seq ms':>7} {'IOS seq':>7} {'err':>5}  "
        f"{'wf x':>5} {'IOS wf':>6}  {'ios x':>5} {'IOS ios':>7}  {'ios search s':>12}"
    )
    print(f"device {profile.name}: {profile.summary}; fusion {args.fusion} {rules.to_dict()}")
    print(header)
    print("-" * len(header))
    for name in args.models:
        graph = load_graph(name, args.cache)
        seq, seq_ms = run(graph, "sequential")
        _, wf_ms = run(graph, "wavefront")
        ios_text, search_text = "  -  ", "-"
        if not args.no_ios:
            t0 = time.perf_counter()
            _, ios_ms = run(graph, "ios")
            search_s = time.perf_counter() - t0
            ios_text, search_text = f"{seq_ms / ios_ms:5.2f}", f"{search_s:.1f}"
        m_seq, m_wf, m_ios = IOS_V100[name]
        err = (seq_ms - m_seq) / m_seq
        print(
            f"{name:<13} {len(graph):>4} {kernel_count(seq.graph):>4} {seq_ms:7.2f} {m_seq:7.2f} {err:+5.0%}  {seq_ms / wf_ms:5.2f} "
            f"{m_seq / m_wf:6.2f}  {ios_text} {m_seq / m_ios:7.2f}  {search_text:>12}"
            + (f"   ({NOTES[name]})" if name in NOTES else ""),
            flush=True,
        )
    print("IOS search on its V100: ~48 s of profiling for Inception V3, ~57 min for NASNet-A large.")


if __name__ == "__main__":
    main()
