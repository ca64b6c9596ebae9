"""Common subexpression elimination: an op that repeats an earlier op on the same inputs is not run.

Compilers deduplicate before they fuse (AOTAutograd's CSE pass runs before Inductor
sees the graph): NASNet's cells apply ReLU to the same tensor once per branch, and a
compiled model computes it once. Two ops are the same when they have the same op, the
same inputs and the same call arguments, and neither writes in place, draws random
numbers or produces a graph output. The later one is dropped and its readers read the
earlier one's outputs (a view of a dropped value becomes a view of the kept one).

``key(op)`` restricts it: ops with different keys are never merged (the stream-aware
order gives each op its stream, so a reader never starts waiting for another stream).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from streamplan.cost.op_classes import op_base_name
from streamplan.fusion.kinds import op_class
from streamplan.fusion.training_meta import carried_training_facts
from streamplan.ir.graph import Graph, Node

RANDOM_OPS = frozenset(
    {
        "rand",
        "randn",
        "rand_like",
        "randn_like",
        "randint",
        "bernoulli",
        "native_dropout",
        "normal",
        "uniform",
    }
)


def find_duplicates(graph: Graph, key: Callable[[str], Hashable] | None = None) -> dict[str, str]:
    """Each dropped op -> the earlier op whose results it reuses."""
    key = key or (lambda _op: 0)
    rename: dict[str, str] = {}
    seen: dict[tuple, Node] = {}
    dropped: dict[str, str] = {}
    outputs = set(graph.outputs)
    for node in graph.nodes:
        if not _pure(graph, node) or outputs.intersection(node.outputs):
            continue
        sig = (
            key(node.id),
            node.op,
            tuple(rename.get(v, v) for v in node.inputs),
            _canonical(node.attrs, rename),
        )
        first = seen.get(sig)
        if first is None:
            seen[sig] = node
            continue
        dropped[node.id] = first.id
        rename.update(zip(node.outputs, first.outputs, strict=True))
    return dropped


def deduplicate(graph: Graph, dropped: Mapping[str, str]) -> Graph:
    """``graph`` without the ``dropped`` ops, their readers reading the kept ops' outputs."""
    if not dropped:
        return graph
    rename: dict[str, str] = {}
    for node_id, kept in dropped.items():
        rename.update(zip(graph.node(node_id).outputs, graph.node(kept).outputs, strict=True))
    nodes = []
    for node in graph.nodes:
        if node.id in dropped:
            continue
        if rename.keys() & set(node.inputs):
            node = dataclasses.replace(
                node,
                inputs=tuple(dict.fromkeys(rename.get(v, v) for v in node.inputs)),
                mutates=tuple(rename.get(v, v) for v in node.mutates),
                attrs=_renamed(node.attrs, rename),
            )
        nodes.append(node)
    values = {}
    for vid, value in graph.values.items():
        if vid in rename:
            continue
        if value.storage in rename:
            value = dataclasses.replace(value, storage=rename[value.storage])
        values[vid] = value
    training = carried_training_facts(graph, values, {n.id: n.id for n in nodes})
    return graph.replace(nodes=tuple(nodes), values=values, **training)


def _pure(graph: Graph, node: Node) -> bool:
    return (
        bool(node.outputs)
        and not node.mutates
        and op_base_name(node.op) not in RANDOM_OPS
        and op_class(graph, node) != "opaque"
    )


def _canonical(attrs: Mapping[str, Any], rename: Mapping[str, str]) -> str:
    return json.dumps(_renamed(attrs, rename), sort_keys=True, default=str)


def _renamed(x: Any, rename: Mapping[str, str]) -> Any:
    """``x`` with every tensor reference ``{"$v": id}`` renamed."""
    if isinstance(x, Mapping):
        if "$v" in x and len(x) == 1:
            return {"$v": rename.get(x["$v"], x["$v"])}
        return {k: _renamed(v, rename) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_renamed(v, rename) for v in x]
    return x
