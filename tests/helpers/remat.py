"""Graphs and plans for the rematerialization tests.

``raf_conv_pool`` is RAF's own rematerialization test case: a conv and three 3x3
max-pools (stride 1, padding 1) on 4 MiB tensors, then their three gradient ops and
the conv's input gradient, then a softmax; RAF counts the input and the conv weight
too, so the peak is 6 x 4 MiB + 9,216 B = 24.0088 MiB and the best plan fits 20.0088
MiB. The gradient ops stand in for RAF's ``max_pool2d_dx(x, y, dy)`` and
``conv2d_dx(x, y, dy)``: ``addcmul`` reads the same three tensors and writes one of the
same size, which is all the memory figures depend on (and ATen's max-pool backward
would need the indices RAF's op does not take).
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.graph import Graph, Node, Value
from streamplan.zoo.random_backward import random_train_dag

RAF_SHAPE = (16, 16, 64, 64)  # 4 MiB of float32
RAF_DATA_BYTES = 4 << 20
RAF_WEIGHT_BYTES = 16 * 16 * 3 * 3 * 4  # 9,216 B = 0.0088 MiB
RAF_PEAK_BYTES = 6 * RAF_DATA_BYTES + RAF_WEIGHT_BYTES  # 24.0088 MiB
RAF_REMAT_BYTES = 5 * RAF_DATA_BYTES + RAF_WEIGHT_BYTES  # 20.0088 MiB


def raf_conv_pool() -> Graph:
    """RAF's conv + max-pool rematerialization case (see the module docstring)."""
    values = {
        "x": Value("x", RAF_SHAPE, "float32", RAF_DATA_BYTES, "input"),
        "w": Value("w", (16, 16, 3, 3), "float32", RAF_WEIGHT_BYTES, "param"),
    }
    nodes = []

    def op(name: str, aten: str, ins: list[str], args: list, flops: int) -> str:
        values[name] = Value(name, RAF_SHAPE, "float32", RAF_DATA_BYTES, "activation")
        nodes.append(
            Node(
                name,
                aten,
                tuple(ins),
                (name,),
                {"args": args, "kwargs": {}},
                flops,
                RAF_DATA_BYTES * len(ins),
                RAF_DATA_BYTES,
            )
        )
        return name

    def ref(v: str) -> dict:
        return tensor_ref(v)

    numel = 16 * 16 * 64 * 64
    op(
        "a1",
        "aten.convolution.default",
        ["x", "w"],
        [ref("x"), ref("w"), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1],
        2 * numel * 16 * 9,
    )
    for i in (2, 3, 4):
        op(
            f"a{i}",
            "aten.max_pool2d.default",
            [f"a{i - 1}"],
            [ref(f"a{i - 1}"), [3, 3], [1, 1], [1, 1]],
            numel * 9,
        )
    grad = {"a5": ("a3", "a4", "a4"), "a6": ("a2", "a3", "a5"), "a7": ("a1", "a2", "a6")}
    for name, (x, y, dy) in grad.items():  # RAF's max_pool2d_dx(x, y, dy)
        op(
            name,
            "aten.addcmul.default",
            list(dict.fromkeys([dy, x, y])),
            [ref(dy), ref(x), ref(y)],
            2 * numel,
        )
    op(
        "a8", "aten.addcmul.default", ["a7", "x", "a1"], [ref("a7"), ref("x"), ref("a1")], 2 * numel
    )  # conv2d_dx
    op("a9", "aten._softmax.default", ["a8"], [ref("a8"), -1, False], 5 * numel)
    return Graph("raf-conv-pool", tuple(nodes), values, ("x",), ("w",), ("a9",), param_names={})


@st.composite
def train_dags(draw, min_ops: int = 3, max_ops: int = 10) -> Graph:
    """A small ``random-train`` graph: a random forward DAG and its mirrored backward."""
    n = draw(st.integers(min_ops, max_ops))
    seed = draw(st.integers(0, 10_000))
    return random_train_dag(n, seed)


def random_plan(graph: Graph, seed: int, recomputations: int = 4) -> tuple[int, ...]:
    """A valid plan on the graph's order: originals in order, some recomputations inserted at
    random later places (every op's inputs exist by then, so any such place is valid)."""
    from streamplan.cost.opcost import FakeCostModel
    from streamplan.remat.problem import RematProblem

    p = RematProblem.build(graph, None, FakeCostModel(1.0))
    rng = random.Random(seed)
    seq = list(range(p.n))
    ops = [k for k in range(p.n) if p.recomputable[k]]
    for _ in range(recomputations if ops else 0):
        k = rng.choice(ops)
        first = seq.index(k)
        seq.insert(rng.randint(first + 1, len(seq)), k)
    return tuple(seq)
