"""Check the fusion rules against Inductor's own kernels on the CPU: counts and which ATen ops land together.

For each model, ``torch.compile(model, backend="inductor")`` runs up to Inductor's
scheduler (after its fusion passes) and the kernels it would generate are read
there, before any C++ is compiled: each scheduler node is one kernel (a library call
for convolutions and matmuls, generated code for the rest). Beside them, streamplan's
``fuse`` of the same model's captured graph. Both sides are reduced to *signatures*:
the set of op families in a kernel (``conv``, ``relu``, ``add``, ...; views and
inference dropout dropped, a batch-norm folded into a convolution dropped, ops that read
only weights dropped when the weights are frozen: Inductor folds those into constants),
and compared as multisets. Agreement = kernels whose signature is matched on the other
side / the larger kernel count.

Inductor is set up as for inference on a GPU: weights frozen (``freezing``, which folds
batch-norms into convolutions), and the CPU-only oneDNN weight prepacking (which would
also fuse ReLUs into convolutions) off. Kernels that only copy an input into the layout a
convolution wants are counted apart (``layout``): they are not fusion decisions.

    OMP_NUM_THREADS=1 .venv/bin/python bench/fusion_vs_inductor.py [--models ...] [--no-freeze]

``--no-freeze``: Inductor's default (batch-norms stay pointwise code), compared with the
rules without batch-norm folding. Slow (Dynamo and Inductor lowering per model: about a
minute for NASNet on one core); a bench, not a test.
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from streamplan.cost.op_classes import VIEW_OPS, op_base_name
from streamplan.fusion import FusionRules, fuse
from streamplan.fusion.kinds import op_class
from streamplan.ir.fused import folded_pair, fused_parts, is_concat_in_place

MODELS = [
    "seed-concat",
    "seed-example2",
    "squeezenet",
    "inception_v3",
    "resnet50",
    "randwire",
    "nasnet_a",
    "bert_base",
    "gpt2",
]
IMAGE_SIZE = 96  # kernels do not depend on the image size; smaller inputs lower faster
FAMILY = {
    "conv2d": "conv",
    "convolution": "conv",
    "_convolution": "conv",
    "linear": "matmul",
    "addmm": "matmul",
    "mm": "matmul",
    "bmm": "matmul",
    "matmul": "matmul",
    "baddbmm": "matmul",
    "_native_batch_norm_legit_no_training": "batch_norm",
    "max_pool2d_with_indices": "max_pool2d",
    "_low_memory_max_pool2d_with_offsets": "max_pool2d",
    "_low_memory_max_pool_with_offsets": "max_pool2d",
    "adaptive_avg_pool2d": "mean",
    "_adaptive_avg_pool2d": "mean",
    "_softmax": "softmax",
    "native_layer_norm": "layer_norm",
    "constant_pad_nd": "pad",
    "_to_copy": "to",
}
DROPPED = set(VIEW_OPS) | {"dropout", "native_dropout", "clone", "contiguous", "lift_fresh_copy"}
GEMMS = {"conv", "matmul"}


def family(name: str) -> str | None:
    base = name.split(".")[-1] if name.startswith("aten.") else name
    base = op_base_name(name) if "." in name else base
    if base in DROPPED or base.startswith(("inductor_", "_frozen_param")):  # layouts, frozen weights
        return None
    return FAMILY.get(base, base)


@dataclass
class Kernels:
    """Kernel signatures of one side, and the layout-copy kernels counted apart."""

    signatures: collections.Counter
    layout: int = 0

    @property
    def count(self) -> int:
        return sum(self.signatures.values())


# -- Inductor's side ---------------------------------------------------------------


class _Scheduled(Exception):
    """Raised from inside Inductor once its kernels are known (nothing is compiled)."""


def inductor_kernels(module: torch.nn.Module, inputs: tuple, *, freeze: bool) -> Kernels:
    import torch._dynamo
    import torch._inductor.config as config
    from torch._inductor import scheduler

    found = Kernels(collections.Counter())
    original = scheduler.Scheduler._codegen

    def record(self, nodes):
        for node in nodes:
            if type(node).__name__ == "NopKernelSchedulerNode":
                continue
            sig = _inductor_signature(node)
            if sig is None:
                found.layout += 1
            elif sig:
                found.signatures[sig] += 1
        raise _Scheduled

    torch._dynamo.reset()
    scheduler.Scheduler._codegen = record
    try:
        with config.patch({"freezing": freeze, "cpp.weight_prepack": False}), torch.no_grad():
            try:
                torch.compile(module, backend="inductor", fullgraph=True)(*inputs)
            except Exception as e:  # the compile stops at _Scheduled, wrapped by Dynamo
                if not _caused_by_scheduled(e):
                    raise
    finally:
        scheduler.Scheduler._codegen = original
        torch._dynamo.reset()
    return found


def _caused_by_scheduled(e: BaseException | None) -> bool:
    while e is not None:
        if isinstance(e, _Scheduled):
            return True
        e = e.__cause__ or e.__context__
    return False


def _inductor_signature(node) -> frozenset | None:
    """The op families of one scheduler node (None: a copy into a layout, not a fusion)."""
    if node.is_extern():
        ir = node.node
        name = str(
            getattr(ir, "python_kernel_name", "") or getattr(ir, "op_overload", "") or type(ir).__name__
        )
        fam = family(name.split(".")[-1]) or name
        return frozenset({fam})
    fams: set[str] = set()
    for sn in node.get_nodes():
        for origin in getattr(sn.node, "origins", None) or ():
            aten = origin.meta.get("original_aten")
            name = str(getattr(aten, "_overloadpacket", aten)) if aten is not None else str(origin.target)
            fam = family(name)
            if fam is not None:
                fams.add(fam)
    fams -= GEMMS  # generated code never runs a convolution: such origins are layout copies
    return frozenset(fams) if fams else None


# -- streamplan's side -------------------------------------------------------------


def streamplan_kernels(graph, rules: FusionRules, *, frozen: bool) -> tuple[Kernels, int]:
    fused = fuse(graph, rules).graph
    weights_only = _weights_only(graph) if frozen else set()
    found = Kernels(collections.Counter())
    for node in fused.nodes:
        if op_class(fused, node) == "view" or is_concat_in_place(node):
            continue
        parts = fused_parts(node) or (node,)
        fold = folded_pair(node)
        fams = {
            family(p.op) for p in parts if not (fold and p.id == fold[1]) and p.id not in weights_only
        } - {None}
        if fams:
            found.signatures[frozenset(fams)] += 1
    return found, sum(1 for n in graph.nodes if op_class(graph, n) != "view")


def _weights_only(graph) -> set[str]:
    """Ops that read only weights (and other such ops): frozen, Inductor computes them once at
    compile time (constant folding). streamplan keeps them in the kernel that uses them, so they
    do not change the kernel count; they are left out of the signatures."""
    constant = {v for v, value in graph.values.items() if value.kind in ("param", "buffer", "constant")}
    found = set()
    for node in graph.nodes:
        if node.inputs and all(v in constant for v in node.inputs):
            found.add(node.id)
            constant.update(node.outputs)
    return found


# -- models ------------------------------------------------------------------------


class _SeedConcat(torch.nn.Module):
    def forward(self, x):
        p0 = torch.atan(x)
        return torch.cat([torch.atan(torch.atan(p0)), torch.atan(torch.atan(p0))])


class _SeedExample2(torch.nn.Module):
    def forward(self, x):
        a = torch.atan(x)
        return torch.atan(torch.atan(a)) + torch.atan(torch.atan(a))


def load(name: str) -> tuple[torch.nn.Module, tuple]:
    if name == "seed-concat":
        return _SeedConcat(), (torch.randn(256, 1024),)
    if name == "seed-example2":
        return _SeedExample2(), (torch.randn(256, 1024),)
    from streamplan.zoo.registry import ZOO

    module, inputs = ZOO[name].load_factory()(1)
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    small = []
    for x in inputs:
        if x.dim() == 4:
            x = torch.randn(x.shape[0], x.shape[1], IMAGE_SIZE, IMAGE_SIZE)
        elif x.dim() == 2 and not x.is_floating_point():
            x = x[:, :32].contiguous()
        small.append(x)
    return module.eval(), tuple(small)


def agreement(a: Kernels, b: Kernels) -> float:
    matched = sum(min(n, b.signatures.get(sig, 0)) for sig, n in a.signatures.items())
    return matched / max(a.count, b.count, 1)


def _fmt(sig: Iterable[str]) -> str:
    return "+".join(sorted(sig))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--no-freeze", action="store_true", help="Inductor's default: batch-norms not folded")
    ap.add_argument("--diff", type=int, default=4, help="show this many unmatched signatures per side")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    from streamplan.frontends.torch_capture import capture

    freeze = not args.no_freeze
    rules = FusionRules(fold_batch_norm=freeze)
    print(f"Inductor {torch.__version__} on the CPU, freezing={freeze}, cpp.weight_prepack=False")
    rows = []
    for name in args.models:
        module, inputs = load(name)
        t0 = time.perf_counter()
        theirs = inductor_kernels(module, inputs, freeze=freeze)
        t_ind = time.perf_counter() - t0
        ours, unfused = streamplan_kernels(capture(module, inputs, name=name), rules, frozen=freeze)
        score = agreement(ours, theirs)
        rows.append((name, unfused, theirs, ours, score))
        print(
            f"{name:<14} ops launching kernels {unfused:4d}   Inductor {theirs.count:4d} kernels "
            f"(+{theirs.layout} layout copies)   streamplan {ours.count:4d}   same kernels {score:6.1%}   "
            f"[{t_ind:.0f} s]",
            flush=True,
        )
        for label, x, y in (("only Inductor", theirs, ours), ("only streamplan", ours, theirs)):
            extra = x.signatures - y.signatures
            if extra:
                shown = ", ".join(f"{n}x {_fmt(s)}" for s, n in extra.most_common(args.diff))
                print(f"    {label}: {shown}")
    total_ours = sum(r[3].count for r in rows)
    total_theirs = sum(r[2].count for r in rows)
    matched = sum(r[4] * max(r[2].count, r[3].count) for r in rows)
    print(
        f"all models: Inductor {total_theirs} kernels, streamplan {total_ours}, "
        f"same kernels {matched / max(total_ours, total_theirs, 1):.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
