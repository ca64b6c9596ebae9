"""The Pareto front: increasing budgets, non-increasing makespans, every point checked by the analysis,
and no fixed policy both faster and smaller."""

from __future__ import annotations

from helpers.models import graph_of
from streamplan.app.budget import pareto_front
from streamplan.memory import worst_case_peak
from streamplan.schedule import ScheduleContext
from streamplan.schedule.verify import verify_schedule


def test_front_on_a_random_network():
    g = graph_of("random:70:5")
    front = pareto_front(g, ScheduleContext(cost="h100", time_limit_s=1.0), points=5)
    pts = front.points
    assert len(pts) >= 5
    assert [p.budget_bytes for p in pts] == sorted(p.budget_bytes for p in pts)
    assert all(a.makespan_ms >= b.makespan_ms for a, b in zip(pts, pts[1:]))
    assert pts[0].budget_bytes == front.floor_bytes
    for p in pts:
        verify_schedule(g, p.schedule)
        assert p.worst_case_peak_bytes <= p.budget_bytes
        assert worst_case_peak(g, p.schedule).upper_bytes <= p.budget_bytes
    assert {f.policy for f in front.fixed} >= {"sequential", "memory", "wavefront", "asap", "nimble", "ios"}
    assert front.dominates_fixed()
    d = front.to_dict()
    assert set(d["points"][0]) >= {"budget_bytes", "makespan_ms", "worst_case_peak_bytes", "streams"}
    assert set(d["fixed"][0]) >= {"policy", "makespan_ms", "worst_case_peak_bytes"}
