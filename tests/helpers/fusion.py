"""Graphs for the fusion tests: random DAGs with fusion boundaries, and tiny torch blocks."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from helpers.dags import random_dags
from streamplan.ir.graph import Graph


def with_gemms(graph: Graph, ops: set[str]) -> Graph:
    """``graph`` with the ops ``ops`` relabelled as convolutions: fusion boundaries (not executable)."""
    nodes = tuple(
        dataclasses.replace(n, op="aten.convolution.default") if n.id in ops else n for n in graph.nodes
    )
    return graph.replace(nodes=nodes)


@st.composite
def dags_with_boundaries(draw, min_nodes: int = 2, max_nodes: int = 8) -> Graph:
    """A random DAG of pointwise ops, some of them turned into GEMMs so that several kernels remain."""
    g = draw(random_dags(min_nodes=min_nodes, max_nodes=max_nodes, vary_sizes=True))
    gemms = draw(st.sets(st.sampled_from(g.node_ids), max_size=len(g.nodes) // 2))
    return with_gemms(g, gemms)
