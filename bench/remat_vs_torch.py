"""PyTorch's own answer, measured: AOTAutograd's min-cut partitioner under
``torch._functorch.config.activation_memory_budget``, for real training steps on the CPU.

OMP_NUM_THREADS=1 .venv/bin/python bench/remat_vs_torch.py [--models resnet50 bert_base] [--budgets 0.1 ... 1.0]

For each model (small inputs so that a step runs on one CPU thread) and each budget, the
forward+backward step is compiled by ``aot_module`` with the min-cut partitioner, then run
once (after a warm-up) with the runtime's CPU allocation tracker
(``streamplan.runtime.measure.AllocatedBytes``: every storage a kernel allocates, inputs and
parameters excluded) and a FLOP counter. Reported per budget: the real peak, the bytes the
forward saves for the backward, the FLOPs recomputed (the step's FLOPs minus those at budget
1.0) and the step time — so the peak can be read against the knob PyTorch turns.

streamplan's side of the comparison — ``streamplan remat MODEL --train`` at the same real
peaks — needs the zoo's training-step graphs, which this script does not have yet: it prints
PyTorch's curve only.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from streamplan.runtime.measure import AllocatedBytes
from streamplan.zoo.registry import ZOO

MIB = 1 << 20
IMAGE = {"resnet50": 64, "inception_v3": 80}
SEQ = 32


class _FirstTensor(torch.nn.Module):
    """A model whose forward returns a tensor (the first one of whatever it returns)."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        out = self.inner(*args)
        if isinstance(out, torch.Tensor):
            return out
        if hasattr(out, "last_hidden_state"):
            return out.last_hidden_state
        return out[0]


def _model(name: str):
    module, inputs = ZOO[name].load_factory()(1)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    small = []
    for x in inputs:
        if x.dim() == 4:
            s = IMAGE.get(name, 64)
            small.append(
                torch.randn(x.shape[0], x.shape[1], s, s, generator=torch.Generator().manual_seed(0))
            )
        elif x.dim() == 2:
            small.append(x[:, :SEQ].contiguous())
        else:
            small.append(x)
    return _FirstTensor(module.eval()), tuple(small)


def _step(compiled, inputs) -> None:
    out = compiled(*inputs)
    out.float().sum().backward()


def measure(name: str, budget: float, repeat: int) -> dict:
    import torch._functorch.config as functorch_config
    from functorch.compile import aot_module, make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch.utils.flop_counter import FlopCounterMode

    module, inputs = _model(name)
    saved: list[int] = []

    def fw_compiler(gm, example_inputs):
        outs = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
        vals = [o.meta.get("val") for o in outs if hasattr(o, "meta")]
        saved.append(sum(v.untyped_storage().nbytes() for v in vals if isinstance(v, torch.Tensor)))
        return make_boxed_func(gm.forward)

    def bw_compiler(gm, example_inputs):
        return make_boxed_func(gm.forward)

    with functorch_config.patch(activation_memory_budget=budget):
        compiled = aot_module(
            module,
            fw_compiler=fw_compiler,
            bw_compiler=bw_compiler,
            partition_fn=min_cut_rematerialization_partition,
        )
        _step(compiled, inputs)  # compiles (the partition happens here)
        module.zero_grad(set_to_none=True)
        tracker = AllocatedBytes.of_tensors([*inputs, *module.parameters(), *module.buffers()])
        with tracker.mode():
            _step(compiled, inputs)
        peak = tracker.peak_bytes
        module.zero_grad(set_to_none=True)
        flops = FlopCounterMode(display=False)
        with flops:
            _step(compiled, inputs)
        times = []
        for _ in range(repeat):
            module.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            _step(compiled, inputs)
            times.append((time.perf_counter() - t0) * 1e3)
    return {
        "peak_bytes": peak,
        "saved_bytes": saved[-1] if saved else 0,
        "flops": flops.get_total_flops(),
        "ms": statistics.median(times),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["resnet50", "inception_v3", "bert_base", "gpt2"])
    ap.add_argument("--budgets", type=float, nargs="+", default=[round(0.1 * k, 1) for k in range(1, 11)])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(
        "| model | activation_memory_budget | real peak MiB | forward outputs MiB (saved + result) | recomputed GFLOP | step ms |"
    )
    print("|---|---|---|---|---|---|")
    for name in args.models:
        rows = {b: measure(name, b, args.repeat) for b in sorted(set(args.budgets) | {1.0}, reverse=True)}
        full = rows[1.0]["flops"]
        for b in sorted(args.budgets):
            r = rows[b]
            print(
                f"| {name} | {b:.1f} | {r['peak_bytes'] / MIB:.2f} | {r['saved_bytes'] / MIB:.2f} | "
                f"{(r['flops'] - full) / 1e9:.3f} | {r['ms']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
