"""Synthetic graphs for tests: chains, diamonds, fans, and a hypothesis strategy of random DAGs.

Every generated graph uses one tensor shape so it is also executable; sizes can
vary per value with ``sizes`` to exercise memory code.
"""

from __future__ import annotations

from hypothesis import strategies as st

from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.graph import Graph, Node, Value

UNIT = 1 << 20  # 1 MiB


def dag(
    edges: dict[int, list[int]],
    n: int,
    *,
    sizes: list[int] | None = None,
    name: str = "dag",
    shape: tuple[int, ...] = (256, 1024),
) -> Graph:
    """Graph with nodes n0..n{n-1}; node i reads the outputs of ``edges[i]`` (all < i).

    Node i writes value vi of ``sizes[i]`` bytes (default 1 MiB). Nodes with no inputs
    read the graph input x. Sinks are the graph outputs.
    """
    values = {"x": Value("x", shape, "float32", UNIT, "input")}
    nodes = []
    used: set[str] = set()
    for i in range(n):
        ins = [f"v{j}" for j in sorted(set(edges.get(i, [])))] or ["x"]
        used.update(ins)
        nb = sizes[i] if sizes else UNIT
        values[f"v{i}"] = Value(f"v{i}", shape, "float32", nb, "activation")
        op = (
            "aten.atan.default"
            if len(ins) == 1
            else "aten.add.Tensor"
            if len(ins) == 2
            else "aten.addcmul.default"
        )
        nodes.append(
            Node(
                f"n{i}",
                op,
                tuple(ins),
                (f"v{i}",),
                {"args": [tensor_ref(x) for x in ins], "kwargs": {}},
                flops=1000 * (i % 7 + 1),
                bytes_read=UNIT * len(ins),
                bytes_written=nb,
            )
        )
    outputs = tuple(f"v{i}" for i in range(n) if f"v{i}" not in used)
    return Graph(name, tuple(nodes), values, ("x",), (), outputs)


def chain(n: int) -> Graph:
    return dag({i: [i - 1] for i in range(1, n)}, n, name=f"chain{n}")


def diamond() -> Graph:
    return dag({1: [0], 2: [0], 3: [1, 2]}, 4, name="diamond")


@st.composite
def random_dags(
    draw, min_nodes: int = 1, max_nodes: int = 9, max_fan_in: int = 3, vary_sizes: bool = False
) -> Graph:
    """A random DAG with up to ``max_nodes`` ops and fan-in <= ``max_fan_in`` (3 for addcmul)."""
    n = draw(st.integers(min_nodes, max_nodes))
    edges: dict[int, list[int]] = {}
    for i in range(1, n):
        k = draw(st.integers(0, min(i, max_fan_in)))
        edges[i] = draw(st.lists(st.integers(0, i - 1), min_size=k, max_size=k, unique=True))
    sizes = None
    if vary_sizes:
        sizes = draw(st.lists(st.integers(1, 8).map(lambda u: u * UNIT // 4), min_size=n, max_size=n))
    return dag(edges, n, sizes=sizes, name="random")
