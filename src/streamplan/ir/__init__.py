"""The graph IR: values, nodes, graphs, verification, printing and JSON."""

from streamplan.ir.analysis import critical_path_ops, max_parallelism
from streamplan.ir.graph import Graph, Node, Storage, Value
from streamplan.ir.printer import format_graph
from streamplan.ir.serialize import dumps, load, loads, save
from streamplan.ir.verify import verify

__all__ = [
    "Graph",
    "Node",
    "Storage",
    "Value",
    "verify",
    "format_graph",
    "dumps",
    "loads",
    "load",
    "save",
    "critical_path_ops",
    "max_parallelism",
]
