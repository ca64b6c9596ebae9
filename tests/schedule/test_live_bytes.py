"""Liveness on one stream: allocate at the producer, free after the last user, outputs kept."""

from helpers.dags import UNIT, chain, dag
from streamplan.ir.graph import Graph, Node, Value
from streamplan.models import load_model
from streamplan.schedule import sequential_peak_bytes, sequential_trace


def test_three_relus_match_raf_trace():
    g = chain(3)
    t = sequential_trace(g, g.node_ids)
    assert [d // UNIT for d in t.during_bytes] == [1, 2, 2]
    assert [a // UNIT for a in t.after_bytes] == [1, 1, 1]
    assert t.peak_bytes == 2 * UNIT


def test_seed_examples():
    for name, units in (("seed-example1", 3), ("seed-example2", 3), ("seed-concat", 4)):
        g = load_model(name)
        assert sequential_peak_bytes(g, g.node_ids) == units * UNIT, name


def test_order_matters():
    # n0 -> n1 (4 units) -> n3; n0 -> n2 (4 units) -> n4; n5 = n3 + n4: finish a branch first.
    g = dag(
        {1: [0], 2: [0], 3: [1], 4: [2], 5: [3, 4]}, 6, sizes=[UNIT, 4 * UNIT, 4 * UNIT, UNIT, UNIT, UNIT]
    )
    a = sequential_peak_bytes(g, ["n0", "n1", "n3", "n2", "n4", "n5"])
    b = sequential_peak_bytes(g, ["n0", "n1", "n2", "n3", "n4", "n5"])
    assert (a, b) == (6 * UNIT, 9 * UNIT)


def test_views_extend_the_base_lifetime():
    vals = {
        "x": Value("x", (4,), "float32", UNIT, "input"),
        "va": Value("va", (4,), "float32", UNIT),
        "vv": Value("vv", (4,), "float32", UNIT, storage="va"),
        "vc": Value("vc", (4,), "float32", UNIT),
        "vb": Value("vb", (4,), "float32", UNIT),
    }
    nodes = (
        Node("a", "aten.atan.default", ("x",), ("va",)),
        Node("view", "aten.view.default", ("va",), ("vv",)),
        Node("c", "aten.atan.default", ("x",), ("vc",)),
        Node("b", "aten.atan.default", ("vv",), ("vb",)),
    )
    g = Graph("views", nodes, vals, ("x",), (), ("vb", "vc"))
    t = sequential_trace(g, g.node_ids)
    # the view allocates nothing; va stays live through b, which reads it via the view
    assert [d // UNIT for d in t.during_bytes] == [1, 1, 2, 3]
    assert t.after_bytes[-1] == 2 * UNIT


def test_in_place_write_extends_life_and_outputs_are_never_freed():
    vals = {
        "x": Value("x", (4,), "float32", UNIT, "input"),
        "va": Value("va", (4,), "float32", UNIT),
        "vi": Value("vi", (4,), "float32", UNIT, storage="va"),
        "vb": Value("vb", (4,), "float32", UNIT),
    }
    nodes = (
        Node("a", "aten.atan.default", ("x",), ("va",)),
        Node("b", "aten.atan.default", ("x",), ("vb",)),
        Node("relu_", "aten.relu_.default", ("va",), ("vi",), mutates=("va",)),
    )
    g = Graph("inplace", nodes, vals, ("x",), (), ("vi", "vb"))
    assert sequential_trace(g, g.node_ids).after_bytes == (UNIT, 2 * UNIT, 2 * UNIT)
