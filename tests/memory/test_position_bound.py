"""The launch-order position bound is a proven upper bound on the worst case, exact on one stream."""

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from helpers.memory_oracles import brute_force_worst_case, schedules_for
from helpers.models import graph_of
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
    with_inputs = position_bound(g, s, include_inputs=True).peak_bytes
    assert with_inputs == plain + g.input_bytes()
