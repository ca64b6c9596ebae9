"""``random-train:N[:seed]``: a random network-like DAG followed by a mirrored backward pass.

The forward part is ``random:N[:seed]``. The backward part visits its ops in reverse:
the gradient of an op's output is the sum of what its consumers send back (a loss
stand-in, ``atan`` of the output, for the ops nobody consumes); the op's backward
node reads that gradient and the *saved activations* a real backward reads — its
first input and its own output — and sends its result to each of its inputs:
``addcmul(grad, input, output, value=1e-3)``. The graph returns the gradient of the
input. Forward activations therefore live until the backward reaches them, which is
the memory profile rematerialization is for (no torch needed; every op executable
on one tensor shape). Weight gradients are left out: they would be graph outputs of
parameter size, not activations.
"""

from __future__ import annotations

from streamplan.errors import ModelSpecError
from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.graph import Graph, Node, Value
from streamplan.zoo.random_dag import MAX_OPS, check_size, random_dag

MAX_FORWARD_OPS = MAX_OPS * 2 // 5  # random-train:N has about 2.5 N ops: the same cap on the whole
GRAD_SCALE = 1e-3  # keeps products of activations from growing through a deep backward


def parse_spec(spec: str) -> tuple[int, int]:
    """'random-train:N[:seed]' -> (N, seed)."""
    parts = spec.split(":")
    try:
        n = int(parts[1])
        seed = int(parts[2]) if len(parts) > 2 else 0
        if n < 1 or len(parts) > 3:
            raise ValueError
    except (IndexError, ValueError):
        raise ModelSpecError(
            f"bad random training model spec {spec!r}",
            hint="write random-train:N or random-train:N:SEED with N >= 1, e.g. random-train:200",
        ) from None
    check_size(spec, n, MAX_FORWARD_OPS)
    return n, seed


def random_train_dag(n: int, seed: int = 0, *, batch: int = 1, dtype: str = "float32") -> Graph:
    """The forward graph of ``random:n:seed`` and its mirrored backward (about 2.5n ops)."""
    fwd = random_dag(n, seed, batch=batch, dtype=dtype)
    values = dict(fwd.values)
    nodes = list(fwd.nodes)
    x = fwd.inputs[0]
    like = values[x]
    consumers: dict[str, list[str]] = {}
    for node in fwd.nodes:
        for v in dict.fromkeys(node.inputs):
            consumers.setdefault(v, []).append(node.id)
    grads: dict[str, list[str]] = {}  # value -> gradient contributions

    def new_value(vid: str) -> str:
        values[vid] = Value(vid, like.shape, like.dtype, like.nbytes, "activation")
        return vid

    def add_node(nid: str, op: str, ins: list[str], args: list, kwargs: dict, flops: int) -> str:
        out = new_value(f"{nid}.out")
        nodes.append(
            Node(
                nid,
                op,
                tuple(ins),
                (out,),
                {"args": args, "kwargs": kwargs},
                flops,
                like.nbytes * len(ins),
                like.nbytes,
            )
        )
        return out

    numel = 1
    for d in like.shape:
        numel *= d
    for node in fwd.nodes:  # the loss stand-in for outputs nobody consumes
        v = node.outputs[0]
        if not consumers.get(v):
            g = add_node(f"loss_{node.id}", "aten.atan.default", [v], [tensor_ref(v)], {}, numel)
            grads.setdefault(v, []).append(g)
    for node in reversed(fwd.nodes):
        v = node.outputs[0]
        parts = grads.get(v, [])
        if not parts:
            continue
        g = parts[0]
        for k, part in enumerate(parts[1:], start=1):
            g = add_node(
                f"gsum_{node.id}_{k}",
                "aten.add.Tensor",
                [g, part],
                [tensor_ref(g), tensor_ref(part)],
                {},
                numel,
            )
        acts = [i for i in node.inputs if values[i].kind in ("activation", "input")]
        first = acts[0] if acts else x
        reads = list(dict.fromkeys([g, first, v]))
        bwd = add_node(
            f"bwd_{node.id}",
            "aten.addcmul.default",
            reads,
            [tensor_ref(g), tensor_ref(first), tensor_ref(v)],
            {"value": GRAD_SCALE},
            2 * numel,
        )
        for i in dict.fromkeys(acts):
            grads.setdefault(i, []).append(bwd)
    parts = grads.get(x, [])
    out = parts[0]
    for k, part in enumerate(parts[1:], start=1):
        out = add_node(
            f"gsum_x_{k}", "aten.add.Tensor", [out, part], [tensor_ref(out), tensor_ref(part)], {}, numel
        )
    return Graph(
        f"random-train:{n}:{seed}",
        tuple(nodes),
        values,
        fwd.inputs,
        fwd.params,
        (out,),
        meta={"generator": "random_backward", "seed": seed},
    )
