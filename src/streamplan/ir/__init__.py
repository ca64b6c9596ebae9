"""The IR: values, nodes, graphs and stream schedules (plain data), verification, printing and JSON."""

from streamplan.ir.analysis import critical_path_ops, max_parallelism
from streamplan.ir.graph import Graph, Node, Storage, Value
from streamplan.ir.printer import format_graph
from streamplan.ir.schedule import StreamSchedule, Wait, check_structure, structure_problems
from streamplan.ir.serialize import dumps, load, loads, save
from streamplan.ir.verify import verify

__all__ = [
    "Graph",
    "Node",
    "Storage",
    "Value",
    "StreamSchedule",
    "Wait",
    "check_structure",
    "structure_problems",
    "verify",
    "format_graph",
    "dumps",
    "loads",
    "load",
    "save",
    "critical_path_ops",
    "max_parallelism",
]
