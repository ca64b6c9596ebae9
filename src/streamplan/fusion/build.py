"""Turn groups of ops into a graph of kernels: one fused node per group of two or more ops.

A fused node reads the values its parts read from outside and writes the values read
after it (or returned); the values passed between its parts leave the graph. A value
read outside the kernel keeps its storage: when it is a view of something the kernel
computes, that base is written out too (the kernel materialises it; the view stays a
view). Nodes come out in a topological order of the kernels that follows the original
order (each kernel where its first op was, as far as the dependencies allow).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Mapping, Sequence

from streamplan.cost.op_classes import op_base_name
from streamplan.fusion.groups import Grouping
from streamplan.fusion.kinds import op_class
from streamplan.fusion.training_meta import carried_training_facts
from streamplan.ir.dtypes import itemsize
from streamplan.ir.fused import CONCAT_IN_PLACE, make_fused_node
from streamplan.ir.graph import Graph, Node
from streamplan.ir.verify import verify

MAX_OP_NAMES = 6  # kernel names list at most this many distinct op names, as Inductor's do


def build_fused_graph(
    graph: Graph, grouping: Grouping, *, extra_deps: Mapping[str, Sequence[str]] | None = None
) -> tuple[Graph, dict[str, tuple[str, ...]]]:
    """The graph of kernels for ``grouping``, and each fused node's id -> its parts' ids.

    ``extra_deps`` (non-data orderings, e.g. a schedule's barriers) only shape the node order.
    """
    kernel_of: dict[str, str] = {}
    built: dict[str, Node] = {}
    parts_of: dict[str, tuple[str, ...]] = {}
    dropped: set[str] = set()
    for members in grouping.groups:
        if len(members) == 1:
            node = graph.node(members[0])
            if node.id in grouping.concats_in_place:
                node = _replace_attrs(node, {**node.attrs, CONCAT_IN_PLACE: True})
            built[node.id] = node
            kernel_of[node.id] = node.id
            continue
        node, internal = _fuse(graph, members, grouping.folds.get(members), taken=built.keys())
        built[node.id] = node
        parts_of[node.id] = members
        dropped |= internal
        for m in members:
            kernel_of[m] = node.id
    order = _kernel_order(graph, grouping.groups, kernel_of, extra_deps or {})
    values = {k: v for k, v in graph.values.items() if k not in dropped}
    training = carried_training_facts(graph, values, kernel_of)
    fused = graph.replace(nodes=tuple(built[k] for k in order), values=values, **training)
    return verify(fused), parts_of


def _fuse(
    graph: Graph, members: tuple[str, ...], fold: tuple[str, str] | None, taken
) -> tuple[Node, set[str]]:
    """One fused node for ``members`` (in graph order) and the values that stay inside it."""
    inside = set(members)
    parts = [graph.node(m) for m in members]
    produced = [v for p in parts for v in p.outputs]
    graph_outputs = set(graph.outputs)
    external = {v for v in produced if v in graph_outputs or any(c not in inside for c in graph.consumers(v))}
    external |= {graph.values[v].storage for v in external if graph.values[v].storage in set(produced)}
    outputs = [v for v in produced if v in external]
    internal = set(produced) - external
    inputs = list(dict.fromkeys(v for p in parts for v in p.inputs if v not in set(produced)))

    classes = [op_class(graph, p) for p in parts]
    kind = "gemm" if "gemm" in classes else "reduction" if "reduction" in classes else "pointwise"
    anchor = next((p.op for p, c in zip(parts, classes) if c == kind), parts[0].op)
    bn_inputs: set[str] = set()
    flops = 0
    for p in parts:
        if fold is not None and p.id == fold[1]:
            bn_inputs = set(p.inputs[1:])  # folded away before any run: no FLOPs, no reads
            continue
        flops += p.flops
    bytes_read = sum(graph.values[v].nbytes for v in inputs if v not in bn_inputs)
    if fold is not None:
        conv = graph.node(fold[0])
        out = graph.values[conv.outputs[0]]
        channels = out.shape[1] if len(out.shape) > 1 else 1
        conv_bias = [v for v in conv.inputs[2:] if graph.values[v].kind != "activation"]
        # the folded bias replaces the convolution's own (if any): one value per output channel
        bytes_read += channels * itemsize(out.dtype) - sum(graph.values[v].nbytes for v in conv_bias)
    bytes_written = sum(graph.values[v].nbytes for v in outputs if not graph.values[v].is_alias)
    names = list(dict.fromkeys(op_base_name(p.op) for p, c in zip(parts, classes) if c != "view"))
    op = "_".join(names[:MAX_OP_NAMES]) or op_base_name(parts[0].op)
    node = make_fused_node(
        _kernel_id(members, taken),
        op,
        parts,
        inputs,
        outputs,
        kind=kind,
        anchor=anchor,
        flops=flops,
        bytes_read=bytes_read,
        bytes_written=bytes_written,
        fold=fold,
    )
    return node, internal


def _kernel_id(members: tuple[str, ...], taken) -> str:
    """``a+b``, ``a+b+c``, or ``a+b+..+z`` for longer kernels (the first op makes it unique)."""
    base = "+".join(members) if len(members) <= 3 else f"{members[0]}+{members[1]}+..+{members[-1]}"
    kid, k = base, 1
    while kid in taken:
        k += 1
        kid = f"{base}#{k}"
    return kid


def _kernel_order(
    graph: Graph,
    groups: Sequence[tuple[str, ...]],
    kernel_of: Mapping[str, str],
    extra_deps: Mapping[str, Sequence[str]],
) -> list[str]:
    """Kernels in a topological order, each as early as its first op was in the graph."""
    first: dict[str, int] = {}
    preds: dict[str, set[str]] = {}
    for members in groups:
        k = kernel_of[members[0]]
        first[k] = min(graph.position(m) for m in members)
        ps: set[str] = set()
        for m in members:
            ps.update(kernel_of[u] for u in graph.predecessors(m))
            ps.update(kernel_of[u] for u in extra_deps.get(m, ()) if u in kernel_of)
        ps.discard(k)
        preds[k] = ps
    succs: dict[str, list[str]] = {k: [] for k in preds}
    for k, ps in preds.items():
        for p in ps:
            succs[p].append(k)
    missing = {k: len(ps) for k, ps in preds.items()}
    ready = [(first[k], k) for k, n in missing.items() if n == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for s in succs[k]:
            missing[s] -= 1
            if missing[s] == 0:
                heapq.heappush(ready, (first[s], s))
    if len(order) != len(preds):
        raise AssertionError("fusion produced a cycle between kernels")  # the grouping rules out cycles
    return order


def _replace_attrs(node: Node, attrs: Mapping) -> Node:
    return dataclasses.replace(node, attrs=dict(attrs))
