"""``verify(graph)``: check the IR invariants and name the offending node with context."""

from __future__ import annotations

from streamplan.errors import GraphError
from streamplan.ir.collectives import collective_problems, is_collective
from streamplan.ir.dtypes import ITEMSIZE_BYTES
from streamplan.ir.fused import fused_problems, is_fused
from streamplan.ir.graph import ROLES, VALUE_KINDS, Graph, Node, Value

MAX_BYTES = 1 << 50  # a PiB: no tensor of a real model comes near
MAX_COST = 10**18  # flops or bytes moved by one op


def verify(graph: Graph) -> Graph:
    """Raise ``GraphError`` on the first broken invariant; return the graph otherwise.

    Checks: unique node and value ids; every referenced value exists; each value is
    written by at most one node and read only after it is written (the node order is
    topological, so the graph is acyclic); inputs/params are never written; aliases
    point at an existing storage root; kinds and dtypes are known; outputs exist;
    roles name storage roots and are known roles; a fused kernel's parts read only its
    inputs and each other's outputs and write its outputs; ordering-only dependencies
    (``after``) name earlier nodes; a recomputation names an original node with the same op;
    a collective has a known kind, a process group and sizes that agree with its kind.
    """
    _check_node_ids(graph)
    for v in graph.values.values():
        _check_value(graph, v)
    _check_roles(graph)
    written = _written_before_any_node(graph)
    seen_before: set[str] = set()
    for n in graph.nodes:
        _check_costs(graph, n)
        _check_reads(graph, n, written, seen_before)
        seen_before.add(n.id)
        _check_writes(graph, n, written)
    for vid in graph.outputs:
        if vid not in written:
            raise GraphError(f"graph output {vid!r} is never produced", where=graph.name)
    return graph


def _check_node_ids(graph: Graph) -> None:
    seen: set[str] = set()
    for n in graph.nodes:
        if n.id in seen:
            _fail(graph, n.id, f"duplicate node id {n.id!r}", "give every node a unique id")
        seen.add(n.id)


def _check_value(graph: Graph, v: Value) -> None:
    """A value's key, kind, dtype, size, and the storage root it aliases."""
    vid = v.id
    if graph.values.get(vid) is not v:
        key = next(k for k, x in graph.values.items() if x is v)
        raise GraphError(f"value stored under key {key!r} has id {vid!r}", where=graph.name)
    if v.kind not in VALUE_KINDS:
        raise GraphError(
            f"value {vid!r} has unknown kind {v.kind!r}",
            where=graph.name,
            hint=f"use one of {', '.join(VALUE_KINDS)}",
        )
    if v.dtype not in ITEMSIZE_BYTES:
        raise GraphError(f"value {vid!r} has unknown dtype {v.dtype!r}", where=graph.name)
    if v.nbytes < 0 or any((not isinstance(d, int)) or d < 0 for d in v.shape):
        raise GraphError(f"value {vid!r} has a negative or non-integer size", where=graph.name)
    if v.nbytes > MAX_BYTES or any(d > MAX_BYTES for d in v.shape):
        raise GraphError(
            f"value {vid!r} is larger than any device ({v.nbytes} bytes, shape {v.shape})",
            where=graph.name,
            hint="sizes are bytes and dimensions below 2^50",
        )
    root = graph.values.get(v.storage)
    if root is None:
        raise GraphError(
            f"value {vid!r} aliases storage {v.storage!r}, which is not a value of the graph",
            where=graph.name,
        )
    if root.storage != root.id:
        raise GraphError(
            f"value {vid!r} aliases {v.storage!r}, which is itself an alias",
            where=graph.name,
            hint="point aliases at the value that owns the storage",
        )


def _check_roles(graph: Graph) -> None:
    for vid, role in graph.roles.items():
        if role not in ROLES:
            raise GraphError(
                f"value {vid!r} has unknown role {role!r}",
                where=graph.name,
                hint=f"use one of {', '.join(ROLES)}",
            )
        v = graph.values.get(vid)
        if v is None or v.is_alias:
            raise GraphError(
                f"role given to {vid!r}, which is not a storage of the graph",
                where=graph.name,
                hint="roles are keyed by the value that owns a storage",
            )


def _written_before_any_node(graph: Graph) -> dict[str, str]:
    """The values that exist before the first node runs: inputs, params and constants."""
    written: dict[str, str] = {}
    for vid in (*graph.inputs, *graph.params):
        if vid not in graph.values:
            raise GraphError(f"graph input/param {vid!r} is not a value", where=graph.name)
        written[vid] = "<graph input>"
    for vid, v in graph.values.items():
        if v.kind == "constant":
            written.setdefault(vid, "<constant>")
    return written


def _check_costs(graph: Graph, n: Node) -> None:
    for fact in ("flops", "bytes_read", "bytes_written"):
        x = getattr(n, fact)
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_COST:
            _fail(graph, n.id, f"{fact} of {n.id!r} is {x!r}", f"{fact} is an integer from 0 to 10^18")


def _check_reads(graph: Graph, n: Node, written: dict[str, str], seen_before: set[str]) -> None:
    """What ``n`` reads exists and is written earlier; what it is ordered after comes earlier;
    a recomputation repeats an original node."""
    for vid in n.inputs:
        if vid not in graph.values:
            _fail(graph, n.id, f"node {n.id!r} reads {vid!r}, which is not a value", "check the input ids")
        if vid not in written:
            producer = graph.producer(vid)
            if producer is None:
                msg = f"node {n.id!r} reads {vid!r}, which nothing produces (dangling)"
            else:
                msg = (
                    f"node {n.id!r} reads {vid!r} before its producer {producer!r} runs (cycle or bad order)"
                )
            _fail(graph, n.id, msg, "the node list must be in topological order and acyclic")
    for nid in n.after:
        if nid not in seen_before:
            _fail(
                graph,
                n.id,
                f"node {n.id!r} is ordered after {nid!r}, which is not an earlier node",
                "ordering-only dependencies must point at nodes earlier in the list",
            )
    if n.recompute_of is not None:
        orig = graph.node(n.recompute_of) if graph.has_node(n.recompute_of) else None
        if orig is None or orig.op != n.op or orig.recompute_of is not None:
            _fail(
                graph,
                n.id,
                f"node {n.id!r} is marked as a recomputation of {n.recompute_of!r}, "
                "which is not an original node with the same op",
                None,
            )


def _check_writes(graph: Graph, n: Node, written: dict[str, str]) -> None:
    """``n`` mutates only what it reads, writes each value once and never an input or a
    parameter; a collective's sizes agree with its kind; a fused kernel's parts fit it."""
    for vid in n.mutates:
        if vid not in n.inputs:
            _fail(graph, n.id, f"node {n.id!r} mutates {vid!r}, which it does not read", None)
    for vid in n.outputs:
        if vid not in graph.values:
            _fail(graph, n.id, f"node {n.id!r} writes {vid!r}, which is not a value", None)
        if vid in written:
            _fail(graph, n.id, f"value {vid!r} is written twice (also by {written[vid]})", None)
        written[vid] = n.id
        if graph.values[vid].kind in ("input", "param", "buffer"):
            _fail(graph, n.id, f"node {n.id!r} writes {vid!r} of kind {graph.values[vid].kind}", None)
    if is_collective(n):
        problems = collective_problems(graph, n)
        if problems:
            _fail(
                graph, n.id, problems[0], "build collectives with streamplan.ir.collectives.collective_node"
            )
    if is_fused(n):
        problems = fused_problems(n)
        if problems:
            _fail(graph, n.id, problems[0], "rebuild the fused graph with streamplan.fusion")


def _fail(graph: Graph, node_id: str, message: str, hint: str | None) -> None:
    """Raise with the ±3 printed lines around the node, the offending one marked."""
    from streamplan.ir.printer import format_node

    pos = next(i for i, n in enumerate(graph.nodes) if n.id == node_id)
    lo, hi = max(0, pos - 3), min(len(graph.nodes), pos + 4)
    lines = []
    for i in range(lo, hi):
        mark = ">>" if i == pos else "  "
        lines.append(f"    {mark} {format_node(graph, graph.nodes[i])}")
    context = "\n".join(lines)
    raise GraphError(message, where=f"{graph.name}, node {node_id}", hint=hint, details=context)
