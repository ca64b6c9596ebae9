"""IR invariants: verify, aliasing/storages, dependencies, printer, JSON round trip."""

import dataclasses

import pytest
from hypothesis import given, settings

from helpers.dags import UNIT, dag, diamond, random_dags
from streamplan.errors import FileFormatError, GraphError
from streamplan.frontends.builder import GraphBuilder
from streamplan.ir import critical_path_ops, dumps, format_graph, load, loads, max_parallelism, save, verify
from streamplan.ir.graph import Graph, Node, Value
from streamplan.models import load_model


def test_seed_example2_shape_facts():
    g = load_model("seed-example2")
    assert len(g.nodes) == 6
    assert critical_path_ops(g) == 4
    assert max_parallelism(g).width == 2
    assert g.activation_bytes() == 6 * UNIT
    assert all(v.nbytes == UNIT for v in g.values.values())


def test_seed_example1_parallelism():
    g = load_model("seed-example1")
    assert max_parallelism(g).width == 2 and critical_path_ops(g) == 3


def test_dependencies_are_data_edges():
    g = diamond()
    assert set(g.edges()) == {("n0", "n1"), ("n0", "n2"), ("n1", "n3"), ("n2", "n3")}
    assert g.consumers("v0") == ("n1", "n2")
    assert g.producer("v3") == "n3" and g.producer("x") is None


def _inplace_graph() -> Graph:
    """a = relu(x); v = view(a); r = sum-like read of v; a_ = add_(a, 1) after the read."""
    vals = {
        "x": Value("x", (4,), "float32", 16, "input"),
        "a": Value("a", (4,), "float32", 16),
        "v": Value("v", (2, 2), "float32", 16, storage="a"),
        "r": Value("r", (2, 2), "float32", 16),
        "a2": Value("a2", (4,), "float32", 16, storage="a"),
        "o": Value("o", (4,), "float32", 16),
    }
    nodes = (
        Node("relu", "aten.relu.default", ("x",), ("a",)),
        Node("view", "aten.view.default", ("a",), ("v",)),
        Node("read", "aten.neg.default", ("v",), ("r",)),
        Node("add_", "aten.add_.Tensor", ("a",), ("a2",), mutates=("a",)),
        Node("out", "aten.neg.default", ("a2",), ("o",)),
    )
    return verify(Graph("inplace", nodes, vals, ("x",), (), ("o", "r")))


def test_views_share_storage_and_inplace_adds_write_after_read():
    g = _inplace_graph()
    st = g.storages()
    assert set(st["a"].values) == {"a", "v", "a2"}
    assert st["a"].nbytes == 16
    assert g.activation_bytes() == 16 * 3  # a, r, o: the view and the in-place result add nothing
    # the in-place write must wait for the earlier reader of the same storage
    assert "read" in g.predecessors("add_")
    assert "view" in g.predecessors("add_")


def test_verify_names_node_and_context_for_dangling_input():
    g = diamond()
    bad_nodes = list(g.nodes)
    bad_nodes[2] = dataclasses.replace(bad_nodes[2], inputs=("nope",))
    with pytest.raises(GraphError) as e:
        verify(g.replace(nodes=tuple(bad_nodes)))
    assert "n2" in str(e.value) and ">>" in str(e.value)


def test_verify_rejects_cycle_order():
    g = diamond()
    nodes = list(g.nodes)
    nodes[1], nodes[3] = nodes[3], nodes[1]
    with pytest.raises(GraphError, match="before its producer"):
        verify(g.replace(nodes=tuple(nodes)))


def test_verify_rejects_duplicate_and_alias_of_alias():
    g = diamond()
    with pytest.raises(GraphError, match="duplicate node id"):
        verify(g.replace(nodes=g.nodes + (g.nodes[0],)))
    vals = dict(g.values)
    vals["v1"] = dataclasses.replace(vals["v1"], storage="v0")
    vals["v2"] = dataclasses.replace(vals["v2"], storage="v1")
    with pytest.raises(GraphError, match="itself an alias"):
        verify(g.replace(values=vals))


def test_printer_one_line_per_node():
    g = load_model("seed-example2")
    text = format_graph(g)
    assert text.count("aten.atan.default") == 5
    assert "%f:f32[256,1024] = aten.add.Tensor(%d, %e)  # f" in text
    assert "@a" in format_graph(_inplace_graph())  # aliases are marked


@settings(max_examples=60, deadline=None)
@given(random_dags(max_nodes=12, vary_sizes=True))
def test_json_round_trip_is_exact(g):
    g2 = loads(dumps(g))
    assert g2 == g
    assert dumps(g2) == dumps(g)


def test_json_round_trip_with_aliases_and_file(tmp_path):
    g = _inplace_graph()
    save(g, tmp_path / "g.json")
    assert load(tmp_path / "g.json") == g


def test_bad_json_files(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(FileFormatError, match="not valid JSON"):
        load(p)
    p.write_text('{"schema": "other"}')
    with pytest.raises(FileFormatError, match="not a streamplan graph"):
        load(p)
    p.write_text('{"schema": "streamplan.graph", "version": 1, "values": [{"id": 1}], "nodes": []}')
    with pytest.raises(FileFormatError, match="malformed"):
        load(p)
    with pytest.raises(FileFormatError, match="cannot read"):
        load(tmp_path / "missing.json")


def test_builder_shapes_and_flops():
    b = GraphBuilder("cnn")
    x = b.input("x", (2, 3, 32, 32))
    c = b.conv2d(x, 16, 3, padding=1, name="conv")
    p = b.pool2d(c, "max", 2, name="pool")
    assert b.shape(p) == (2, 16, 16, 16)
    g = b.build([p])
    conv = g.node("conv")
    assert conv.flops == 2 * 2 * 16 * 32 * 32 * 3 * 9
    assert g.param_count() == 16 * 3 * 9
    with pytest.raises(GraphError, match="do not broadcast"):
        b.add(x, c)


def test_max_parallelism_matches_brute_force_on_small_dags():
    import itertools

    from streamplan.ir.analysis import transitive_closure_bits

    g = dag({2: [0], 3: [1], 4: [2, 3], 5: [0], 6: [5]}, 7)
    reach = transitive_closure_bits(g)
    n = len(g.nodes)
    best = 0
    for k in range(1, n + 1):
        for combo in itertools.combinations(range(n), k):
            if all(
                not (reach[a] >> b) & 1 and not (reach[b] >> a) & 1
                for a, b in itertools.combinations(combo, 2)
            ):
                best = k
    assert max_parallelism(g).width == best


def test_random_model_is_deterministic_and_verifies():
    a, b = load_model("random:300:7"), load_model("random:300:7")
    assert a == b and verify(a)
    assert load_model("random:300:8") != a
