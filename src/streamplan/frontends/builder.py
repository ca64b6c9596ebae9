"""A small builder for hand-made graphs, with shape rules (what tests and examples use).

Nodes get ATen op names and encoded call arguments, so a built graph can also be
executed by the runtime::

    b = GraphBuilder("diamond")
    x = b.input("x", (256, 1024))
    a = b.unary("atan", x, name="a")
    d = b.add(b.unary("atan", a, name="b"), b.unary("atan", a, name="c"), name="d")
    graph = b.build([d])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streamplan.errors import GraphError
from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.dtypes import numel, tensor_bytes
from streamplan.ir.graph import Graph, Node, Value
from streamplan.ir.verify import verify

UNARY_OPS = ("relu", "atan", "sigmoid", "tanh", "gelu", "exp", "neg", "sin", "cos", "abs")


class GraphBuilder:
    """Accumulates values and nodes; ``build()`` returns a verified immutable ``Graph``."""

    def __init__(self, name: str, dtype: str = "float32"):
        self.name = name
        self.dtype = dtype
        self._values: dict[str, Value] = {}
        self._nodes: list[Node] = []
        self._inputs: list[str] = []
        self._params: list[str] = []

    # -- leaves ------------------------------------------------------------
    def input(self, name: str, shape: Sequence[int], dtype: str | None = None) -> str:
        return self._leaf(name, shape, dtype, "input", self._inputs)

    def param(self, name: str, shape: Sequence[int], dtype: str | None = None) -> str:
        return self._leaf(name, shape, dtype, "param", self._params)

    def _leaf(self, name: str, shape: Sequence[int], dtype: str | None, kind: str, into: list) -> str:
        dt = dtype or self.dtype
        self._new_value(name, tuple(shape), dt, kind)
        into.append(name)
        return name

    def shape(self, value_id: str) -> tuple[int, ...]:
        return self._values[value_id].shape

    # -- ops ---------------------------------------------------------------
    def unary(self, op: str, x: str, *, name: str | None = None) -> str:
        """An elementwise op with one input and an output of the same shape."""
        if op not in UNARY_OPS:
            raise GraphError(f"unknown unary op {op!r}", hint=f"use one of {', '.join(UNARY_OPS)}")
        shape = self.shape(x)
        return self._op(f"aten.{op}.default", [x], shape, [tensor_ref(x)], flops=numel(shape), name=name)

    def relu(self, x: str, *, name: str | None = None) -> str:
        return self.unary("relu", x, name=name)

    def transpose(self, x: str, dim0: int = 0, dim1: int = 1, *, name: str | None = None) -> str:
        """A view of ``x`` with two dimensions swapped: no kernel, the same storage."""
        shape = list(self.shape(x))
        if len(shape) < 2 or not (-len(shape) <= dim0 < len(shape) and -len(shape) <= dim1 < len(shape)):
            raise GraphError(f"transpose({dim0}, {dim1}) of a {len(shape)}-d value {x!r}", where=self.name)
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        args = [tensor_ref(x), dim0, dim1]
        return self._op("aten.transpose.int", [x], tuple(shape), args, flops=0, name=name, view=True)

    def add(self, x: str, y: str, *, name: str | None = None) -> str:
        sx, sy = self.shape(x), self.shape(y)
        shape = _broadcast(sx, sy, self.name)
        return self._op(
            "aten.add.Tensor", [x, y], shape, [tensor_ref(x), tensor_ref(y)], flops=numel(shape), name=name
        )

    def concat(self, xs: Sequence[str], dim: int = 1, *, name: str | None = None) -> str:
        shapes = [self.shape(x) for x in xs]
        base = list(shapes[0])
        d = dim % len(base)
        for s in shapes[1:]:
            if len(s) != len(base) or any(a != b for i, (a, b) in enumerate(zip(s, base)) if i != d):
                raise GraphError(f"concat of mismatched shapes {shapes} on dim {dim}", where=self.name)
        base[d] = sum(s[d] for s in shapes)
        return self._op(
            "aten.cat.default", list(xs), tuple(base), [[tensor_ref(x) for x in xs], dim], flops=0, name=name
        )

    def matmul(self, x: str, w: str, *, name: str | None = None) -> str:
        sx, sw = self.shape(x), self.shape(w)
        if len(sx) != 2 or len(sw) != 2 or sx[1] != sw[0]:
            raise GraphError(f"matmul of shapes {sx} and {sw}", where=self.name, hint="need (M,K) @ (K,N)")
        shape = (sx[0], sw[1])
        return self._op(
            "aten.mm.default",
            [x, w],
            shape,
            [tensor_ref(x), tensor_ref(w)],
            flops=2 * sx[0] * sx[1] * sw[1],
            name=name,
        )

    def conv2d(
        self,
        x: str,
        out_channels: int,
        kernel: int | tuple[int, int],
        *,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
        bias: bool = False,
        name: str | None = None,
    ) -> str:
        """A conv2d whose weight (and bias) become new params named after the node."""
        n, c, h, w = self.shape(x)
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        if c % groups or out_channels % groups:
            raise GraphError(
                f"conv2d groups={groups} does not divide channels {c}->{out_channels}", where=self.name
            )
        node_name = name or self._fresh("conv")
        wt = self.param(f"{node_name}.weight", (out_channels, c // groups, kh, kw))
        inputs = [x, wt]
        b_ref = None
        if bias:
            b_ref = self.param(f"{node_name}.bias", (out_channels,))
            inputs.append(b_ref)
        ho = (h + 2 * padding - kh) // stride + 1
        wo = (w + 2 * padding - kw) // stride + 1
        if ho <= 0 or wo <= 0:
            raise GraphError(f"conv2d output would be empty for input {(n, c, h, w)}", where=self.name)
        args = [
            tensor_ref(x),
            tensor_ref(wt),
            tensor_ref(b_ref) if b_ref else None,
            [stride, stride],
            [padding, padding],
            [1, 1],
            False,
            [0, 0],
            groups,
        ]
        flops = 2 * n * out_channels * ho * wo * (c // groups) * kh * kw
        return self._op(
            "aten.convolution.default", inputs, (n, out_channels, ho, wo), args, flops=flops, name=node_name
        )

    def pool2d(
        self,
        x: str,
        kind: str = "max",
        kernel: int = 2,
        *,
        stride: int | None = None,
        padding: int = 0,
        name: str | None = None,
    ) -> str:
        n, c, h, w = self.shape(x)
        s = stride or kernel
        ho = (h + 2 * padding - kernel) // s + 1
        wo = (w + 2 * padding - kernel) // s + 1
        shape = (n, c, ho, wo)
        if kind == "max":
            op = "aten.max_pool2d.default"
        elif kind == "avg":
            op = "aten.avg_pool2d.default"
        else:
            raise GraphError(f"unknown pool kind {kind!r}", hint="use 'max' or 'avg'")
        args = [tensor_ref(x), [kernel, kernel], [s, s], [padding, padding]]
        return self._op(op, [x], shape, args, flops=numel(shape) * kernel * kernel, name=name)

    # -- finish ------------------------------------------------------------
    def build(self, outputs: Sequence[str], **meta: Any) -> Graph:
        for o in outputs:
            if o not in self._values:
                raise GraphError(f"output {o!r} is not a value of the graph", where=self.name)
        g = Graph(
            self.name,
            tuple(self._nodes),
            dict(self._values),
            tuple(self._inputs),
            tuple(self._params),
            tuple(outputs),
            meta=dict(meta),
        )
        return verify(g)

    # -- internals ---------------------------------------------------------
    def _fresh(self, stem: str) -> str:
        i = len(self._nodes)
        while f"{stem}{i}" in self._values:
            i += 1
        return f"{stem}{i}"

    def _new_value(self, vid: str, shape: tuple[int, ...], dtype: str, kind: str, storage: str = "") -> Value:
        if vid in self._values:
            raise GraphError(f"value id {vid!r} is already used", where=self.name)
        v = Value(vid, shape, dtype, tensor_bytes(shape, dtype), kind, storage)  # type: ignore[arg-type]
        self._values[vid] = v
        return v

    def _op(
        self,
        op: str,
        inputs: list[str],
        shape: tuple[int, ...],
        args: list,
        *,
        flops: int,
        name: str | None,
        view: bool = False,
    ) -> str:
        """A node writing one new value; ``view``: the value shares its first input's storage and
        the op moves no bytes."""
        for i in inputs:
            if i not in self._values:
                raise GraphError(f"{op} reads unknown value {i!r}", where=self.name)
        nid = name or self._fresh(op.split(".")[1])
        storage = self._values[inputs[0]].storage if view else ""
        out = self._new_value(nid, shape, self._values[inputs[0]].dtype, "activation", storage)
        read = 0 if view else sum(self._values[i].nbytes for i in dict.fromkeys(inputs))
        self._nodes.append(
            Node(
                nid,
                op,
                tuple(dict.fromkeys(inputs)),
                (out.id,),
                {"args": args, "kwargs": {}},
                flops,
                read,
                0 if view else out.nbytes,
            )
        )
        return out.id


def _broadcast(a: tuple[int, ...], b: tuple[int, ...], where: str) -> tuple[int, ...]:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[-1 - i] if i < len(a) else 1
        y = b[-1 - i] if i < len(b) else 1
        if x != y and 1 not in (x, y):
            raise GraphError(f"shapes {a} and {b} do not broadcast", where=where)
        out.append(max(x, y))
    return tuple(reversed(out))
