"""The micro-benchmarks ``streamplan calibrate`` runs, as graphs the runtime executes.

- ``op_bench_graph``: one captured module that applies every op kind the cost model
  distinguishes (``cost.kinds``) at several sizes, each on its own input: dense k x k
  and 1 x 1 convolutions and depthwise ones (with channels in whole vector blocks and
  not) over a spread of implicit-GEMM shapes,
  linear and batched matmuls, attention, pointwise ops, norms, softmax, pooling,
  reductions, copies. Run once per repetition in graph order, each op is one sample
  of its kind's time curve. Each kind's sizes run back to back after a warm-up run of
  its first size that is not a sample (``OpBench.is_sample``), so that every sample
  finds its kind's code warm, as ops in a model do.
- ``chain_graph``: a chain of ``n`` tiny ops (one element each): per-op overheads.
- ``pingpong_schedule``: the same chain on two streams, each op waiting for the one
  before it on the other stream: the cost of a cross-stream wait.
- ``corun_cases``: ``k`` independent chains of compute-bound (convolution),
  memory-bound (large elementwise) or, on the CPU, small (mostly interpreter work)
  ops, run on one stream and on ``k`` streams: how much concurrent ops slow each other.

Sizes depend on the target: a GPU gets larger problems (a batch of 8 and bigger
matrices) so that its kernels last long enough to time. ``quick`` keeps a few sizes
per kind (what the tests run, in seconds).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from streamplan.frontends.builder import GraphBuilder
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.schedule.events import with_derived_waits

MAX_ELEMS = 1 << 22  # no benchmark tensor above 16 MiB of float32


@dataclass(frozen=True)
class OpBench:
    """The op micro-benchmarks as a module (its parameters), its inputs and its captured graph."""

    module: nn.Module
    inputs: tuple[torch.Tensor, ...]
    graph: Graph
    warmups: frozenset[str] = frozenset()  # the nodes of warm-up runs (see ``is_sample``)

    def is_sample(self, node: Any) -> bool:
        """True for an op whose time is a sample of its kind: not a prep op (``is_prep``) and not a
        warm-up (each kind's series of sizes starts with an untimed run of its first size: the
        first op of a kind after other kinds runs with its code cold, 15-60 µs slower for a small
        op, which an op in a model, where the same few kinds repeat every few ops, does not pay)."""
        return not is_prep(node) and node.id not in self.warmups


PREP_OP = "aten.neg.default"  # what makes each benchmark's input (not itself a sample)


def is_prep(node: Any) -> bool:
    """True for the op that makes a benchmark's input fresh in cache (``PREP_OP``)."""
    return node.op == PREP_OP


class _Bench(nn.Module):
    """Applies benchmark ``k`` to a fresh copy of input ``k`` (``neg``: in a model an op's input
    was just written by the op before it, so it is warm in cache, unlike a graph input that
    waited through every other benchmark); every result is an output (nothing is dead code)."""

    def __init__(self, ops: list[Callable[[torch.Tensor], Any]], modules: list[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(modules)  # registers the parameters the ops use
        self.ops = ops

    def forward(self, *xs: torch.Tensor) -> tuple[Any, ...]:
        return tuple(op(torch.neg(x)) for op, x in zip(self.ops, xs, strict=True))


def op_bench_graph(target: str = "cpu", *, quick: bool = False, seed: int = 0) -> OpBench:
    """The op micro-benchmarks for ``target`` (``cpu`` or ``cuda``), captured once.

    ``quick`` builds a smaller set with the graph builder instead (no capture: what the
    tests run): convolutions, matmuls, two pointwise ops, pooling and a concatenation.
    """
    if quick:
        return OpBench(nn.Module(), (), quick_bench_graph(target, seed=seed))
    from streamplan.frontends.torch_capture import capture

    rng = random.Random(seed)
    gpu = target.startswith("cuda")
    batch = 8 if gpu else 1
    cap_flops = 2e10 if gpu else 3e8
    ops: list[Callable[[torch.Tensor], Any]] = []
    modules: list[nn.Module] = []
    inputs: list[torch.Tensor] = []
    gen = torch.Generator().manual_seed(seed)

    warmups: list[int] = []  # the inputs of warm-up benchmarks (not samples)

    def add(bench: Bench, *, warmup: bool = False) -> None:
        x_shape, fn, module = bench
        if warmup:
            warmups.append(len(inputs))
        inputs.append(torch.randn(*x_shape, generator=gen))
        ops.append(fn)
        if module is not None:
            modules.append(module)

    def series(benches: list[Callable[[], Bench]]) -> None:
        """One kind at several sizes back to back, after a warm-up run of its first size."""
        if benches:
            add(benches[0](), warmup=True)
        for make in benches:
            add(make())

    n_conv = 6 if quick else 28
    n_depthwise = max(3, n_conv // 2)
    for kind, count in (("conv", n_conv), ("conv1x1", n_conv), ("depthwise", n_depthwise),
                        ("depthwise_unaligned", n_depthwise)):  # fmt: skip
        convs = []
        for cin, cout, hw, k, stride in _conv_shapes(rng, kind, count, batch, cap_flops):
            groups = cin if kind.startswith("depthwise") else 1
            conv = partial(nn.Conv2d, cin, cout, k, stride=stride, padding=k // 2, groups=groups)
            convs.append(partial(_module_bench, (batch, cin, hw, hw), conv, bias=kind != "conv"))
        series(convs)
    gemms = _gemm_shapes(rng, 5 if quick else 16, batch, cap_flops)
    series([partial(_module_bench, (m, k_in), partial(nn.Linear, k_in, n_out)) for m, k_in, n_out in gemms])
    bmms = []
    for b, m, k_in, n_out in _bmm_shapes(rng, 2 if quick else 6, batch, cap_flops):
        w = torch.randn(b, k_in, n_out, generator=gen)
        bmms.append(lambda b=b, m=m, k_in=k_in, w=w: ((b, m, k_in), lambda x: torch.bmm(x, w), None))
    series(bmms)
    series(
        [
            lambda b=b, h=h, s=s, d=d: (
                (3, b, h, s, d),
                lambda x: F.scaled_dot_product_attention(x[0], x[1], x[2]),
                None,
            )
            for b, h, s, d in ((batch, 4, 64, 32), (batch, 8, 128, 64), (batch, 16, 256, 8))[
                : 1 if quick else 3
            ]
        ]
    )
    sizes = _sizes(quick, gpu)
    unary = {"relu": F.relu, "gelu": F.gelu, "sigmoid": torch.sigmoid, "silu": F.silu, "tanh": torch.tanh,
             "hardswish": F.hardswish}  # fmt: skip
    for name, fn in unary.items():
        if quick and name not in ("relu", "sigmoid"):
            continue
        series([lambda n=n, fn=fn: ((n,), fn, None) for n in sizes])
    for fn in (torch.add, torch.mul):
        series([lambda n=n, fn=fn: ((2, n), lambda x: fn(x[0], x[1]), None) for n in sizes])
    if not quick:
        # in-place variants (``relu_``, ``silu_``, ``add_``, ``mul_``: models' activations and
        # residual sums): no output to allocate, the input's cache lines written back
        inplace = {"relu_": torch.relu_, "silu_": partial(F.silu, inplace=True)}
        for fn in inplace.values():
            series([lambda n=n, fn=fn: ((n,), fn, None) for n in sizes])
        for fn in (torch.Tensor.add_, torch.Tensor.mul_):
            series([lambda n=n, fn=fn: ((2, n), lambda x: fn(x[0], x[1]), None) for n in sizes])
    images = [_image(n) for n in sizes]
    series([partial(_module_bench, (1, c, hw, hw), partial(nn.BatchNorm2d, c)) for c, hw in images])
    series(
        [
            partial(_module_bench, (max(1, n // c), c), partial(nn.LayerNorm, c))
            for n, (c, _) in zip(sizes, images)
        ]
    )
    series([lambda n=n: ((max(1, n // 128), 128), lambda x: torch.softmax(x, dim=-1), None) for n in sizes])
    image_ops = (
        lambda x: F.max_pool2d(x, 3, 2, 1),
        lambda x: F.max_pool2d(x, 3, 1, 1),  # stride 1: its own kind
        lambda x: F.avg_pool2d(x, 3, 2, 1),
        lambda x: F.avg_pool2d(x, 3, 1, 1),
        lambda x: F.adaptive_avg_pool2d(x, 1),
        lambda x: x.mean(dim=(2, 3)),
        lambda x: x.transpose(1, 3).contiguous(),
    )
    for fn in image_ops:
        series([lambda c=c, hw=hw, fn=fn: ((1, c, hw, hw), fn, None) for c, hw in images])
    series(
        [
            lambda c=c, hw=hw: ((2, c, hw, hw), lambda x: torch.cat([x[0], x[1]], dim=1), None)
            for c, hw in images
        ]
    )
    module = _Bench(ops, modules).eval()
    graph = _only_last_output(capture(module, tuple(inputs), name="calibrate-ops"))
    return OpBench(module, tuple(inputs), graph, _downstream(graph, [graph.inputs[i] for i in warmups]))


Bench = tuple[tuple[int, ...], Callable[[torch.Tensor], Any], "nn.Module | None"]  # (input shape, op, module)


def _module_bench(x_shape: tuple[int, ...], make: Callable[..., nn.Module], **kwargs: Any) -> Bench:
    """A benchmark applying a fresh module (``make(**kwargs)``, in eval mode) to an input of ``x_shape``."""
    module = make(**kwargs).eval()
    return x_shape, module, module


def _downstream(graph: Graph, values: list[str]) -> frozenset[str]:
    """The ids of the nodes that read ``values``, directly or through other nodes."""
    reached = set(values)
    out = set()
    for n in graph.nodes:  # in topological order
        if any(v in reached for v in n.inputs):
            out.add(n.id)
            reached.update(n.outputs)
    return frozenset(out)


def _only_last_output(graph: Graph) -> Graph:
    """The graph returning one benchmark's result: every other result is freed as soon as it is
    made, as a model frees its activations, so the allocator hands each op memory it has touched
    before (a result kept to the end would make every op fault in fresh pages: ten times slower
    for a megabyte, which no op in a model pays)."""
    return graph.replace(outputs=graph.outputs[-1:])


def quick_bench_graph(target: str = "cpu", *, seed: int = 0) -> Graph:
    """A few sizes of the op kinds the graph builder knows (random weights at run time)."""
    rng = random.Random(seed)
    gpu = target.startswith("cuda")
    batch = 8 if gpu else 1
    b = GraphBuilder("calibrate-ops-quick")
    outs: list[str] = []
    fresh = b.input  # every benchmark reads the output of a prep op (see _Bench)

    def warm(name: str, shape: tuple[int, ...]) -> str:
        return b.unary("neg", fresh(name, shape), name=f"{name}_prep")

    cap = 2e10 if gpu else 1e8
    for kind in ("conv", "conv1x1", "depthwise"):
        for i, (cin, cout, hw, k, stride) in enumerate(_conv_shapes(rng, kind, 4, batch, cap)):
            x = warm(f"{kind}{i}_x", (batch, cin, hw, hw))
            groups = cin if kind == "depthwise" else 1
            outs.append(b.conv2d(x, cout, k, stride=stride, padding=k // 2, groups=groups, name=f"{kind}{i}"))
    for i, (m, k_in, n_out) in enumerate(_gemm_shapes(rng, 4, batch, cap)):
        x, w = warm(f"mm{i}_x", (m, k_in)), b.param(f"mm{i}_w", (k_in, n_out))
        outs.append(b.matmul(x, w, name=f"mm{i}"))
    for n in (1 << 12, 1 << 16, 1 << 20):
        c, hw = _image(n)
        for op in ("relu", "sigmoid"):
            outs.append(b.unary(op, warm(f"{op}{n}_x", (n,)), name=f"{op}{n}"))
        outs.append(b.add(warm(f"add{n}_x", (n,)), warm(f"add{n}_y", (n,)), name=f"add{n}"))
        img = warm(f"img{n}", (1, c, hw, hw))
        outs.append(b.pool2d(img, "max", 3, stride=2, padding=1, name=f"maxpool{n}"))
        outs.append(b.concat([img, warm(f"cat{n}_y", (1, c, hw, hw))], name=f"cat{n}"))
    return _only_last_output(b.build(outs))


def _sizes(quick: bool, gpu: bool) -> tuple[int, ...]:
    sizes = (1 << 12, 1 << 15, 1 << 18, 1 << 20, 1 << 22) if not gpu else (1 << 14, 1 << 18, 1 << 21, 1 << 22)
    return sizes[::2] if quick else sizes


def _image(n: int) -> tuple[int, int]:
    """(channels, side) of an image-shaped tensor of about ``n`` elements."""
    for hw in (56, 28, 14, 7, 4, 2, 1):
        c = n // (hw * hw)
        if c >= 16:
            return c, hw
    return max(1, n), 1


def _conv_shapes(rng: random.Random, kind: str, count: int, batch: int, cap: float) -> list[tuple]:
    """``count`` convolutions spread over the shapes CNNs use, none above ``cap`` FLOPs."""
    shapes: list[tuple] = []
    tries = 0
    while len(shapes) < count and tries < 50 * count:
        tries += 1
        hw = rng.choice((7, 14, 28, 56, 112))
        depthwise = kind.startswith("depthwise")
        k = 1 if kind == "conv1x1" else rng.choice((3, 3, 5, 7) if depthwise else (3, 3, 3, 5, 7))
        stride = rng.choice((1, 1, 1, 2)) if kind != "conv1x1" else 1
        if depthwise:
            cin = cout = rng.choice((16, 32, 64, 128, 256, 512, 1024))
            if kind == "depthwise_unaligned":  # 22, 44, 86, 162, ...: never a multiple of 8
                cin = cout = cin + cin // 4 + rng.choice((2, 4, 6))
            flops = 2 * batch * cout * (hw // stride) ** 2 * k * k
        else:
            cin = rng.choice(
                (3, 16, 32, 64, 128, 256, 512, 1024) if kind == "conv" else (16, 32, 64, 128, 256, 512, 1024)
            )
            cout = rng.choice((16, 32, 64, 128, 256, 512, 1024))
            flops = 2 * batch * cout * (hw // stride) ** 2 * cin * k * k
        if flops > cap or batch * cin * hw * hw > MAX_ELEMS or flops < 1e5:
            continue
        shapes.append((cin, cout, hw, k, stride))
    return shapes


def _gemm_shapes(rng: random.Random, count: int, batch: int, cap: float) -> list[tuple[int, int, int]]:
    shapes: list[tuple[int, int, int]] = []
    while len(shapes) < count:
        m = rng.choice((1, 8, 32, 128, 512, 2048)) * (batch if batch > 1 else 1)
        k = rng.choice((64, 256, 768, 1024, 2048, 4096))
        n = rng.choice((64, 256, 768, 1024, 3072, 4096))
        if 2 * m * n * k <= cap and m * k <= MAX_ELEMS and k * n <= MAX_ELEMS:
            shapes.append((m, k, n))
    return shapes


def _bmm_shapes(rng: random.Random, count: int, batch: int, cap: float) -> list[tuple[int, int, int, int]]:
    shapes: list[tuple[int, int, int, int]] = []
    while len(shapes) < count:
        b = rng.choice((4, 12, 48)) * batch
        m = rng.choice((16, 64, 128, 256))
        k = rng.choice((32, 64, 128))
        n = rng.choice((16, 64, 128, 256))
        if 2 * b * m * n * k <= cap:
            shapes.append((b, m, k, n))
    return shapes


def chain_graph(n: int = 200, *, size: int = 1) -> Graph:
    """``n`` ReLUs in a chain on a tensor of ``size`` elements (per-op overheads)."""
    b = GraphBuilder("calibrate-chain")
    x = b.input("x", (size,))
    for i in range(n):
        x = b.relu(x, name=f"r{i}")
    return b.build([x])


def probe_graph(n: int = 8) -> Graph:
    """The steadiness probe: ``n`` small convolutions, each with its ReLU (a few milliseconds of
    kernels and interpreter work on a CPU core), timed at every phase of a calibration. A quiet
    machine runs it in the same time each phase; how much it varies says how far the machine's
    speed drifted while the constants were measured."""
    b = GraphBuilder("calibrate-probe")
    x = b.input("x", (1, 32, 28, 28))
    for i in range(n):
        x = b.relu(b.conv2d(x, 32, 3, padding=1, name=f"conv{i}"), name=f"relu{i}")
    return b.build([x])


def view_chain_graph(n: int = 200) -> Graph:
    """``n`` transposes in a chain on a 2 x 2 tensor, then one ReLU (a view op's cost in the runtime)."""
    b = GraphBuilder("calibrate-views")
    x = b.input("x", (2, 2))
    for i in range(n):
        x = b.transpose(x, name=f"t{i}")
    return b.build([b.relu(x, name="out")])


def pingpong_schedule(graph: Graph) -> StreamSchedule:
    """A chain alternating between two streams: every op waits for the op before it."""
    ids = graph.node_ids
    return with_derived_waits(graph, ids, {op: i % 2 for i, op in enumerate(ids)}, "pingpong")


SMALL_C, SMALL_HW = 16, 14  # a convolution of tens of microseconds on a CPU core: mostly interpreter work


@dataclass(frozen=True)
class CorunCase:
    """``k`` independent chains of one kind of op: run on one stream and on ``k`` streams."""

    name: str
    graph: Graph
    streams: int

    def schedules(self) -> tuple[StreamSchedule, StreamSchedule]:
        """(all chains on one stream, chain i on stream i)."""
        chain_of = {op: int(op.split("_")[0][1:]) for op in self.graph.node_ids}
        position: dict[str, int] = {}
        seen: dict[int, int] = {}
        for op in self.graph.node_ids:
            position[op] = seen.get(chain_of[op], 0)
            seen[chain_of[op]] = position[op] + 1
        # launched round-robin over the chains, so that a host issuing in order keeps every stream fed
        ids = sorted(self.graph.node_ids, key=lambda op: (position[op], chain_of[op]))
        one = with_derived_waits(self.graph, ids, {op: 0 for op in ids}, "sequential")
        many = with_derived_waits(self.graph, ids, chain_of, f"{self.streams} streams")
        return one, many


def corun_cases(target: str = "cpu", *, quick: bool = False) -> tuple[CorunCase, ...]:
    """Compute-bound and memory-bound chains side by side, and one of each together; on the CPU
    also chains of small convolutions, mostly interpreter work (what the lock costs when several
    streams' threads want it)."""
    gpu = target.startswith("cuda")
    length = 4 if quick else 8
    conv_c, conv_hw = (128, 28) if not gpu else (256, 28)
    big = 1 << 21 if not gpu else 1 << 24
    cases = []
    kinds = {
        "compute": ["compute", "compute"],
        "memory": ["memory", "memory"],
        "mixed": ["compute", "memory"],
    }
    if not gpu:
        kinds["small"] = ["small", "small"]
    if not quick:
        kinds["compute x4"] = ["compute"] * 4
        kinds["memory x4"] = ["memory"] * 4
        if not gpu:
            kinds["small x4"] = ["small"] * 4
    for name, chains in kinds.items():
        b = GraphBuilder(f"calibrate-corun-{name}")
        outs = []
        for c, kind in enumerate(chains):
            if kind == "compute":
                x = b.input(f"x{c}", (8 if gpu else 1, conv_c, conv_hw, conv_hw))
                for i in range(length):
                    x = b.conv2d(x, conv_c, 3, padding=1, name=f"c{c}_conv{i}")
            elif kind == "small":
                x = b.input(f"x{c}", (1, SMALL_C, SMALL_HW, SMALL_HW))
                for i in range(length):
                    x = b.conv2d(x, SMALL_C, 3, padding=1, name=f"c{c}_small{i}")
            else:
                x = b.input(f"x{c}", (big,))
                for i in range(length):
                    x = b.unary("neg", x, name=f"c{c}_neg{i}")
            outs.append(x)
        cases.append(CorunCase(name, b.build(outs), len(chains)))
    return tuple(cases)
