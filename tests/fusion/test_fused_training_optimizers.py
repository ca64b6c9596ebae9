"""Fusion of training steps: an optimizer's role-tagged temporaries (Adam's ``sqrt``, its
denominator) that a kernel keeps inside it leave the graph with their roles, so the kernels
of a step with an optimizer update verify and every memory figure runs on them."""

from __future__ import annotations

import pytest

from helpers.training import mlp_graph
from streamplan.fusion.plan import schedule_with_fusion
from streamplan.ir.verify import verify
from streamplan.memory import analyze_memory
from streamplan.schedule.context import DEFAULT_CONTEXT


@pytest.mark.parametrize("mode", ["first", "stream-aware"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_fused_training_step_keeps_roles_of_kept_values_only(mode, optimizer):
    step = mlp_graph(optimizer)
    planned = schedule_with_fusion(step, "asap", DEFAULT_CONTEXT.replace(fusion=mode))
    kernels = planned.graph
    assert len(kernels.nodes) < len(step.nodes)  # something was fused
    assert set(kernels.roles) <= set(kernels.values)
    verify(kernels)
    assert kernels.is_training
    # every role the kernels keep is the step's own
    assert all(step.roles[v] == r for v, r in kernels.roles.items())
    rep = analyze_memory(kernels, planned.schedule)
    assert rep.worst_case.upper_bytes >= rep.host_order_peak_bytes > 0


def test_adam_temporaries_fused_away_lose_their_roles():
    step = mlp_graph("adam")
    planned = schedule_with_fusion(step, "sequential", DEFAULT_CONTEXT.replace(fusion="first"))
    gone = set(step.roles) - set(planned.graph.values)
    assert gone  # the sqrt of each parameter's second moment stays inside its update kernel
    assert {step.roles[v] for v in gone} == {"temporary"}
