"""Structural facts about a graph: critical path, levels, and maximum parallelism."""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.graph import Graph

EXACT_PARALLELISM_MAX_NODES = 3000


def levels(graph: Graph) -> list[int]:
    """Level of each node (by position): 0 for nodes with no predecessors, else 1 + max pred level."""
    lv = [0] * len(graph.nodes)
    for i, ps in enumerate(graph.pred_positions()):
        if ps:
            lv[i] = 1 + max(lv[j] for j in ps)
    return lv


def critical_path_ops(graph: Graph) -> int:
    """Number of ops on the longest dependency chain."""
    return (max(levels(graph)) + 1) if graph.nodes else 0


@dataclass(frozen=True, slots=True)
class Parallelism:
    """The widest set of mutually independent ops; ``exact`` False means a lower bound."""

    width: int
    exact: bool


def max_parallelism(graph: Graph) -> Parallelism:
    """Maximum antichain of the dependency DAG (Dilworth: n - maximum matching of the closure).

    Exact up to ``EXACT_PARALLELISM_MAX_NODES`` ops (bitset closure + scipy's
    Hopcroft-Karp); above that, the widest level, which is a lower bound.
    """
    n = len(graph.nodes)
    if n == 0:
        return Parallelism(0, True)
    if n > EXACT_PARALLELISM_MAX_NODES:
        lv = levels(graph)
        counts: dict[int, int] = {}
        for x in lv:
            counts[x] = counts.get(x, 0) + 1
        return Parallelism(max(counts.values()), False)
    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    reach = transitive_closure_bits(graph)
    rows: list[int] = []
    cols: list[int] = []
    for u, bits in enumerate(reach):
        v = 0
        while bits:
            low = bits & -bits
            v = low.bit_length() - 1
            rows.append(u)
            cols.append(v)
            bits ^= low
    if not rows:
        return Parallelism(n, True)
    m = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n, n))
    match = maximum_bipartite_matching(m, perm_type="column")
    return Parallelism(n - int((match >= 0).sum()), True)


def transitive_closure_bits(graph: Graph) -> list[int]:
    """For each node position u, an int whose bit v is set when u reaches v (u != v)."""
    succ = graph.succ_positions()
    reach = [0] * len(graph.nodes)
    for u in range(len(graph.nodes) - 1, -1, -1):
        bits = 0
        for v in succ[u]:
            bits |= reach[v] | (1 << v)
        reach[u] = bits
    return reach
