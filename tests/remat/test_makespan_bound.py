"""The makespan bound the search prunes with is a lower bound on every simulated makespan of the
plan's graph, so pruning never changes the answer: a search that evaluates everything answers the
same."""

from __future__ import annotations

import importlib

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.remat import random_plan, train_dags
from streamplan.cost.opcost import AnalyticCostModel
from streamplan.cost.simulate import simulate
from streamplan.models import load_model
from streamplan.remat.bound import MakespanBound
from streamplan.remat.problem import RematProblem
from streamplan.remat.rewrite import rewrite
from streamplan.schedule import ScheduleContext, make_schedule

search_module = importlib.import_module("streamplan.remat.search")


@settings(max_examples=25, deadline=None)
@given(
    train_dags(max_ops=9),
    st.integers(0, 1000),
    st.sampled_from(["sequential", "asap", "wavefront", "nimble"]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(["v100", "h100"]),
    st.booleans(),
)
def test_the_bound_never_exceeds_a_simulated_makespan(g, seed, policy, streams, device, graphs):
    cost = AnalyticCostModel(device, cuda_graphs=graphs)
    p = RematProblem.build(g, None, cost)
    seq = random_plan(g, seed, recomputations=5)
    g2 = rewrite(p, seq)
    ctx = ScheduleContext(max_streams=streams, cost=cost)
    s = make_schedule(g2, policy, ctx)
    bound = MakespanBound.of(g, cost)
    assert bound.plan_ms(p, seq, streams) <= simulate(g2, s, cost).makespan_ms * (1 + 1e-9) + 1e-9
    assert bound.plain_ms(streams) <= simulate(g, make_schedule(g, policy, ctx), cost).makespan_ms * (
        1 + 1e-9
    )


def test_pruning_by_the_bound_answers_as_evaluating_every_plan(monkeypatch):
    g = load_model("random:14:3", train=True, optimizer="sgd")
    ctx = ScheduleContext(max_streams=3, time_limit_s=5)
    for budget in ("0.8x", "0.6x"):
        pruned = search_module.search(g, budget, policy="asap", ctx=ctx, levels=6)
        with monkeypatch.context() as m:
            m.setattr(MakespanBound, "plan_ms", lambda self, problem, seq, max_streams: 0.0)
            full = search_module.search(g, budget, policy="asap", ctx=ctx, levels=6)
        assert pruned.evaluated <= full.evaluated
        a, b = pruned.chosen, full.chosen
        assert (a.makespan_ms, a.peak_bytes) == (b.makespan_ms, b.peak_bytes)
