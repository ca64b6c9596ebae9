"""Shared helpers for the runtime tests."""

from __future__ import annotations

from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.runtime import compare_outputs, run
from streamplan.runtime.compare import _graph_order_reference


def assert_matches_reference(
    graph: Graph, schedule: StreamSchedule, *, chaos: bool = False, seed: int = 0, repeat: int = 1
) -> None:
    ref = _graph_order_reference(graph, seed=0)
    result = run(graph, schedule, chaos=chaos, chaos_seed=seed, repeat=repeat)
    ok, max_abs, _ = compare_outputs(result.outputs, ref)
    assert ok, f"{schedule.policy} on {graph.name}: max abs error {max_abs}"
