"""``random:N[:seed]`` as a training step: the random DAG, a loss, its backward, an update.

Built on the IR alone (no torch), for scale tests of training graphs. The forward is
``random_dag(N, seed)``; the loss is the sum of every output; the backward applies the
chain rule op by op in reverse with real ATen backward ops, so the graph also runs:

- ``relu``: ``threshold_backward(g, out, 0)`` (reads the forward output);
- ``convolution``: ``convolution_backward`` (reads the input and the weight), giving the
  input's and the weight's gradients;
- ``add``: the gradient flows to both inputs unchanged;
- ``addcmul(a, b, c)``: ``a`` gets ``g``, ``b`` gets ``g * c``, ``c`` gets ``g * b``;

and gradients reaching a value twice are summed with ``add``. The weights are shared
between convolutions, so their gradients accumulate too. ``finish_training_step`` then
adds the optimizer update and the roles.
"""

from __future__ import annotations

from streamplan.frontends.argcodec import tensor_ref
from streamplan.frontends.train_step import finish_training_step
from streamplan.ir.dtypes import itemsize
from streamplan.ir.graph import Graph, Node, Value
from streamplan.zoo.random_dag import random_dag

_CONV_ARGS = [None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1]


class _Backward:
    """Appends backward nodes and tracks the gradient accumulated for each value."""

    def __init__(self, forward: Graph):
        self.g = forward
        self.values = dict(forward.values)
        self.nodes: list[Node] = []
        self.grad: dict[str, str] = {}

    def _op(self, op: str, args: list, like: str, flops: int, kwargs: dict | None = None) -> str:
        vid = f"bw{len(self.nodes)}"
        proto = self.values[like]
        self.values[vid] = Value(vid, proto.shape, proto.dtype, proto.nbytes, "activation")
        ins = tuple(dict.fromkeys(a["$v"] for a in args if isinstance(a, dict)))
        self.nodes.append(
            Node(
                vid,
                op,
                ins,
                (vid,),
                {"args": args, "kwargs": kwargs or {}},
                flops,
                sum(self.values[i].nbytes for i in ins),
                proto.nbytes,
            )
        )
        return vid

    def accumulate(self, target: str, g: str) -> None:
        prev = self.grad.get(target)
        if prev is None:
            self.grad[target] = g
        else:
            numel = self.values[g].nbytes // itemsize(self.values[g].dtype)
            self.grad[target] = self._op("aten.add.Tensor", [tensor_ref(prev), tensor_ref(g)], g, numel)

    def conv_backward(self, node: Node, g: str) -> None:
        a, w = node.inputs
        need_input = a not in self.g.inputs
        vid = f"bw{len(self.nodes)}"
        outs, index = [], []
        if need_input:
            outs.append(f"{vid}.grad_input")
            index.append(0)
        outs.append(f"{vid}.grad_weight")
        index.append(1)
        for o, like in zip(outs, (a, w) if need_input else (w,), strict=True):
            proto = self.values[like]
            self.values[o] = Value(o, proto.shape, proto.dtype, proto.nbytes, "activation")
        args = [tensor_ref(g), tensor_ref(a), tensor_ref(w), *_CONV_ARGS, [need_input, True, False]]
        self.nodes.append(
            Node(
                vid,
                "aten.convolution_backward.default",
                (g, a, w),
                tuple(outs),
                {"args": args, "kwargs": {}, "output_index": index},
                flops=node.flops * (2 if need_input else 1),
                bytes_read=sum(self.values[i].nbytes for i in (g, a, w)),
                bytes_written=sum(self.values[o].nbytes for o in outs),
            )
        )
        if need_input:
            self.accumulate(a, outs[0])
        self.accumulate(w, outs[-1])


def random_training_dag(
    n: int, seed: int = 0, *, batch: int = 1, dtype: str = "float32", optimizer: str = "none"
) -> Graph:
    """One training step of ``random:N[:seed]`` (see the module docstring)."""
    fwd = random_dag(n, seed, batch=batch, dtype=dtype)
    bw = _Backward(fwd)
    size = itemsize(dtype)
    numel = fwd.values["v0"].nbytes // size
    # the loss: the sum of the sums of the outputs (still the forward)
    sums = []
    for i, out in enumerate(fwd.outputs):
        sid = f"loss_sum{i}"
        bw.values[sid] = Value(sid, (), dtype, size, "activation")
        args = {"args": [tensor_ref(out)], "kwargs": {}}
        bw.nodes.append(Node(sid, "aten.sum.default", (out,), (sid,), args, numel, numel * size, size))
        sums.append(sid)
    loss = sums[0]
    for k, s in enumerate(sums[1:]):
        lid = f"loss_add{k}"
        bw.values[lid] = Value(lid, (), dtype, size, "activation")
        args = {"args": [tensor_ref(loss), tensor_ref(s)], "kwargs": {}}
        bw.nodes.append(Node(lid, "aten.add.Tensor", (loss, s), (lid,), args, 1, 2 * size, size))
        loss = lid
    first_backward = len(bw.nodes)
    # d(loss)/d(output) = 1 everywhere
    for out in fwd.outputs:
        bw.grad[out] = bw._op("aten.ones_like.default", [tensor_ref(out)], out, 0)
    for node in reversed(fwd.nodes):
        (out,) = node.outputs
        g = bw.grad[out]
        if node.op == "aten.relu.default":
            gi = bw._op("aten.threshold_backward.default", [tensor_ref(g), tensor_ref(out), 0], out, numel)
            bw.accumulate(node.inputs[0], gi)
        elif node.op == "aten.convolution.default":
            bw.conv_backward(node, g)
        elif node.op == "aten.add.Tensor":
            for x in node.inputs:
                bw.accumulate(x, g)
        else:  # addcmul(a, b, c) = a + b * c
            a, b, c = node.inputs
            bw.accumulate(a, g)
            bw.accumulate(b, bw._op("aten.mul.Tensor", [tensor_ref(g), tensor_ref(c)], b, numel))
            bw.accumulate(c, bw._op("aten.mul.Tensor", [tensor_ref(g), tensor_ref(b)], c, numel))
    joint = Graph(
        f"random:{n}:{seed}/train",
        (*fwd.nodes, *bw.nodes),
        bw.values,
        fwd.inputs,
        fwd.params,
        (loss,),
        fwd.meta,
    )
    gradients = {w: bw.grad[w] for w in fwd.params if w in bw.grad}
    first = bw.nodes[first_backward].id if first_backward < len(bw.nodes) else None
    return finish_training_step(
        joint,
        loss=loss,
        gradients=gradients,
        first_backward_op=first,
        optimizer=optimizer,
        loss_fn="sum of the outputs (synthetic graph)",
    )
