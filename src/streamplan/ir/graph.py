"""The graph IR: immutable ``Value``s (tensors), ``Node``s (ops) and the ``Graph``.

Memory is accounted per *storage*: a value either owns a new storage
(``value.storage == value.id``) or aliases the storage of another value (a view,
or the result of an in-place op, which names the written input in
``node.mutates``). A storage is as large as the value that created it.

Dependencies between nodes are data edges (a node reads a value another wrote)
plus write-after-read edges for in-place writes (every earlier reader of a
storage must finish before a node overwrites it) and read-after-write edges
(a node that reads a storage, through any value, after an in-place write to it
waits for that write), plus ordering-only edges a node lists in ``after`` (it must
start after those nodes finish although it reads none of their outputs: how a
recomputation is kept from running before the point its plan placed it at).

A node whose ``attrs["recompute_of"]`` names another node is a *recomputation*:
the same op on the same (possibly recomputed) inputs, writing new values that later
users read instead of the original's (``Node.recompute_of``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from streamplan.ir.dtypes import itemsize
from streamplan.ir.frozen import FrozenDict, freeze
from streamplan.ir.printer import format_graph

ValueKind = Literal["input", "param", "buffer", "activation", "constant"]
VALUE_KINDS: tuple[str, ...] = ("input", "param", "buffer", "activation", "constant")
RECOMPUTE_OF = "recompute_of"  # the attr that marks a recomputation with the original node's id

# What a storage is for in a training step (``Graph.roles``): trainable weights, their
# gradients, optimizer state (momentum, Adam moments), forward values the backward reads
# (saved activations), and every other intermediate (temporaries).
Role = Literal["parameter", "gradient", "optimizer_state", "saved_activation", "temporary"]
ROLES: tuple[str, ...] = ("parameter", "gradient", "optimizer_state", "saved_activation", "temporary")


@dataclass(frozen=True, slots=True)
class Value:
    """A tensor: its shape, dtype, size in bytes, kind and the storage it lives in."""

    id: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    kind: ValueKind = "activation"
    storage: str = ""  # id of the value that owns the storage; "" means this value

    def __post_init__(self) -> None:
        if not self.storage:
            object.__setattr__(self, "storage", self.id)
        if not isinstance(self.shape, tuple):
            object.__setattr__(self, "shape", tuple(self.shape))

    @property
    def is_alias(self) -> bool:
        """True when this value shares another value's storage (view or in-place result)."""
        return self.storage != self.id


@dataclass(frozen=True, slots=True)
class Node:
    """One op: reads ``inputs``, writes ``outputs`` (value ids), with its cost facts."""

    id: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=FrozenDict, compare=True)
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    mutates: tuple[str, ...] = ()  # input value ids whose storage this node writes in place
    after: tuple[str, ...] = ()  # node ids that must finish first (ordering only, no data)

    def __post_init__(self) -> None:
        for name in ("inputs", "outputs", "mutates", "after"):
            if not isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "attrs", freeze(self.attrs))

    def __hash__(self) -> int:
        # attrs may hold lists (encoded call arguments): hash what identifies the op
        return hash((self.id, self.op, self.inputs, self.outputs, self.mutates, self.after))

    @property
    def recompute_of(self) -> str | None:
        """Id of the node this one recomputes (``attrs["recompute_of"]``), or None for an original."""
        of = self.attrs.get(RECOMPUTE_OF)
        return str(of) if of else None


@dataclass(frozen=True, slots=True)
class Storage:
    """A block of memory: its id (the creating value), size, kind and the values that use it."""

    id: str
    nbytes: int
    kind: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Graph:
    """An immutable DAG of nodes in a valid topological order.

    ``inputs`` are user inputs, ``params`` parameters and buffers, ``outputs`` the
    values the graph returns. ``param_names`` maps a param/buffer/constant value id to
    the name it has in the captured module's ``state_dict`` (how the runtime finds the
    module's tensors). ``roles`` says what each storage is for in a training step
    (keyed by the storage's id, the value that owns it; empty for inference graphs).
    Edits return a new graph (``dataclasses.replace``).
    Lookups (producer, consumers, predecessors) are indexed once at construction;
    ``values`` and ``meta`` are read-only mappings, so the index cannot go stale.
    """

    name: str
    nodes: tuple[Node, ...]
    values: Mapping[str, Value]
    inputs: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=FrozenDict)
    param_names: Mapping[str, str] = field(default_factory=FrozenDict)
    roles: Mapping[str, Role] = field(default_factory=FrozenDict)
    _index: _Index = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("nodes", "inputs", "params", "outputs"):
            if not isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "values", freeze(self.values))
        object.__setattr__(self, "meta", freeze(self.meta))
        object.__setattr__(self, "param_names", freeze(self.param_names))
        object.__setattr__(self, "roles", freeze(self.roles))
        object.__setattr__(self, "_index", _Index.build(self))

    def __hash__(self) -> int:
        return hash((self.name, self.nodes, self.inputs, self.params, self.outputs))

    # -- lookups ---------------------------------------------------------
    def node(self, node_id: str) -> Node:
        return self.nodes[self._index.position[node_id]]

    def value(self, value_id: str) -> Value:
        return self.values[value_id]

    def position(self, node_id: str) -> int:
        """Index of the node in the graph's topological order."""
        return self._index.position[node_id]

    def has_node(self, node_id: str) -> bool:
        return node_id in self._index.position

    def producer(self, value_id: str) -> str | None:
        """Id of the node that writes ``value_id`` (None for inputs, params, constants)."""
        return self._index.producer.get(value_id)

    def consumers(self, value_id: str) -> tuple[str, ...]:
        """Ids of the nodes that read ``value_id``, in graph order."""
        return self._index.consumers.get(value_id, ())

    def predecessors(self, node_id: str) -> tuple[str, ...]:
        """Nodes that must finish before ``node_id`` starts (data, in-place ordering, ``after``)."""
        return self._index.preds[self._index.position[node_id]]

    def successors(self, node_id: str) -> tuple[str, ...]:
        return self._index.succs[self._index.position[node_id]]

    def pred_positions(self) -> tuple[tuple[int, ...], ...]:
        """Predecessors of every node as positions (fast path for algorithms)."""
        return self._index.pred_pos

    def succ_positions(self) -> tuple[tuple[int, ...], ...]:
        return self._index.succ_pos

    def edges(self) -> Iterable[tuple[str, str]]:
        """Every dependency edge (u, v): u must finish before v starts."""
        for v, preds in zip(self.nodes, self._index.preds):
            for u in preds:
                yield u, v.id

    @property
    def node_ids(self) -> tuple[str, ...]:
        return self._index.node_ids

    # -- storages --------------------------------------------------------
    def storage_of(self, value_id: str) -> str:
        return self.values[value_id].storage

    def storages(self) -> Mapping[str, Storage]:
        """Every storage, keyed by its id, with its size, kind and member values."""
        return self._index.storages

    def role(self, value_id: str) -> Role | None:
        """The training role of the storage ``value_id`` lives in (None: untagged)."""
        return self.roles.get(self.values[value_id].storage)

    @property
    def is_training(self) -> bool:
        """True for a training step (its storages carry roles)."""
        return bool(self.roles)

    def activation_storages(self) -> dict[str, Storage]:
        return {k: s for k, s in self._index.storages.items() if s.kind == "activation"}

    # -- summaries -------------------------------------------------------
    def param_bytes(self) -> int:
        """Bytes of the parameters (trainable weights), without buffers."""
        return sum(s.nbytes for s in self._index.storages.values() if s.kind == "param")

    def buffer_bytes(self) -> int:
        """Bytes of buffers and lifted constants (e.g. batch-norm running statistics)."""
        return sum(s.nbytes for s in self._index.storages.values() if s.kind in ("buffer", "constant"))

    def param_count(self) -> int:
        total = 0
        for vid in self.params:
            v = self.values[vid]
            if v.kind == "param" and not v.is_alias:
                total += v.nbytes // itemsize(v.dtype)
        return total

    def input_bytes(self) -> int:
        return sum(s.nbytes for s in self._index.storages.values() if s.kind == "input")

    def activation_bytes(self) -> int:
        """Sum of every activation storage (what a program would allocate with no reuse)."""
        return sum(s.nbytes for s in self._index.storages.values() if s.kind == "activation")

    def total_flops(self) -> int:
        return sum(n.flops for n in self.nodes)

    def replace(self, **changes: Any) -> Graph:
        """A new graph with some fields replaced (the index is rebuilt)."""
        return dataclasses.replace(self, **changes)

    def with_roles(self, roles: Mapping[str, Role]) -> Graph:
        """The same graph with ``roles`` (they do not change the index, so it is shared)."""
        out = copy.copy(self)
        object.__setattr__(out, "roles", freeze(roles))
        return out

    def __len__(self) -> int:
        return len(self.nodes)

    def __str__(self) -> str:
        return format_graph(self)


@dataclass(frozen=True)
class _Index:
    node_ids: tuple[str, ...]
    position: Mapping[str, int]
    producer: Mapping[str, str]
    consumers: Mapping[str, tuple[str, ...]]
    preds: tuple[tuple[str, ...], ...]
    succs: tuple[tuple[str, ...], ...]
    pred_pos: tuple[tuple[int, ...], ...]
    succ_pos: tuple[tuple[int, ...], ...]
    storages: Mapping[str, Storage]

    @staticmethod
    def build(g: Graph) -> _Index:
        node_ids = tuple(n.id for n in g.nodes)
        position = {nid: i for i, nid in enumerate(node_ids)}
        producer: dict[str, str] = {}
        consumers: dict[str, list[str]] = {}
        for n in g.nodes:
            for o in n.outputs:
                producer.setdefault(o, n.id)
            for i in n.inputs:
                lst = consumers.setdefault(i, [])
                if not lst or lst[-1] != n.id:
                    lst.append(n.id)
        # storages
        members: dict[str, list[str]] = {}
        for vid, v in g.values.items():
            members.setdefault(v.storage, []).append(vid)
        storages: dict[str, Storage] = {}
        for sid, vids in members.items():
            root = g.values.get(sid)
            if root is None:
                continue  # dangling alias; verify() reports it
            storages[sid] = Storage(sid, root.nbytes, root.kind, tuple(vids))
        # dependencies: data edges + write-after-read edges for in-place writes
        readers_of_storage: dict[str, list[int]] = {}
        last_writer_of_storage: dict[str, int] = {}  # the latest node that wrote it in place
        pred_pos: list[tuple[int, ...]] = []
        for i, n in enumerate(g.nodes):
            ps: dict[int, None] = {}
            for vid in n.inputs:
                p = producer.get(vid)
                if p is not None:
                    j = position.get(p)
                    if j is not None and j != i:
                        ps[j] = None
            for vid in n.mutates:
                v = g.values.get(vid)
                if v is None:
                    continue
                for j in readers_of_storage.get(v.storage, ()):
                    if j != i:
                        ps[j] = None
            for vid in n.inputs:
                v = g.values.get(vid)
                if v is not None:
                    readers_of_storage.setdefault(v.storage, []).append(i)
                    j = last_writer_of_storage.get(v.storage)
                    if j is not None and j != i:
                        ps[j] = None
            for vid in n.mutates:
                v = g.values.get(vid)
                if v is not None:
                    last_writer_of_storage[v.storage] = i
            for nid in n.after:
                j = position.get(nid)
                if j is not None and j < i:
                    ps[j] = None
            pred_pos.append(tuple(sorted(ps)))
        succ_lists: list[list[int]] = [[] for _ in g.nodes]
        for i, ps in enumerate(pred_pos):
            for j in ps:
                succ_lists[j].append(i)
        succ_pos = tuple(tuple(s) for s in succ_lists)
        preds = tuple(tuple(node_ids[j] for j in ps) for ps in pred_pos)
        succs = tuple(tuple(node_ids[j] for j in ss) for ss in succ_pos)
        return _Index(
            node_ids=node_ids,
            position=FrozenDict(position),
            producer=FrozenDict(producer),
            consumers=FrozenDict({k: tuple(v) for k, v in consumers.items()}),
            preds=preds,
            succs=succs,
            pred_pos=tuple(pred_pos),
            succ_pos=succ_pos,
            storages=FrozenDict(storages),
        )
