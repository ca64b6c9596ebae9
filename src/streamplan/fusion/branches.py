"""Which fused kernels merged parallel branches: ops that were independent, now one kernel.

Inside a kernel, every dependency path between two of its ops stays inside it (a
path through another kernel would be a cycle), so the kernel's ops and the edges
between them say everything. Ops ordered with every other op of the kernel are its
trunk (a shared producer, a joining consumer); the rest fall into branches: the
groups of ops connected without the trunk. A kernel with two or more branches runs,
as one kernel, work a stream scheduler could have run in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.fusion.transform import FusionResult
from streamplan.ir.graph import Graph


@dataclass(frozen=True)
class MergedBranches:
    """A kernel that runs independent branches of the source graph (each a tuple of op ids)."""

    kernel: str
    branches: tuple[tuple[str, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "branches": [list(b) for b in self.branches]}


def merged_branches(result: FusionResult) -> list[MergedBranches]:
    """Every fused kernel of ``result`` that merged two or more independent branches."""
    found = []
    for kernel, parts in result.groups.items():
        branches = _branches(result.base, parts)
        if len(branches) >= 2:
            found.append(MergedBranches(kernel, branches))
    return found


def _branches(graph: Graph, parts: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    inside = set(parts)
    succ = {p: [s for s in graph.successors(p) if s in inside] for p in parts}
    reach: dict[str, set[str]] = {}
    for p in reversed(parts):  # parts are in graph (topological) order
        r: set[str] = set()
        for s in succ[p]:
            r |= {s} | reach[s]
        reach[p] = r
    ordered_with_all = {p for p in parts if all(q == p or q in reach[p] or p in reach[q] for q in parts)}
    rest = [p for p in parts if p not in ordered_with_all]
    component: dict[str, int] = {}
    for p in rest:  # union the branch ops connected by edges that avoid the trunk
        component.setdefault(p, len(component))
    for p in rest:
        for s in succ[p]:
            if s in component and component[s] != component[p]:
                old, new = component[s], component[p]
                for q, c in component.items():
                    if c == old:
                        component[q] = new
    groups: dict[int, list[str]] = {}
    for p in rest:
        groups.setdefault(component[p], []).append(p)
    return tuple(tuple(g) for g in groups.values())
