"""Training steps are graphs like any other: the brute-force oracles and the figure ordering
hold on them, in-place updates included; the breakdown adds up."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.memory_oracles import (
    brute_force_arena_bound,
    brute_force_worst_case,
    schedules_for,
    timelines_for,
)
from helpers.training import mlp_graph, two_branch_graph
from streamplan.ir.includes import EVERYTHING
from streamplan.ir.training import training_step
from streamplan.memory import analyze_memory, liveness, worst_case_peak
from streamplan.memory.breakdown import CATEGORIES, memory_breakdown
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.events import with_derived_waits
from streamplan.zoo.random_train import random_training_dag


@st.composite
def training_case(draw, max_n=4):
    n = draw(st.integers(2, max_n))
    seed = draw(st.integers(0, 50))
    optimizer = draw(st.sampled_from(("none", "sgd", "adam")))
    g = random_training_dag(n, seed, optimizer=optimizer)
    return g, draw(schedules_for(g))


@settings(max_examples=25, deadline=None)
@given(training_case())
def test_worst_case_equals_brute_force_on_training_steps(gs):
    g, s = gs
    wc = worst_case_peak(g, s)
    assert wc.exact and wc.lower_bytes == brute_force_worst_case(g, s)


@settings(max_examples=12, deadline=None)
@given(training_case(max_n=3))
def test_arena_bound_equals_brute_force_on_training_steps(gs):
    g, s = gs
    if len(g.activation_storages()) > 13:
        return  # 2^n subsets: keep the oracle fast
    assert analyze_memory(g, s).arena.lower_bound_bytes == brute_force_arena_bound(g, s)


@settings(max_examples=20, deadline=None)
@given(training_case(), st.data())
def test_figures_are_ordered_and_agree_on_one_stream(gs, data):
    g, s = gs
    r = analyze_memory(g, s, timeline=data.draw(timelines_for(s)))
    wc = r.worst_case
    assert r.host_order_peak_bytes <= wc.lower_bytes and r.simulated_peak_bytes <= wc.lower_bytes
    assert wc.upper_bytes <= r.arena.lower_bound_bytes <= r.arena.arena_bytes
    one = with_derived_waits(g, g.node_ids, dict.fromkeys(g.node_ids, 0), "sequential")
    r1 = analyze_memory(g, one)
    assert r1.host_order_peak_bytes == r1.worst_case.lower_bytes == r1.arena.lower_bound_bytes


def test_captured_steps_against_the_oracle_under_every_policy():
    """A real captured step (batch norm written in place, Adam's in-place temporaries)."""
    g = mlp_graph("adam")
    for policy in ("sequential", "wavefront", "asap", "nimble"):
        s = make_schedule(g, policy, ScheduleContext(max_streams=3))
        wc = worst_case_peak(g, s)
        assert wc.exact and wc.lower_bytes == brute_force_worst_case(g, s), policy


def test_gradients_live_from_the_backward_to_their_update():
    for optimizer in ("none", "sgd"):
        g = two_branch_graph(optimizer)
        step = training_step(g)
        s = make_schedule(g, "sequential")
        lives = liveness(g, s).by_storage()
        for grad in step.gradients.values():
            life = lives[g.storage_of(grad)]
            assert step.phase(g, life.creator) == "backward"
            if optimizer == "none":
                assert life.persistent  # an output: the caller reads it after the step
            else:
                assert not life.persistent and step.phase(g, life.last_users[-1]) == "optimizer"


def test_breakdown_totals_and_peak_compositions_add_up():
    g = two_branch_graph("adam")
    s = make_schedule(g, "asap", ScheduleContext(max_streams=3))
    report = analyze_memory(g, s, includes=EVERYTHING)
    b = memory_breakdown(g, s, report=report)
    assert b.totals.total_bytes == sum(st.nbytes for st in g.storages().values())
    assert [name for name, _ in b.totals.bytes_by_category] == list(CATEGORIES)
    assert b.totals["parameters"] == g.param_bytes() and b.totals["optimizer_state"] == 2 * g.param_bytes()
    host = b.peak("host-order")
    assert host.total_bytes == report.host_order_peak_bytes
    assert b.peak("worst-case").total_bytes == report.worst_case.lower_bytes
    assert host.phases and set(host.phases) <= {"forward", "backward", "optimizer"}
