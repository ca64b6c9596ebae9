"""Leaving the tool: a schedule written as a self-contained PyTorch module (``streamplan codegen``).

``generate_module(graph, schedule)`` returns the source of a module that imports torch
only and runs the graph's ATen ops in the schedule's launch order, on CUDA streams
with events, ``record_stream`` and frees where the memory analysis assumes them (or
in launch order on the CPU). ``launch_plan`` is the per-launch plan it follows.
"""

from streamplan.codegen.header import Predictions
from streamplan.codegen.module import default_class_name, generate_module, weight_names
from streamplan.codegen.plan import LaunchPlan, LaunchStep, launch_plan

__all__ = [
    "LaunchPlan",
    "LaunchStep",
    "Predictions",
    "default_class_name",
    "generate_module",
    "launch_plan",
    "weight_names",
]
