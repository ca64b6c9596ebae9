"""What codegen's guarantees cost: writing a module with and without reading it back, side by side.

``generate_module`` builds the module as an ``ast`` tree, lays it out, then parses its own
text and requires the tree it built, and checks the parsed module against what codegen
writes (``codegen.check``). This times the whole, and the same with those two steps turned
off (the layout alone), alternately in one process so that both see the same load; medians.

    OMP_NUM_THREADS=1 python bench/codegen_checks.py --models squeezenet inception_v3 nasnet_a bert_base
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import statistics
import time


@contextlib.contextmanager
def unchecked():
    """``generate_module`` without reading its text back or checking it (for this measurement)."""
    import streamplan.codegen.module as module
    import streamplan.codegen.render as render

    def layout_only(block):
        return "\n".join(render.lines(block, 0)) + "\n", ast.Module(body=[], type_ignores=[])

    saved = module.write_module, module.module_problems
    module.write_module, module.module_problems = layout_only, lambda tree: []
    try:
        yield
    finally:
        module.write_module, module.module_problems = saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["squeezenet", "inception_v3", "nasnet_a", "bert_base"])
    ap.add_argument("--policy", default="nimble")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)

    from streamplan.codegen import generate_module
    from streamplan.models import load_model
    from streamplan.schedule import make_schedule
    from streamplan.schedule.context import ScheduleContext

    ctx = ScheduleContext(max_streams=4, time_limit_s=5.0)
    print(f"codegen with and without reading back and checking ({args.policy}, medians of {args.repeat})")
    print(f"{'model':14} {'lines':>6} {'checked ms':>11} {'layout only ms':>15} {'checks share':>13}")
    for name in args.models:
        graph = load_model(name)
        schedule = make_schedule(graph, args.policy, ctx)
        source = generate_module(graph, schedule)
        full, bare = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            generate_module(graph, schedule)
            full.append(time.perf_counter() - t)
            with unchecked():
                t = time.perf_counter()
                assert generate_module(graph, schedule) == source  # the same text, unread
                bare.append(time.perf_counter() - t)
        f, b = statistics.median(full) * 1e3, statistics.median(bare) * 1e3
        print(f"{name:14} {source.count(chr(10)):6d} {f:11.1f} {b:15.1f} {(f - b) / f:12.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
