"""The budget policy with fusion: fused first, the budget bounds the kernels' worst case;
fused along the streams afterwards, the kernels (which allocate every output when they
start) could exceed it, so that order is refused rather than returned over budget."""

from __future__ import annotations

import pytest

from streamplan.errors import BudgetError
from streamplan.fusion.plan import schedule_with_fusion
from streamplan.memory import worst_case_peak
from streamplan.models import load_model
from streamplan.schedule.context import DEFAULT_CONTEXT, MemoryBudget


def _ctx(fusion: str, budget: str | None = "1.0x"):
    return DEFAULT_CONTEXT.replace(
        fusion=fusion, budget=MemoryBudget.parse(budget) if budget else None, time_limit_s=2.0
    )


def test_fused_first_the_budget_bounds_the_kernels():
    g = load_model("random:40:5")
    planned = schedule_with_fusion(g, "budget", _ctx("first"))
    assert len(planned.graph.nodes) < len(g.nodes)
    limit = planned.schedule.meta["budget_bytes"]
    assert worst_case_peak(planned.graph, planned.schedule).upper_bytes <= limit


def test_a_budget_with_stream_aware_fusion_is_refused():
    with pytest.raises(BudgetError, match="fusing along the streams afterwards"):
        schedule_with_fusion(load_model("random:40:5"), "budget", _ctx("stream-aware"))
    # without a budget, "the fastest schedule found" has nothing to keep, and fuses along streams
    planned = schedule_with_fusion(load_model("random:40:5"), "budget", _ctx("stream-aware", None))
    assert planned.schedule.fusion_mode == "stream-aware"
