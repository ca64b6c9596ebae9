"""Turn a plan (a sequence of op positions with repeats) into a new ``Graph``.

Every later appearance of an op becomes an ordinary node marked as a recomputation
(``attrs["recompute_of"]`` = the original node's id) that writes new values; the
readers after it use those values instead of the original's, so the original's
storage dies at its last reader before the recomputation. A view of a recomputed
storage is derived again (a recomputation of the view op, costing nothing) right
before the reader that needs it.

Each recomputation is ordered (``Node.after``, no data) after the original op that
precedes it in the plan and after every reader of the copy it replaces. Without the
first a multi-stream policy could run it as soon as its inputs exist — long before
it is needed, which would undo the saving; the second keeps the two copies of a
value from ever being live together. On one stream, in the graph's order, the
rewritten graph runs exactly the plan, so its peak is the plan's host-order peak.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from streamplan.ir.graph import RECOMPUTE_OF, Graph, Node, Value
from streamplan.ir.verify import verify
from streamplan.remat.problem import RematProblem, normalize


def rewrite(problem: RematProblem, seq: tuple[int, ...]) -> Graph:
    """The graph that runs plan ``seq`` of ``problem`` (normalised first), verified."""
    return _Rewriter(problem).run(normalize(problem, tuple(seq)))


def recomputations(graph: Graph) -> tuple[Node, ...]:
    """The recomputation nodes of a graph, in order."""
    return tuple(n for n in graph.nodes if n.recompute_of is not None)


class _Rewriter:
    def __init__(self, problem: RematProblem):
        self.p = problem
        self.g = problem.graph
        self.index = {sid: i for i, sid in enumerate(problem.storage_ids)}
        self.values: dict[str, Value] = dict(self.g.values)
        self.nodes: list[Node] = []
        self.node_ids: set[str] = set(self.g.node_ids)
        self.copy_no: dict[int, int] = {}  # storage -> its current copy number
        self.vmap: dict[tuple[int, int], dict[str, str]] = {}  # (storage, copy) -> original value -> value
        self.readers: dict[tuple[int, int], list[str]] = {}  # (storage, copy) -> nodes that read it
        self.times: dict[str, int] = {}  # original node id -> copies made so far
        self.last_original: str | None = None
        self.producer_of: dict[str, str] = {}  # value -> the node that writes it in the new graph
        self.copy_of: dict[str, str] = {}  # storage of a recomputed copy -> the original's storage

    def run(self, seq: tuple[int, ...]) -> Graph:
        seen: set[int] = set()
        for k in seq:
            node = self.g.node(self.p.order[k])
            if k in seen:
                self._recompute(node)
            else:
                seen.add(k)
                self._original(node)
        g = self.g
        meta = dict(g.meta)
        made = sum(1 for n in self.nodes if n.recompute_of is not None)
        meta["remat"] = {"recomputations": made}
        roles = dict(g.roles)
        for copy, original in self.copy_of.items():  # a recomputed copy is what its original is for
            if original in g.roles:
                roles[copy] = g.roles[original]
        out = Graph(
            name=g.name,
            nodes=tuple(self.nodes),
            values=self.values,
            inputs=g.inputs,
            params=g.params,
            outputs=g.outputs,
            meta=meta,
            param_names=g.param_names,
            roles=roles,
        )
        return verify(out)

    # -- values ----------------------------------------------------------------
    def _storage(self, value_id: str) -> int | None:
        return self.index.get(self.g.storage_of(value_id))

    def _resolve(self, value_id: str, reader: list[str] | None = None) -> str:
        """The value a reader uses now for original value ``value_id`` (deriving a view again
        when its storage was recomputed)."""
        s = self._storage(value_id)
        if s is None:
            return value_id  # a leaf, or a storage nobody counts
        c = self.copy_no.get(s, 0)
        table = self.vmap.setdefault((s, c), {})
        if c == 0:
            table.setdefault(self.p.storage_ids[s], self.p.storage_ids[s])
        if value_id not in table:
            self._reissue_view(self.g.node(self.g.producer(value_id)), s, c)
        return table[value_id]

    def _resolve_root(self, s: int, c: int) -> str:
        sid = self.p.storage_ids[s]
        return self.vmap[(s, c)][sid] if c else sid

    def _map_inputs(self, node: Node) -> dict[str, str]:
        mapping = {}
        for v in dict.fromkeys(node.inputs):
            mapping[v] = self._resolve(v)
        return mapping

    def _note_reads(self, node_id: str, original: Node) -> None:
        for v in dict.fromkeys(original.inputs):
            s = self._storage(v)
            if s is not None:
                self.readers.setdefault((s, self.copy_no.get(s, 0)), []).append(node_id)

    # -- nodes -------------------------------------------------------------------
    def _original(self, node: Node) -> None:
        mapping = self._map_inputs(node)
        for o in node.outputs:
            s = self._storage(o)
            if s is None:
                continue
            v = self.g.values[o]
            if v.is_alias:  # a view (or in-place result) of the storage's current copy
                c = self.copy_no.get(s, 0)
                root = self._resolve_root(s, c)
                if root != v.storage:
                    self.values[o] = dataclasses.replace(v, storage=root)
                self.vmap.setdefault((s, c), {})[o] = o
            else:  # the op creates this storage: its first copy
                self.copy_no[s] = 0
                self.vmap[(s, 0)] = {o: o}
        self._note_reads(node.id, node)
        if all(k == v for k, v in mapping.items()):
            self._emit(node)  # it reads what it always read: the node as it is
        else:
            self._emit(_renamed(node, node.id, node.outputs, mapping, recompute_of=None, after=node.after))
        self.last_original = node.id

    def _recompute(self, node: Node) -> None:
        mapping = self._map_inputs(node)
        j = self.times.get(node.id, 0) + 1
        self.times[node.id] = j
        new_id = self._fresh_node(f"{node.id}_remat{j}")
        outs = []
        after: dict[str, None] = {}
        if self.last_original is not None:
            after[self.last_original] = None
        for o in node.outputs:
            s = self._storage(o)
            new_o = self._fresh_value(f"{o}_remat{j}")
            v = self.g.values[o]
            self.values[new_o] = Value(new_o, v.shape, v.dtype, v.nbytes, "activation")
            self.copy_of[new_o] = v.storage
            outs.append(new_o)
            if s is None:
                continue
            prev = self.copy_no.get(s, 0)
            for r in self.readers.get((s, prev), ()):
                after[r] = None
            self.copy_no[s] = prev + 1
            self.vmap[(s, prev + 1)] = {o: new_o}
        data_preds = {self.producer_of.get(v) for v in mapping.values()}
        order_only = tuple(a for a in after if a not in data_preds and a != new_id)
        self._note_reads(new_id, node)
        of = node.recompute_of or node.id  # a recomputation names the original, never another copy
        self._emit(_renamed(node, new_id, tuple(outs), mapping, recompute_of=of, after=order_only))

    def _reissue_view(self, view: Node, s: int, c: int) -> None:
        """Run view op ``view`` again on copy ``c`` of storage ``s``."""
        mapping = self._map_inputs(view)
        j = self.times.get(view.id, 0) + 1
        self.times[view.id] = j
        new_id = self._fresh_node(f"{view.id}_remat{j}")
        root = self._resolve_root(s, c)
        outs = []
        for o in view.outputs:
            v = self.g.values[o]
            new_o = self._fresh_value(f"{o}_remat{j}")
            self.values[new_o] = Value(new_o, v.shape, v.dtype, v.nbytes, "activation", storage=root)
            self.vmap.setdefault((s, c), {})[o] = new_o
            outs.append(new_o)
        self._note_reads(new_id, view)
        of = view.recompute_of or view.id
        self._emit(_renamed(view, new_id, tuple(outs), mapping, recompute_of=of, after=()))

    def _emit(self, node: Node) -> None:
        self.nodes.append(node)
        self.node_ids.add(node.id)
        for o in node.outputs:
            self.producer_of[o] = node.id

    def _fresh_node(self, base: str) -> str:
        name, k = base, 1
        while name in self.node_ids:
            k += 1
            name = f"{base}_{k}"
        self.node_ids.add(name)
        return name

    def _fresh_value(self, base: str) -> str:
        name, k = base, 1
        while name in self.values:
            k += 1
            name = f"{base}_{k}"
        return name


def _renamed(
    node: Node,
    new_id: str,
    outputs: tuple[str, ...],
    mapping: dict[str, str],
    *,
    recompute_of: str | None,
    after: tuple[str, ...],
) -> Node:
    attrs = dict(node.attrs)
    for key in ("args", "kwargs"):
        if key in attrs:
            attrs[key] = _remap_refs(attrs[key], mapping)
    if recompute_of is not None:
        attrs[RECOMPUTE_OF] = recompute_of
    return Node(
        id=new_id,
        op=node.op,
        inputs=tuple(mapping.get(v, v) for v in node.inputs),
        outputs=outputs,
        attrs=attrs,
        flops=node.flops,
        bytes_read=node.bytes_read,
        bytes_written=node.bytes_written,
        mutates=tuple(mapping.get(v, v) for v in node.mutates),
        after=after,
    )


def _remap_refs(obj: Any, mapping: dict[str, str]) -> Any:
    """Encoded call arguments with every tensor reference ``{"$v": id}`` renamed by ``mapping``."""
    if isinstance(obj, dict):
        if "$v" in obj:
            return {"$v": mapping.get(obj["$v"], obj["$v"])}
        return {k: _remap_refs(v, mapping) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_remap_refs(v, mapping) for v in obj]
    return obj
