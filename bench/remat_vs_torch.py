"""PyTorch's partitioner against ``streamplan remat``, at the same real peaks, on training steps.

OMP_NUM_THREADS=1 .venv/bin/python bench/remat_vs_torch.py [--models resnet50 inception_v3 bert_base gpt2]
    [--budgets 0.1 ... 1.0] [--batch 2] [--optimizer none|sgd|adam] [--plot docs/remat_vs_torch.png]

Both sides train the same module on the same inputs (the zoo's images, or 64-80 px with
``--small-images``; sequences cut to 32 tokens, or ``--seq``; the zoo's loss: cross-entropy against
fixed labels; a ``file.py:function`` model brings its own), in training mode. Without an optimizer
the step ends with the gradients; with ``--optimizer`` PyTorch runs ``torch.optim`` (one tensor at a
time, ``foreach=False``, as the captured update does) after the backward, and its state exists before
the measured step (a warm-up step made it), as streamplan counts it resident. Batch norm uses batch statistics without
tracking running ones on both sides (``aot_module``'s backward refuses the in-place update
of the running statistics that a tracked batch norm makes in training mode).

*PyTorch*: ``aot_module`` with the min-cut partitioner under
``torch._functorch.config.activation_memory_budget`` = b, run once after a warm-up under
the runtime's CPU allocation tracker (``AllocatedBytes``: every storage a kernel
allocates; inputs, targets, parameters and buffers excluded) — the real peak — and under
``FlopCounterMode``: recomputed FLOPs = the step's FLOPs minus those at b = 1.0.

*streamplan*: the step captured (``capture_training``), then ``plan_remat`` with the budget
set to PyTorch's real peak at b (bytes), policy ``sequential`` on one stream (the peak is
then the worst case, which the CPU runtime's tracked allocations equal: tests/remat), and
once more at ``--floor-factor`` of the baseline to show how low it goes. Recomputed FLOPs:
the rewritten step's ops run in order under the same ``FlopCounterMode``, minus the plain
step's. Both columns count matmul/conv FLOPs as PyTorch's counter does.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from streamplan.runtime.measure import AllocatedBytes

MIB = 1 << 20
IMAGE = {"resnet50": 64, "inception_v3": 80}
SEQ = 32


def _problem(name: str, batch: int, small_images: bool):
    if ".py:" in name:
        from streamplan.training_models import training_problem_of

        return training_problem_of(name, batch=batch)[0]
    from streamplan.zoo.training import training_problem

    p = training_problem(name, batch)
    small = []
    for x in p.inputs:
        if isinstance(x, torch.Tensor) and x.dim() == 4 and small_images:
            s = IMAGE.get(name, 64)
            small.append(
                torch.randn(x.shape[0], x.shape[1], s, s, generator=torch.Generator().manual_seed(0))
            )
        elif isinstance(x, torch.Tensor) and x.dim() == 2:
            small.append(x[:, :SEQ].contiguous())
        else:
            small.append(x)
    targets = tuple(t[:, :SEQ].contiguous() if t.dim() == 2 else t for t in p.targets)
    for m in p.module.modules():  # batch statistics only: aot_module's backward refuses the
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):  # running stats' in-place update
            m.track_running_stats = False
            m.running_mean = m.running_var = m.num_batches_tracked = None
    return dataclasses.replace(p, inputs=tuple(small), targets=targets)


def _flops(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return counter.get_total_flops()


def _optimizer(module, name: str):
    if name == "none":
        return None
    if name == "adam":
        return torch.optim.Adam(module.parameters(), lr=1e-3, foreach=False)
    return torch.optim.SGD(
        module.parameters(), lr=1e-3, momentum=0.9 if name == "momentum" else 0.0, foreach=False
    )


def torch_side(problem, budget: float, repeat: int, optimizer: str = "none") -> dict:
    import torch._functorch.config as functorch_config
    from functorch.compile import aot_module, make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    module = problem.module.train()
    _trace_friendly_transformers()

    def compiler(gm, example_inputs):
        return make_boxed_func(gm.forward)

    opt = _optimizer(module, optimizer)

    def step(compiled):
        problem.compute_loss(compiled(*problem.inputs)).backward()
        if opt is not None:
            opt.step()

    with functorch_config.patch(activation_memory_budget=budget):
        compiled = aot_module(module, fw_compiler=compiler, bw_compiler=compiler,
                              partition_fn=min_cut_rematerialization_partition)  # fmt: skip
        step(compiled)  # compiles (the partition happens here); the optimizer's state is made
        module.zero_grad(set_to_none=True)
        state = [t for st in (opt.state.values() if opt is not None else ()) for t in st.values()]
        leaves = [*problem.inputs, *problem.targets, *module.parameters(), *module.buffers(), *state]
        tracker = AllocatedBytes.of_tensors([t for t in leaves if isinstance(t, torch.Tensor)])
        with tracker.mode():
            step(compiled)
        module.zero_grad(set_to_none=True)
        flops = _flops(lambda: step(compiled))
        times = []
        for _ in range(repeat):
            module.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            step(compiled)
            times.append((time.perf_counter() - t0) * 1e3)
        module.zero_grad(set_to_none=True)
    return {"peak_bytes": tracker.peak_bytes, "flops": flops, "ms": statistics.median(times)}


def _trace_friendly_transformers() -> None:
    """Hugging Face's mask helpers skip work when a mask turns out trivial — a data-dependent
    check that fails under ``aot_module``'s fake tensors, which they do not recognise as
    tracing. Saying it is tracing takes the general path (same results)."""
    try:
        import transformers.masking_utils as masking
    except ImportError:
        return
    masking.is_tracing = lambda *args, **kwargs: True


def graph_flops(graph, problem) -> int:
    from streamplan.runtime.interpret import call_node, initial_env
    from streamplan.runtime.training import run_inputs, run_params

    def go():
        env = initial_env(graph, run_inputs(graph, problem), run_params(graph, problem.module))
        with torch.no_grad():
            for node in graph.nodes:
                env.update(zip(node.outputs, call_node(node, env, "cpu"), strict=True))

    return _flops(go)


def streamplan_side(graph, problem, budget_bytes, base_flops: int) -> dict | None:
    from streamplan.app import plan_remat
    from streamplan.errors import BudgetError
    from streamplan.schedule import ScheduleContext

    ctx = ScheduleContext(max_streams=1, time_limit_s=10)
    t0 = time.perf_counter()
    try:
        plan = plan_remat(graph, budget_bytes, policy="sequential", ctx=ctx, levels=12, rounds=1)
    except BudgetError:
        return None
    return {
        "peak_bytes": plan.worst_case_peak_bytes,
        "baseline_bytes": plan.baseline_worst_case_peak_bytes,
        "recomputed_ops": plan.recomputed_ops,
        "added_ms": plan.added_compute_ms,
        "baseline_ms": plan.baseline_makespan_ms,
        "flops": graph_flops(plan.graph, problem) - base_flops,
        "search_s": time.perf_counter() - t0,
    }


def main() -> None:
    from streamplan.frontends.training import capture_training

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["resnet50", "inception_v3", "bert_base", "gpt2"])
    ap.add_argument("--budgets", type=float, nargs="+", default=[round(0.1 * k, 1) for k in range(1, 11)])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--optimizer", default="none", choices=["none", "sgd", "momentum", "adam"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--floor-factors", type=float, nargs="+", default=[0.6, 0.5, 0.4])
    ap.add_argument("--small-images", action="store_true", help="64-80 px images instead of the zoo's")
    ap.add_argument("--plot", default=None, help="write the curves (peak vs recomputed GFLOP) to this PNG")
    args = ap.parse_args()
    torch.set_num_threads(1)
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {}
    print("| model | activation_memory_budget | PyTorch real peak MiB | PyTorch recomputed GFLOP | "
          "streamplan worst-case peak MiB | streamplan recomputed GFLOP (ops, simulated added ms) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in args.models:
        problem = _problem(name, args.batch, args.small_images)
        graph = capture_training(problem, optimizer=args.optimizer, name=name)
        base_flops = graph_flops(graph, problem)
        rows = {
            b: torch_side(problem, b, args.repeat, args.optimizer)
            for b in sorted(set(args.budgets) | {1.0}, reverse=True)
        }
        full = rows[1.0]["flops"]
        curve = curves.setdefault(name, {"PyTorch": [], "streamplan": []})
        for b in sorted(args.budgets):
            r = rows[b]
            s = streamplan_side(graph, problem, r["peak_bytes"], base_flops)
            tflops = (r["flops"] - full) / 1e9
            curve["PyTorch"].append((r["peak_bytes"] / MIB, tflops))
            cell = "no plan"
            if s is not None:
                curve["streamplan"].append((s["peak_bytes"] / MIB, s["flops"] / 1e9))
                cell = f"{s['peak_bytes'] / MIB:.2f} | {s['flops'] / 1e9:.3f} ({s['recomputed_ops']}, {s['added_ms']:.3f} of {s['baseline_ms']:.3f})"
            print(f"| {name} | {b:.1f} | {r['peak_bytes'] / MIB:.2f} | {tflops:.3f} | {cell} |", flush=True)
        base = None
        for f in args.floor_factors:
            s = streamplan_side(graph, problem, f"{f}x", base_flops)
            if s is None:
                print(f"| {name} | streamplan at {f}x | | | no plan | |", flush=True)
                continue
            base = s["baseline_bytes"]
            curve["streamplan"].append((s["peak_bytes"] / MIB, s["flops"] / 1e9))
            print(f"| {name} | streamplan at {f}x of {base / MIB:.2f} | | | {s['peak_bytes'] / MIB:.2f} | "
                  f"{s['flops'] / 1e9:.3f} ({s['recomputed_ops']}, {s['added_ms']:.3f} of {s['baseline_ms']:.3f}) |",
                  flush=True)  # fmt: skip
        if args.plot:  # after each model: a long run leaves the plot of what it measured
            _plot(curves, args.plot)


def _plot(curves, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(4.2 * len(curves), 3.6), squeeze=False)
    for ax, (name, sides) in zip(axes[0], curves.items(), strict=True):
        for label, pts, style in (("PyTorch min-cut + budget", sides["PyTorch"], "o-"),
                                  ("streamplan remat", sides["streamplan"], "s--")):  # fmt: skip
            pts = sorted(pts)
            if pts:
                ax.plot([p for p, _ in pts], [f for _, f in pts], style, label=label)
        ax.set_title(f"{name} training step")
        ax.set_xlabel("real peak (MiB)")
        ax.set_ylabel("recomputed GFLOP")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
