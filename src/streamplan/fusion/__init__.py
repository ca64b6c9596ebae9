"""Operator fusion as a graph transform that knows the schedule (``docs/fusion.md``).

- ``fuse(graph)`` -> ``FusionResult``: the graph of kernels a compiler like Inductor
  would run (pointwise chains, reductions with prologue and epilogue, batch-norm folded
  into convolutions, views free); with ``schedule=``, only ops on one stream fuse;
- ``schedule_onto(result, schedule)``: a schedule of the ops carried over to the kernels;
- ``schedule_with_fusion(graph, policy, ctx)``: the one place that applies
  ``ctx.fusion`` (``none``, ``first`` or ``stream-aware``) around ``make_schedule``.
"""

from streamplan.fusion.plan import FusedSchedule, graph_for_schedule, schedule_with_fusion
from streamplan.fusion.rules import INDUCTOR_RULES, FusionRules
from streamplan.fusion.transform import FusionResult, fuse, kernel_count, refuse, schedule_onto

__all__ = [
    "INDUCTOR_RULES",
    "FusedSchedule",
    "FusionResult",
    "FusionRules",
    "fuse",
    "graph_for_schedule",
    "kernel_count",
    "refuse",
    "schedule_onto",
    "schedule_with_fusion",
]
