"""The launch-order position bound is a proven upper bound on the worst case, exact on one stream."""

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from helpers.memory_oracles import brute_force_worst_case, schedules_for
from helpers.models import graph_of
from streamplan.ir.includes import Includes
from streamplan.memory import worst_case_peak
from streamplan.memory.host_order import host_order_peak_bytes
from streamplan.memory.position_bound import position_bound
from streamplan.schedule import make_schedule
from streamplan.zoo.seed import example2


@st.composite
def graph_and_schedule(draw, max_nodes=7):
    g = draw(random_dags(min_nodes=1, max_nodes=max_nodes, vary_sizes=True))
    return g, draw(schedules_for(g))


@settings(max_examples=60, deadline=None)
@given(graph_and_schedule())
def test_bound_is_at_least_the_brute_force_worst_case(gs):
    g, s = gs
    assert position_bound(g, s).peak_bytes >= brute_force_worst_case(g, s)


@settings(max_examples=30, deadline=None)
@given(random_dags(min_nodes=1, max_nodes=12, vary_sizes=True))
def test_bound_is_the_host_order_peak_on_one_stream(g):
    for policy in ("sequential", "memory"):
        s = make_schedule(g, policy)
        assert position_bound(g, s).peak_bytes == host_order_peak_bytes(g, s)


def test_seed_example2_asap_bound_is_its_worst_case():
    g = example2()
    s = make_schedule(g, "asap")
    assert position_bound(g, s).peak_bytes == 4 << 20 == worst_case_peak(g, s).upper_bytes


def test_zoo_schedules_bound_their_exact_worst_case():
    g = graph_of("random:300:1")
    for policy in ("asap", "wavefront", "nimble"):
        s = make_schedule(g, policy)
        wc = worst_case_peak(g, s)
        assert wc.exact
        bound = position_bound(g, s).peak_bytes
        assert wc.upper_bytes <= bound <= 1.5 * wc.upper_bytes, policy


def test_inputs_and_params_are_resident():
    g = graph_of("random:60:2")
    s = make_schedule(g, "asap")
    plain = position_bound(g, s).peak_bytes
    with_inputs = position_bound(g, s, includes=Includes(inputs=True)).peak_bytes
    assert with_inputs == plain + g.input_bytes()


@st.composite
def aliased_dags(draw, max_nodes=7):
    """Random DAGs where some ops make a view of their input, or write it in place."""
    from streamplan.frontends.argcodec import tensor_ref
    from streamplan.ir.graph import Graph, Node, Value

    n = draw(st.integers(2, max_nodes))
    sh = (256, 1024)
    values = {"x": Value("x", sh, "float32", 1 << 20, "input")}
    storage_of: dict[str, str] = {}
    nodes, used = [], set()
    for i in range(n):
        k = draw(st.integers(1, min(i, 2))) if i else 0
        ins = (
            [f"v{j}" for j in draw(st.lists(st.integers(0, i - 1), min_size=k, max_size=k, unique=True))]
            if i
            else []
        )
        ins = ins or ["x"]
        used.update(ins)
        kind = (
            draw(st.sampled_from(["new", "new", "view", "inplace"]))
            if ins[0] != "x" and len(ins) == 1
            else "new"
        )
        out = f"v{i}"
        size = draw(st.integers(1, 4)) << 18
        if kind == "new":
            values[out] = Value(out, sh, "float32", size, "activation")
            storage_of[out] = out
            node = Node(
                f"n{i}", "aten.add.Tensor" if len(ins) == 2 else "aten.atan.default", tuple(ins), (out,)
            )
        else:
            root = storage_of[ins[0]]
            values[out] = Value(out, sh, "float32", values[root].nbytes, "activation", storage=root)
            storage_of[out] = root
            op, mut = ("aten.view.default", ()) if kind == "view" else ("aten.relu_.default", (ins[0],))
            node = Node(f"n{i}", op, tuple(ins), (out,), mutates=mut)
        nodes.append(
            Node(
                node.id,
                node.op,
                node.inputs,
                node.outputs,
                {"args": [tensor_ref(x) for x in ins], "kwargs": {}},
                mutates=node.mutates,
            )
        )
    outputs = tuple(f"v{i}" for i in range(n) if f"v{i}" not in used)
    return Graph("aliased", tuple(nodes), values, ("x",), (), outputs)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_bound_holds_with_views_and_inplace_writes(data):
    g = data.draw(aliased_dags())
    s = data.draw(schedules_for(g))
    assert position_bound(g, s).peak_bytes >= brute_force_worst_case(g, s)
