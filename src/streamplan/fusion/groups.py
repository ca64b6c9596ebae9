"""Which ops share a kernel: the greedy grouping at the heart of the fusion transform.

Groups start as single ops and are merged, as Inductor's scheduler merges nodes:

1. an inference batch-norm joins the convolution it follows (weights folded) when the
   convolution's output feeds nothing else;
2. along every data edge, producer and consumer groups merge when their classes allow
   it (pointwise into pointwise; pointwise prologue or epilogue into a reduction; two
   reductions over the same sizes; views anywhere but in a GEMM; pointwise epilogues
   into a GEMM only with ``gemm_epilogue``), except that a window op (pooling, padding,
   gathers) takes in a producer only when nothing else reads the producer's output;
3. groups of the same size that read a common tensor merge (horizontal fusion), when
   their ops lie within ``horizontal_window`` ops of each other in the graph's order.

Steps 2 and 3 repeat until nothing changes. A merge never creates a cycle between
kernels (no path may leave one group and come back into the other), never exceeds
``max_kernel_ops``, and never joins ops whose ``key`` differs: the stream-aware order
gives every op its stream as key, so only ops one stream runs in order share a kernel.
Opaque ops never merge. A concatenation whose inputs all come from pointwise or
reduction kernels is written in place by them: when one kernel writes all of them (and
nothing else reads them) the concatenation becomes its last step, otherwise it stays
a node that launches nothing (``concat_in_place``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from streamplan.frontends.argcodec import iter_tensor_refs
from streamplan.fusion.kinds import (
    foldable_batch_norm,
    foldable_convolution,
    in_numel,
    op_class,
    out_numel,
    reads_neighbours,
)
from streamplan.fusion.rules import FusionRules
from streamplan.ir.graph import Graph, Node

MAX_ROUNDS = 10
KERNEL_CLASSES = ("pointwise", "reduction")


@dataclass
class _Group:
    gid: int  # the position of its first op (ids are never reused)
    members: list[int]  # positions in the graph
    cls: str  # an OpClass
    key: Hashable
    numels: set[int] = field(default_factory=set)  # iteration sizes of pointwise members
    sig: tuple[int, int] | None = None  # (input, output) elements of its reductions
    gemm_out: int = 0
    fold: tuple[int, int] | None = None  # (conv, batch-norm) positions
    lo: int = 0  # first and last position of its ops in the graph's order
    hi: int = 0


@dataclass(frozen=True)
class Grouping:
    """The kernels found: groups of op ids (each in graph order; singletons included),
    the folded (convolution, batch-norm) pairs, and the concatenations written in place."""

    groups: tuple[tuple[str, ...], ...]
    folds: Mapping[tuple[str, ...], tuple[str, str]]
    concats_in_place: frozenset[str]


def find_groups(
    graph: Graph,
    rules: FusionRules,
    *,
    key: Callable[[str], Hashable] | None = None,
    extra_deps: Mapping[str, Sequence[str]] | None = None,
) -> Grouping:
    """Group ``graph``'s ops into kernels under ``rules``.

    ``key(op)``: ops with different keys never share a kernel (default: one key).
    ``extra_deps[v]`` lists ops v must follow besides its data dependencies (a
    schedule's barriers): no kernel may depend on itself through them either.
    """
    return _Grouper(graph, rules, key or (lambda _op: 0), extra_deps or {}).run()


class _Grouper:
    def __init__(
        self,
        graph: Graph,
        rules: FusionRules,
        key: Callable[[str], Hashable],
        extra_deps: Mapping[str, Sequence[str]],
    ):
        self.g = graph
        self.rules = rules
        ids = graph.node_ids
        pos = {nid: i for i, nid in enumerate(ids)}
        # kernel-level dependencies (data edges plus extra ones), kept up to date by _absorb
        self.succ_g: dict[int, set[int]] = {i: set(s) for i, s in enumerate(graph.succ_positions())}
        self.pred_g: dict[int, set[int]] = {i: set(p) for i, p in enumerate(graph.pred_positions())}
        for v, us in extra_deps.items():
            for u in us:
                if u in pos and v in pos and u != v:
                    self.succ_g[pos[u]].add(pos[v])
                    self.pred_g[pos[v]].add(pos[u])
        self.window_members = {i for i, n in enumerate(graph.nodes) if reads_neighbours(n)}
        self.graph_outputs = set(graph.outputs)
        self.group_of = list(range(len(ids)))
        self.groups: dict[int, _Group] = {}
        for i, node in enumerate(graph.nodes):
            cls = op_class(graph, node)
            grp = _Group(i, [i], cls, key(node.id), lo=i, hi=i)
            if cls == "pointwise":
                grp.numels.add(out_numel(graph, node))
            elif cls == "reduction":
                grp.sig = (in_numel(graph, node), out_numel(graph, node))
            elif cls == "gemm":
                grp.gemm_out = out_numel(graph, node)
            self.groups[i] = grp

    # -- the passes ------------------------------------------------------------
    def run(self) -> Grouping:
        if self.rules.fold_batch_norm:
            self._fold_batch_norms()
        for _ in range(MAX_ROUNDS):
            changed = self._vertical()
            if self.rules.horizontal:
                changed |= self._horizontal()
            if not changed:
                break
        if self.rules.concat_in_place:
            self._concats_into_kernels()
        return self._result()

    def _concats_into_kernels(self) -> None:
        """A concatenation whose inputs one kernel writes, and nothing else reads, becomes that
        kernel's last step: the kernel writes the concatenation and its inputs stay inside."""
        g = self.g
        for i, node in enumerate(g.nodes):
            if self.groups[self.group_of[i]].cls != "concat" or not self._writable_in_place(node):
                continue
            kernels = {self.group_of[g.position(g.producer(v))] for v in node.inputs}
            if len(kernels) != 1:
                continue
            kernel, concat = self.groups[kernels.pop()], self.groups[self.group_of[i]]
            private = all(g.consumers(v) == (node.id,) and v not in g.outputs for v in node.inputs)
            if private and kernel.key == concat.key:
                self._absorb(kernel, concat)

    def _fold_batch_norms(self) -> None:
        g = self.g
        for i, node in enumerate(g.nodes):
            if not foldable_batch_norm(g, node):
                continue
            x = node.inputs[0]
            p = g.producer(x)
            if p is None or x in g.outputs or g.consumers(x) != (node.id,):
                continue
            c = g.position(p)
            conv, bn = self.groups[self.group_of[c]], self.groups[self.group_of[i]]
            if conv.cls != "gemm" or conv.fold or len(conv.members) != 1 or bn.key != conv.key:
                continue
            if not foldable_convolution(g.nodes[c]):
                continue
            conv.fold = (c, i)
            self._absorb(conv, bn)

    def _vertical(self) -> bool:
        changed = False
        for v, preds in enumerate(self.g.pred_positions()):
            for u in preds:
                a, b = self.group_of[u], self.group_of[v]
                if a != b and self._try_merge(self.groups[a], self.groups[b], vertical=True):
                    changed = True
        return changed

    def _horizontal(self) -> bool:
        g = self.g
        changed = False
        for vid, value in g.values.items():
            if value.kind not in ("activation", "input"):
                continue
            readers = g.consumers(vid)
            for i, r1 in enumerate(readers):
                for r2 in readers[i + 1 :]:
                    a, b = self.group_of[g.position(r1)], self.group_of[g.position(r2)]
                    if a == b:
                        continue
                    ga, gb = self.groups[a], self.groups[b]
                    far = max(abs(ga.lo - gb.hi), abs(gb.lo - ga.hi)) > self.rules.horizontal_window
                    if ga.cls in KERNEL_CLASSES and gb.cls in KERNEL_CLASSES and not far:
                        changed |= self._try_merge(ga, gb, vertical=False)
        return changed

    # -- merging ---------------------------------------------------------------
    def _try_merge(self, a: _Group, b: _Group, *, vertical: bool) -> bool:
        """Merge ``a`` into ``b`` or back when allowed; for a vertical merge ``a`` produces for ``b``."""
        if a.key != b.key or len(a.members) + len(b.members) > self.rules.max_kernel_ops:
            return False
        if not self._compatible(a, b, vertical) or not self._windows_inline(a, b):
            return False
        if self._reaches_through_other(a, b) or self._reaches_through_other(b, a):
            return False
        big, small = (a, b) if len(a.members) >= len(b.members) else (b, a)
        self._absorb(big, small, cls=self._merged_class(a, b))
        return True

    def _compatible(self, a: _Group, b: _Group, vertical: bool) -> bool:
        classes = {a.cls, b.cls}
        if classes & {"opaque", "concat"}:
            return False
        if "gemm" in classes:
            # only a pointwise epilogue, after the GEMM, and of the GEMM's output size
            gemm, other = (a, b) if a.cls == "gemm" else (b, a)
            return (
                self.rules.gemm_epilogue
                and vertical
                and gemm is a
                and other.cls == "pointwise"
                and all(n == gemm.gemm_out for n in other.numels)
            )
        if "reduction" in classes:
            red, other = (a, b) if a.cls == "reduction" else (b, a)
            if other.cls == "reduction":
                return red.sig == other.sig
            return red.sig is not None and all(n <= red.sig[0] for n in other.numels)
        if not vertical and max(a.numels, default=0) != max(b.numels, default=0):
            return False  # horizontal fusion needs one iteration space
        return True

    def _windows_inline(self, a: _Group, b: _Group) -> bool:
        """A window op reads a value the other group computes only if nothing else needs that value
        (the kernel then recomputes it per window element, as Inductor inlines it)."""
        g = self.g
        for reader_group, writer_group in ((a, b), (b, a)):
            if not self.window_members.intersection(reader_group.members):
                continue
            inside = set(reader_group.members) | set(writer_group.members)
            for m in self.window_members.intersection(reader_group.members):
                for v in g.nodes[m].inputs:
                    p = g.producer(v)
                    if p is None or g.position(p) not in writer_group.members:
                        continue
                    if v in self.graph_outputs or any(g.position(c) not in inside for c in g.consumers(v)):
                        return False
        return True

    @staticmethod
    def _merged_class(a: _Group, b: _Group) -> str:
        for cls in ("gemm", "reduction", "pointwise"):
            if cls in (a.cls, b.cls):
                return cls
        return "view"

    def _absorb(self, into: _Group, other: _Group, cls: str | None = None) -> None:
        for m in other.members:
            self.group_of[m] = into.gid
        del self.groups[other.gid]
        keep, gone = into.gid, other.gid
        for adj, back in ((self.succ_g, self.pred_g), (self.pred_g, self.succ_g)):
            for x in adj.pop(gone):
                back[x].discard(gone)
                if x != keep:
                    back[x].add(keep)
                    adj[keep].add(x)
            adj[keep].discard(gone)
        into.members.extend(other.members)
        into.numels |= other.numels
        into.sig = into.sig or other.sig
        into.gemm_out = into.gemm_out or other.gemm_out
        into.fold = into.fold or other.fold
        into.lo, into.hi = min(into.lo, other.lo), max(into.hi, other.hi)
        if cls is not None:
            into.cls = cls

    def _reaches_through_other(self, a: _Group, b: _Group) -> bool:
        """Whether a path leaves ``a``, passes through another group and enters ``b``."""
        ida, idb = a.gid, b.gid
        succ, pred = self.succ_g, self.pred_g
        if not (succ[ida] - {idb}) or not (pred[idb] - {ida}):
            return False  # a leads only to b, or only a leads to b: the common case of a chain
        stack = [x for x in succ[ida] if x != idb]
        seen = set(stack)
        while stack:
            for x in succ[stack.pop()]:
                if x == idb:
                    return True
                if x != ida and x not in seen:
                    seen.add(x)
                    stack.append(x)
        return False

    # -- the result ------------------------------------------------------------
    def _result(self) -> Grouping:
        g = self.g
        ids = g.node_ids
        groups = []
        folds = {}
        for grp in sorted(self.groups.values(), key=lambda x: min(x.members)):
            members = tuple(ids[m] for m in sorted(grp.members))
            groups.append(members)
            if grp.fold is not None:
                folds[members] = (ids[grp.fold[0]], ids[grp.fold[1]])
        return Grouping(tuple(groups), folds, frozenset(self._concats_in_place()))

    def _concats_in_place(self) -> list[str]:
        """Concatenations whose inputs are distinct fresh outputs of pointwise/reduction kernels."""
        if not self.rules.concat_in_place:
            return []
        g = self.g
        return [
            node.id
            for i, node in enumerate(g.nodes)
            if self.groups[self.group_of[i]].cls == "concat"
            and len(self.groups[self.group_of[i]].members) == 1
            and node.inputs
            and self._writable_in_place(node)
        ]

    def _writable_in_place(self, concat: Node) -> bool:
        g = self.g
        if set(iter_tensor_refs(concat.attrs.get("args", []))) != set(concat.inputs):
            return False  # tensors passed some other way than the list of pieces
        # (a tensor concatenated twice is written into both slices by its kernel)
        for v in concat.inputs:
            p = g.producer(v)
            if p is None or g.values[v].is_alias:
                return False  # graph inputs, parameters and views are copied
            if self.groups[self.group_of[g.position(p)]].cls not in KERNEL_CLASSES:
                return False  # a library kernel (GEMM) writes its own buffer
            if any(c != concat.id and op_class(g, g.node(c)) == "concat" for c in g.consumers(v)):
                return False  # one buffer cannot be a slice of two concatenations
        return True
