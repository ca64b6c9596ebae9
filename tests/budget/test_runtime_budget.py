"""Budget schedules (guarded, with their admission waits) run for real on CPU threads and match
the reference under chaos delays."""

from __future__ import annotations

import pytest

from helpers.runtime import assert_matches_reference
from streamplan.memory import worst_case_peak
from streamplan.models import load_model
from streamplan.schedule import MemoryBudget, ScheduleContext, make_schedule


@pytest.mark.parametrize(
    ("spec", "budget"), [("seed-example2", "3MiB"), ("random:60", "1.0x"), ("random:60", "1.3x")]
)
def test_budget_schedules_run_and_match(spec, budget):
    g = load_model(spec)
    ctx = ScheduleContext(max_streams=4, cost="v100", budget=MemoryBudget.parse(budget), time_limit_s=2.0)
    s = make_schedule(g, "budget", ctx)
    assert worst_case_peak(g, s).upper_bytes <= s.meta["budget_bytes"]
    assert_matches_reference(g, s)
    assert_matches_reference(g, s, chaos=True, seed=3)
