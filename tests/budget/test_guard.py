"""Guarded list scheduling: a base made to fit by admission waits, or refused when its launch order cannot."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from helpers.models import graph_of
from streamplan.budget.guard import guard_schedule
from streamplan.cost import AnalyticCostModel, FakeCostModel
from streamplan.memory import worst_case_peak
from streamplan.memory.position_bound import counted_storages, position_bound
from streamplan.schedule import make_schedule
from streamplan.schedule.events import prune_waits
from streamplan.schedule.live_bytes import sequential_peak_bytes
from streamplan.schedule.verify import verify_schedule


@settings(max_examples=30, deadline=None)
@given(
    random_dags(min_nodes=2, max_nodes=12, vary_sizes=True),
    st.sampled_from(["asap", "nimble", "wavefront"]),
    st.floats(0.5, 2.0),
)
def test_guarded_schedules_fit_or_are_refused(g, policy, factor):
    base = make_schedule(g, policy)
    seq = sequential_peak_bytes(g, base.launch_order)
    limit = int(seq * factor)
    guarded = guard_schedule(g, base, limit, FakeCostModel(1.0, occupancy=0.3), counted_storages(g))
    if limit >= seq:  # waiting for every earlier op always fits then
        assert guarded is not None
    if guarded is None:
        return
    s = prune_waits(g, guarded)
    verify_schedule(g, s)
    assert position_bound(g, s).peak_bytes <= limit
    assert worst_case_peak(g, s).upper_bytes <= limit


def test_guard_keeps_most_of_asap_on_a_real_graph():
    g = graph_of("random:300:4")
    base = make_schedule(g, "asap")
    seq = sequential_peak_bytes(g, g.node_ids)
    cost = AnalyticCostModel("v100")
    from streamplan.ir.schedule import StreamSchedule
    from streamplan.schedule.events import derive_waits

    in_graph_order = StreamSchedule(
        g.node_ids, base.streams, derive_waits(g, g.node_ids, base.streams), "asap"
    )
    guarded = guard_schedule(g, in_graph_order, seq, cost, counted_storages(g))
    assert guarded is not None and guarded.num_streams > 1
    assert worst_case_peak(g, prune_waits(g, guarded)).upper_bytes <= seq
