"""A compact text form of a graph, one line per node (in the spirit of a jaxpr)."""

from __future__ import annotations

from typing import Any

# graph.py imports this module (``Graph.__str__``), so it must not import graph.py back:
# the functions take the IR's objects by shape.
Graph = Node = Value = Any

_SHORT_DTYPE = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "float64": "f64",
    "int64": "i64",
    "int32": "i32",
    "int8": "i8",
    "uint8": "u8",
    "bool": "b1",
}


def format_type(v: Value) -> str:
    dims = ",".join(str(d) for d in v.shape)
    alias = f" @{v.storage}" if v.is_alias else ""
    return f"{_SHORT_DTYPE.get(v.dtype, v.dtype)}[{dims}]{alias}"


def format_node(graph: Graph, node: Node) -> str:
    outs = ", ".join(
        f"%{o}:{format_type(graph.values[o])}" if o in graph.values else f"%{o}:?" for o in node.outputs
    )
    ins = ", ".join(("!" if i in node.mutates else "") + f"%{i}" for i in node.inputs)
    note = ""
    of = node.attrs.get("recompute_of")
    if of:
        note += f" (recompute of {of})"
    if node.after:
        note += " after " + ", ".join(node.after)
    if node.op.startswith("comm."):  # a collective: who takes part
        note += f" [group {node.attrs.get('group')} of {node.attrs.get('group_size')}]"

    return f"{outs} = {node.op}({ins})  # {node.id}{note}"


def format_graph(graph: Graph) -> str:
    """The whole graph: a header with inputs/params, one line per node, the outputs."""
    lines = [f"graph {graph.name}("]
    for vid in (*graph.inputs, *graph.params):
        v = graph.values[vid]
        lines.append(f"    %{vid}: {format_type(v)} {v.kind}")
    lines.append(") {")
    for n in graph.nodes:
        lines.append("  " + format_node(graph, n))
    lines.append("  return " + ", ".join(f"%{o}" for o in graph.outputs))
    lines.append("}")
    return "\n".join(lines)
