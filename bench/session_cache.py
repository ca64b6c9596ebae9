"""What a Session's caches save: the notebook workflow (compare the policies, then the memory
figures, the explanation and the curve of one of them) through one ``Session``, against the
same answers from the application's functions called one by one (each schedules and simulates
again), side by side in one run.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/session_cache.py --models squeezenet inception_v3
"""

from __future__ import annotations

import argparse
import statistics
import time

POLICIES = ["sequential", "memory", "wavefront", "asap", "nimble", "ios"]


def with_session(graph, device: str, policy: str) -> float:
    from streamplan.app.session import Session
    from streamplan.schedule.settings import Settings

    t0 = time.perf_counter()
    s = Session(graph, Settings(device=device))
    s.compare(POLICIES)
    s.memory(policy)
    s.explain(policy, vs="sequential")
    s.curve(policy)
    return time.perf_counter() - t0


def one_by_one(graph, device: str, policy: str) -> float:
    from streamplan.app.analysis import compare_policies, memory_curve, run_policy
    from streamplan.app.context import make_context
    from streamplan.app.explain import explain_policy
    from streamplan.app.memory import analyze_run_memory

    t0 = time.perf_counter()
    ctx = make_context(device=device)
    compare_policies(graph, POLICIES, ctx)
    analyze_run_memory(graph, run_policy(graph, policy, ctx), ctx)
    explain_policy(graph, policy, ctx, vs="sequential")
    memory_curve(graph, run_policy(graph, policy, ctx), ctx)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["squeezenet", "inception_v3"])
    ap.add_argument("--policy", default="asap")
    ap.add_argument("--device", default="v100")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from streamplan.models import load_model

    print(
        f"{'model':14} {'ops':>5} {'session s':>10} {'one by one s':>13} {'ratio':>6}   (median of {args.repeat})"
    )
    for name in args.models:
        graph = load_model(name, batch=1)
        s_times, o_times = [], []
        for _ in range(args.repeat):  # alternate, so that load on the machine hits both alike
            s_times.append(with_session(graph, args.device, args.policy))
            o_times.append(one_by_one(graph, args.device, args.policy))
        s, o = statistics.median(s_times), statistics.median(o_times)
        print(f"{name:14} {len(graph.nodes):5d} {s:10.2f} {o:13.2f} {o / s:5.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
