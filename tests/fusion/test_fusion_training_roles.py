"""Fusing a training step keeps what its memory analyses read: the roles of the storages that
remain (a storage inside a kernel has none) and phase boundaries that name kernels of the graph."""

from __future__ import annotations

import pytest

from helpers.training import two_branch_graph
from streamplan.fusion.plan import schedule_with_fusion
from streamplan.ir.training import training_step
from streamplan.memory.breakdown import memory_breakdown
from streamplan.schedule.context import ScheduleContext


@pytest.mark.parametrize("mode", ["first", "stream-aware"])
def test_fused_training_step_keeps_roles_and_phases(mode: str) -> None:
    graph = two_branch_graph("momentum")
    planned = schedule_with_fusion(graph, "asap", ScheduleContext(max_streams=4, fusion=mode))
    kernels = planned.graph
    assert len(kernels.nodes) < len(graph.nodes) and kernels.is_training
    assert set(kernels.roles) <= set(kernels.values)
    assert {r for r in kernels.roles.values()} >= {"parameter", "optimizer_state", "saved_activation"}
    step = training_step(kernels)
    assert kernels.has_node(step.first_backward_op) and kernels.has_node(step.first_optimizer_op)
    phases = {step.phase(kernels, n.id) for n in kernels.nodes}
    assert phases == {"forward", "backward", "optimizer"}
    breakdown = memory_breakdown(kernels, planned.schedule)
    assert breakdown.peak("host-order").composition["parameters"] == sum(
        kernels.values[s].nbytes for s, r in kernels.roles.items() if r == "parameter"
    )
