"""A training step's facts carried onto a graph whose nodes were merged or dropped.

The step's roles name storages and its phase boundaries name nodes (``ir/training.py``):
a storage that stays inside a kernel (or a repeated op's result, reused from its first
computation) has no role left, and a boundary node now lives in the kernel that runs it,
or, when it was dropped, the boundary moves to the next node that remains.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamplan.ir.graph import Graph

BOUNDARIES = ("first_backward_op", "first_optimizer_op")


def carried_training_facts(
    source: Graph, values: Mapping[str, Any], node_of: Mapping[str, str]
) -> dict[str, Any]:
    """``replace`` arguments for the new graph: its roles and meta (empty for inference).

    ``values`` are the new graph's values; ``node_of`` maps each source node id to the node
    that runs it now (absent: the node was dropped).
    """
    if not source.roles and "training" not in source.meta:
        return {}
    roles = {sid: r for sid, r in source.roles.items() if sid in values}
    facts = dict(source.meta.get("training") or {})
    for key in BOUNDARIES:
        op = facts.get(key)
        if op is None:
            continue
        later = (n.id for n in source.nodes[source.position(op) :] if n.id in node_of)
        first = next(later, None)
        facts[key] = node_of[first] if first is not None else None
    meta = {**source.meta, "training": facts} if "training" in source.meta else source.meta
    return {"roles": roles, "meta": meta}
