"""The scalable solver's ladder: one descent plans every rung, each plan fits its rung, and a
rung's plan does not depend on which rungs were asked for or in which order; a given plan pruned
to a rung keeps only recomputations it had."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.remat import train_dags
from streamplan.cost.opcost import AnalyticCostModel
from streamplan.remat.budget import peak_floor
from streamplan.remat.problem import RematProblem, check_plan, evaluate
from streamplan.remat.scalable import Descent, Pruned
from streamplan.remat.solvers import Ladder

COST = AnalyticCostModel("v100")


def _rungs(p, g, levels=6):
    top, floor = p.baseline_peak_bytes(), peak_floor(g).bytes
    return sorted({floor + (top - floor) * i // levels for i in range(levels)}, reverse=True)


@settings(max_examples=20, deadline=None)
@given(train_dags(max_ops=10), st.randoms(use_true_random=False))
def test_each_rung_fits_and_does_not_depend_on_what_was_asked(g, rnd):
    p = RematProblem.build(g, None, COST)
    rungs = _rungs(p, g)
    top_down = Descent(p, rungs)
    plans = {r: top_down.plan(r) for r in rungs}
    shuffled = list(rungs)
    rnd.shuffle(shuffled)
    other = Descent(p, rungs)
    for r in shuffled:
        assert other.plan(r).sequence == plans[r].sequence
    alone = Descent(p, rungs)
    r = rnd.choice(rungs)
    assert alone.plan(r).sequence == plans[r].sequence
    for r, res in plans.items():
        if res.found:
            check_plan(p, res.sequence)
            assert evaluate(p, res.sequence).peak_bytes == res.peak_bytes <= r


@settings(max_examples=20, deadline=None)
@given(train_dags(max_ops=10))
def test_a_pruned_plan_fits_and_only_drops_recomputations(g):
    p = RematProblem.build(g, None, COST)
    rungs = _rungs(p, g)
    low = next((res for res in (Descent(p, rungs).plan(r) for r in reversed(rungs)) if res.found), None)
    if low is None:
        return
    start = Pruned(p, low.sequence)
    assert start.peak_bytes == low.peak_bytes
    had = Counter(low.sequence)
    for r in rungs:
        res = Ladder("scalable", p, tuple(rungs), start=start).plan(r)
        if r < start.peak_bytes:
            assert not res.found
            continue
        assert res.found and res.peak_bytes <= r
        assert all(n <= had[k] for k, n in Counter(res.sequence).items())
