"""Figures for leaving the tool: codegen, ONNX import, the HTML report (CPU only).

- codegen: time to write the module, its size, and on the CPU the generated module's latency
  beside eager PyTorch and streamplan's own one-stream executor (medians, side by side);
- ONNX: export (TorchScript exporter) and import times, and the largest difference between
  ``run``'s outputs and onnxruntime's;
- report: time to build and render the page, and its size.

    OMP_NUM_THREADS=1 python bench/interop.py --models squeezenet inception_v3 nasnet_a
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
import warnings
from pathlib import Path


def _median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["squeezenet", "inception_v3", "nasnet_a"])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    import torch

    from streamplan.app.codegen import codegen_policy
    from streamplan.app.context import make_context
    from streamplan.app.report import report_model
    from streamplan.frontends.torch_capture import capture
    from streamplan.models import load_model
    from streamplan.report.html import render_html
    from streamplan.runtime import run, run_and_compare
    from streamplan.runtime.interpret import params_from_module
    from streamplan.schedule import make_schedule
    from streamplan.schedule.settings import Settings
    from streamplan.zoo.registry import ZOO

    torch.set_num_threads(1)
    ctx = make_context(device="v100", max_streams=4, time_limit_s=5.0)
    tmp = Path(tempfile.mkdtemp())
    print("codegen (batch 1, CPU, one thread; latency medians of", args.repeat, "runs)")
    print(
        f"{'model':13} {'policy':7} {'write s':>8} {'lines':>6} {'eager ms':>9} {'module ms':>10} {'runtime ms':>11}"
    )
    for name in args.models:
        module, inputs = ZOO[name].load_factory()(1)
        module = module.eval()
        graph = capture(module, inputs, name=name)
        params = params_from_module(graph, module)
        with torch.no_grad():
            eager_ms = _median_ms(lambda m=module, x=inputs: m(*x), args.repeat)
        runtime_ms = run(
            graph,
            make_schedule(graph, "sequential", ctx),
            list(inputs),
            params=params,
            repeat=args.repeat,
            warmup=1,
        ).measured_ms
        for policy in ("nimble", "ios"):
            t0 = time.perf_counter()
            generated = codegen_policy(graph, policy, ctx, model=name)
            write_s = time.perf_counter() - t0
            path = tmp / f"{name}_{policy}.py"
            path.write_text(generated.source)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            code = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(code)
            scheduled = getattr(code, generated.class_name)()
            scheduled.load_weights(module)
            with torch.no_grad():
                module_ms = _median_ms(lambda s=scheduled, x=inputs: s(*x), args.repeat)
            lines = generated.source.count("\n")
            print(
                f"{name:13} {policy:7} {write_s:8.2f} {lines:6d} {eager_ms:9.1f} {module_ms:10.1f} {runtime_ms:11.1f}"
            )

    print("\nONNX (TorchScript exporter, batch norms folded; run: nimble on CPU threads vs onnxruntime)")
    print(f"{'model':13} {'export s':>9} {'import s':>9} {'ops':>5} {'max abs diff':>13}")
    for name in args.models:
        module, inputs = ZOO[name].load_factory()(1)
        path = tmp / f"{name}.onnx"
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module.eval(), inputs, str(path), dynamo=False)
        export_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        graph = load_model(str(path))
        import_s = time.perf_counter() - t0
        cmp = run_and_compare(str(path), "nimble", ctx=ctx, graph=graph)
        print(f"{name:13} {export_s:9.2f} {import_s:9.2f} {len(graph.nodes):5d} {cmp.max_abs_error:13.2e}")

    print("\nreport (every policy, v100 profile)")
    print(f"{'model':13} {'build s':>8} {'render s':>9} {'MiB':>6}")
    for name in args.models:
        graph = load_model(name)
        t0 = time.perf_counter()
        policies = ["sequential", "memory", "wavefront", "asap", "nimble", "ios"]
        settings = Settings(max_streams=ctx.max_streams, time_limit_s=ctx.time_limit_s)
        report = report_model(graph, policies, settings, pareto_points=0)  # as measured before the front
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        page = render_html(report)
        render_s = time.perf_counter() - t0
        print(f"{name:13} {build_s:8.1f} {render_s:9.2f} {len(page) / 2**20:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
