"""The graphs from the seed discussion; every tensor is exactly 1 MiB (256x1024 float32) at batch 1.

At batch b every tensor has b x 256 rows (b MiB in float32): the same graph, scaled.
"""

from __future__ import annotations

from streamplan.frontends.builder import GraphBuilder
from streamplan.ir.graph import Graph

SHAPE = (256, 1024)  # 1 MiB of float32


def _shape(batch: int) -> tuple[int, int]:
    return (SHAPE[0] * batch, SHAPE[1])


def example1(batch: int = 1, dtype: str = "float32") -> Graph:
    """a -> {b, c} -> d: multi-stream does not raise the peak (3 units either way)."""
    g = GraphBuilder("seed-example1", dtype)
    x = g.input("x", _shape(batch))
    a = g.unary("atan", x, name="a")
    b = g.unary("atan", a, name="b")
    c = g.unary("atan", a, name="c")
    d = g.add(b, c, name="d")
    return g.build([d], batch=batch)


def example2(batch: int = 1, dtype: str = "float32") -> Graph:
    """a -> {b -> d, c -> e} -> f: sequential peaks at 3 units, parallel branches at 4."""
    g = GraphBuilder("seed-example2", dtype)
    x = g.input("x", _shape(batch))
    a = g.unary("atan", x, name="a")
    b = g.unary("atan", a, name="b")
    c = g.unary("atan", a, name="c")
    d = g.unary("atan", b, name="d")
    e = g.unary("atan", c, name="e")
    f = g.add(d, e, name="f")
    return g.build([f], batch=batch)


def concat(batch: int = 1, dtype: str = "float32") -> Graph:
    """atan0 -> {atan1 -> atan3, atan2 -> atan4} -> concatenate (output is 2 units)."""
    g = GraphBuilder("seed-concat", dtype)
    x = g.input("x", _shape(batch))
    p0 = g.unary("atan", x, name="atan0")
    p1 = g.unary("atan", p0, name="atan1")
    p2 = g.unary("atan", p0, name="atan2")
    p3 = g.unary("atan", p1, name="atan3")
    p4 = g.unary("atan", p2, name="atan4")
    out = g.concat([p3, p4], dim=0, name="concatenate")
    return g.build([out], batch=batch)
