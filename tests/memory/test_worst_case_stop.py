"""``stop_above_bytes``: a caller who only asks whether the worst case fits a limit gets, once a
timing exceeds it, an interval whose lower end is that timing (never above the true worst case);
below the limit the answer is the full analysis. A predicted timeline is one more witness."""

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import random_dags
from helpers.memory_oracles import brute_force_worst_case, schedules_for
from streamplan.cost.simulate import simulate
from streamplan.memory.worst_case import STOPPED_METHOD, worst_case_peak


@st.composite
def case(draw):
    g = draw(random_dags(min_nodes=2, max_nodes=6, vary_sizes=True))
    s = draw(schedules_for(g))
    return g, s, draw(st.floats(0.0, 1.2))


@settings(max_examples=50, deadline=None)
@given(case())
def test_a_stop_is_a_proven_interval_and_no_stop_changes_nothing(c):
    g, s, frac = c
    true = brute_force_worst_case(g, s)
    limit = int(true * frac)
    full = worst_case_peak(g, s)
    got = worst_case_peak(g, s, stop_above_bytes=limit, timeline=simulate(g, s))
    assert got.lower_bytes <= true <= got.upper_bytes
    if got.method == STOPPED_METHOD:
        assert got.lower_bytes > limit  # a timing over the limit: the answer to "does it fit?"
    elif true <= limit:
        assert (got.lower_bytes, got.upper_bytes) == (full.lower_bytes, full.upper_bytes)
    if true <= limit:
        assert got.method != STOPPED_METHOD and got.upper_bytes == full.upper_bytes
