"""Structural facts about a graph: critical path, levels, and maximum parallelism."""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.ir.graph import Graph

EXACT_PARALLELISM_MAX_NODES = 5000


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
    reach = transitive_closure_bits(graph)
    return Parallelism(n - _max_matching_bits(reach), True)


def _max_matching_bits(adj: list[int]) -> int:
    """Maximum bipartite matching (left u -> right v where bit v of adj[u] is set).

    Greedy start, then Kuhn's augmenting paths with bitsets of unvisited right nodes.
    """
    n = len(adj)
    match_right = [-1] * n
    match_left = [-1] * n
    free_right = (1 << n) - 1
    for u in range(n):
        cand = adj[u] & free_right
        if cand:
            v = (cand & -cand).bit_length() - 1
            match_left[u], match_right[v] = v, u
            free_right &= ~(1 << v)
    size = sum(1 for v in match_left if v >= 0)
    for root in range(n):
        if match_left[root] >= 0 or not adj[root]:
            continue
        unvisited = (1 << n) - 1
        # iterative DFS: stack of (left node, remaining candidate bits)
        stack = [(root, adj[root] & unvisited)]
        parent_v: list[int] = []
        found = -1
        while stack:
            u, cand = stack[-1]
            cand &= unvisited
            if not cand:
                stack.pop()
                if parent_v:
                    parent_v.pop()
                continue
            v = (cand & -cand).bit_length() - 1
            unvisited &= ~(1 << v)
            stack[-1] = (u, cand & ~(1 << v))
            if match_right[v] < 0:
                found = v
                parent_v.append(v)
                break
            parent_v.append(v)
            w = match_right[v]
            stack.append((w, adj[w] & unvisited))
        if found < 0:
            continue
        # flip the path: stack[i][0] is matched to parent_v[i]
        for (u, _), v in zip(stack, parent_v):
            match_left[u], match_right[v] = v, u
        size += 1
    return size


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
