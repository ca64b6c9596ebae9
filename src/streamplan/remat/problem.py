"""The rematerialization problem as the solvers see it: ops in a reference order, storages, costs.

A *plan* is a sequence of op positions (indices into ``order``) in which an op may
appear more than once: its first appearance is the original, every later one a
recomputation. Readers use the latest copy of each storage written before them, so a
copy dies at its last reader before the next copy is made. The peak of a plan is its
host-order peak: live bytes at each step, where a copy is live from the step that
writes it to the last step that reads it (graph outputs and resident storages: always).
On one stream this is exactly the worst-case peak of the rewritten graph
(``memory.worst_case``), which is what makes the solvers' figures checkable.

What may be recomputed, and why not the rest:

* a storage is *droppable* (may have several copies) when it is not a graph output,
  nothing writes it in place, every view of it comes from a view op that can be
  re-derived, and the op that creates it is recomputable;
* an op is *recomputable* when it creates storages (and only new ones), writes nothing
  in place and is deterministic (no dropout or random sampling: a recomputation must
  give the same bytes);
* a recomputation must come before the first in-place write to any storage its op
  reads (``deadline``), or it would read changed data (an optimizer step, say).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamplan.cost.op_classes import op_base_name
from streamplan.cost.opcost import CostModel
from streamplan.ir.graph import Graph
from streamplan.ir.includes import Includes

# Ops whose result differs between two calls: never recomputed.
NONDETERMINISTIC_OPS = frozenset(
    {
        "dropout",
        "native_dropout",
        "feature_dropout",
        "alpha_dropout",
        "bernoulli",
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "normal",
        "uniform",
        "multinomial",
        "exponential",
        "geometric",
        "cauchy",
        "log_normal",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
    }
)


@dataclass(frozen=True, eq=False)
class RematProblem:
    """Everything a solver needs, indexed by position in ``order`` and by storage number.

    ``reads[k]``: counted storages op k uses without creating them (inputs, views of
    them, storages written in place); ``writes[k]``: counted storages op k creates.
    Counted storages are the activations (inputs and parameters, when a figure includes
    them, are ``resident_bytes``: always live, never dropped).
    """

    graph: Graph
    order: tuple[str, ...]
    cost_ms: tuple[float, ...]
    reads: tuple[tuple[int, ...], ...]
    writes: tuple[tuple[int, ...], ...]
    storage_ids: tuple[str, ...]
    size: tuple[int, ...]
    creator: tuple[int, ...]
    persistent: tuple[bool, ...]
    droppable: tuple[bool, ...]
    recomputable: tuple[bool, ...]
    deadline: tuple[int, ...]
    readers: tuple[tuple[int, ...], ...]  # per storage: positions that read it, ascending
    pinned: frozenset[int]  # ops other nodes are ordered after (``Node.after``): never moved
    resident_bytes: int
    includes: Includes

    @property
    def n(self) -> int:
        return len(self.order)

    @staticmethod
    def build(
        graph: Graph,
        order: tuple[str, ...] | list[str] | None,
        cost: CostModel,
        includes: Includes = Includes(),
    ) -> RematProblem:
        """The problem of ``graph`` with its ops in ``order`` (default: the graph's order)."""
        order = tuple(order) if order is not None else graph.node_ids
        pos = {nid: i for i, nid in enumerate(order)}
        if len(pos) != len(graph.nodes) or set(pos) != set(graph.node_ids):
            raise ValueError("the reference order must list every node of the graph once")
        storages = graph.storages()
        counted = [sid for sid, st in storages.items() if st.kind == "activation" and graph.producer(sid)]
        index = {sid: i for i, sid in enumerate(counted)}
        resident = 0
        for st in storages.values():
            if st.kind != "activation" and includes.counts(st.kind):
                resident += st.nbytes

        outputs = {graph.storage_of(v) for v in graph.outputs}
        mutated: set[str] = set()
        mutations: dict[str, list[int]] = {}  # storage -> positions that write it in place
        for node in graph.nodes:
            for vid in node.mutates:
                sid = graph.storage_of(vid)
                mutated.add(sid)
                mutations.setdefault(sid, []).append(pos[node.id])
        bad_view: set[str] = set()  # storages with a view we could not re-derive
        for node in graph.nodes:
            if any(graph.values[o].is_alias for o in node.outputs) and not _is_reissuable_view(graph, node):
                bad_view.update(graph.storage_of(o) for o in node.outputs)

        n = len(order)
        reads: list[tuple[int, ...]] = []
        writes: list[tuple[int, ...]] = []
        cost_ms: list[float] = []
        recomputable: list[bool] = []
        deadline: list[int] = []
        readers: list[list[int]] = [[] for _ in counted]
        for k, nid in enumerate(order):
            node = graph.node(nid)
            created = [index[o] for o in node.outputs if o in index]
            touched = [graph.storage_of(v) for v in (*node.inputs, *node.outputs, *node.mutates)]
            used = [index[s] for s in dict.fromkeys(touched) if s in index and index[s] not in created]
            reads.append(tuple(used))
            writes.append(tuple(created))
            for s in used:
                readers[s].append(k)
            cost_ms.append(max(0.0, float(cost.op_time_ms(graph, node))))
            eligible = all(
                s not in outputs and s not in mutated and s not in bad_view
                for s in (counted[c] for c in created)
            )
            recomputable.append(
                bool(created)
                and not node.mutates
                and all(not graph.values[o].is_alias for o in node.outputs)
                and op_base_name(node.op) not in NONDETERMINISTIC_OPS
                and eligible
            )
            first_write = n
            for vid in _deciding_inputs(graph, node):
                for p in mutations.get(graph.storage_of(vid), ()):
                    if p >= k:
                        first_write = min(first_write, p)
            deadline.append(first_write)
        creator = [pos[graph.producer(sid)] for sid in counted]
        droppable = [recomputable[creator[i]] for i in range(len(counted))]
        pinned = frozenset(pos[a] for node in graph.nodes for a in node.after if a in pos)
        return RematProblem(
            graph=graph,
            order=order,
            cost_ms=tuple(cost_ms),
            reads=tuple(reads),
            writes=tuple(writes),
            storage_ids=tuple(counted),
            size=tuple(storages[s].nbytes for s in counted),
            creator=tuple(creator),
            persistent=tuple(s in outputs for s in counted),
            droppable=tuple(droppable),
            recomputable=tuple(recomputable),
            deadline=tuple(deadline),
            readers=tuple(tuple(r) for r in readers),
            pinned=pinned,
            resident_bytes=resident,
            includes=includes,
        )

    def baseline_peak_bytes(self) -> int:
        """Host-order peak of the reference order without recomputation."""
        return evaluate(self, tuple(range(self.n))).peak_bytes


# Batch norm in training mode reads the running statistics only to return their updated
# values; its other results (the output, the batch mean and inverse deviation) depend on the
# input, weight and bias alone. A training step copies the new statistics into the
# buffers right after the op, so without this the op could never be recomputed — and
# neither could anything after it (every ReLU of a ResNet). A recomputation still writes
# new statistics from the updated buffers, but nothing reads that copy.
_BATCH_NORM_TRAINING = {
    # op -> (position of the ``training`` flag, positions of running mean and variance)
    "_native_batch_norm_legit_functional": (5, (3, 4)),
    "_native_batch_norm_legit": (5, (3, 4)),
    "native_batch_norm": (5, (3, 4)),
}


def _deciding_inputs(graph: Graph, node) -> tuple[str, ...]:
    """The inputs whose contents a recomputation's *read* results depend on: a later in-place
    write to one of them is a deadline for recomputing ``node``."""
    spec = _BATCH_NORM_TRAINING.get(op_base_name(node.op))
    args = node.attrs.get("args") if spec else None
    if not spec or not isinstance(args, (list, tuple)) or len(args) <= spec[0] or args[spec[0]] is not True:
        return node.inputs
    ignored = {a.get("$v") for i, a in enumerate(args) if i in spec[1] and isinstance(a, dict)}
    return tuple(v for v in node.inputs if v not in ignored)


def _is_reissuable_view(graph: Graph, node) -> bool:
    """A view op we can run again on a recomputed base: every output an alias, nothing written
    in place, deterministic, and it reads nothing but values of the storages it aliases (and
    resident leaves, which are always there)."""
    if node.mutates or op_base_name(node.op) in NONDETERMINISTIC_OPS:
        return False
    outs = [graph.values[o] for o in node.outputs]
    if not outs or not all(v.is_alias for v in outs):
        return False
    aliased = {v.storage for v in outs}
    for vid in node.inputs:
        if graph.producer(graph.storage_of(vid)) is None:
            continue  # a leaf (input, parameter, constant)
        if graph.storage_of(vid) not in aliased:
            return False
    return True


@dataclass(frozen=True, slots=True)
class SequenceStats:
    """The host-order facts of a plan: its peak, where, and what it recomputes."""

    peak_bytes: int
    peak_step: int
    recomputations: int
    added_cost_ms: float


def bind(problem: RematProblem, seq: tuple[int, ...]) -> tuple[list[list[tuple[int, int]]], list[list[int]]]:
    """Which copy each step reads, and who reads each copy.

    Returns ``(reads_of_step, readers_of_copy)``: for step i, the (storage, copy) pairs it
    reads; for each copy (numbered in order of creation over all storages), the steps
    that read it. Copies are numbered by ``copy_ids`` order of creation: step i's
    writes get consecutive numbers.
    """
    current: dict[int, int] = {}
    next_copy = 0
    reads_of_step: list[list[tuple[int, int]]] = []
    readers: list[list[int]] = []
    for i, k in enumerate(seq):
        rs = []
        for s in problem.reads[k]:
            c = current.get(s)
            if c is None:
                raise ValueError(f"step {i} reads storage {problem.storage_ids[s]} before it is written")
            rs.append((s, c))
            readers[c].append(i)
        reads_of_step.append(rs)
        for s in problem.writes[k]:
            current[s] = next_copy
            readers.append([])
            next_copy += 1
    return reads_of_step, readers


def evaluate(problem: RematProblem, seq: tuple[int, ...]) -> SequenceStats:
    """Host-order peak and added cost of a plan (a sequence of op positions)."""
    n_steps = len(seq)
    delta = [0] * (n_steps + 1)
    current: dict[int, int] = {}
    birth: list[int] = []
    last: list[int] = []
    sizes: list[int] = []
    persistent: list[bool] = []
    seen = [False] * problem.n
    recomputations, added = 0, 0.0
    for i, k in enumerate(seq):
        if seen[k]:
            recomputations += 1
            added += problem.cost_ms[k]
        seen[k] = True
        for s in problem.reads[k]:
            last[current[s]] = i
        for s in problem.writes[k]:
            current[s] = len(birth)
            birth.append(i)
            last.append(i)
            sizes.append(problem.size[s])
            persistent.append(problem.persistent[s])
    for b, d, nb, p in zip(birth, last, sizes, persistent, strict=True):
        delta[b] += nb
        if not p:
            delta[d + 1] -= nb
    peak, at, cur = 0, -1, 0
    for i in range(n_steps):
        cur += delta[i]
        if cur > peak or at < 0:
            peak, at = cur, i
    return SequenceStats(peak + problem.resident_bytes, at, recomputations, added)


def normalize(problem: RematProblem, seq: tuple[int, ...], *, moves: bool = True) -> tuple[int, ...]:
    """The same plan without wasted work.

    A recomputation none of whose copies is read (or is a graph output) is removed,
    repeatedly; an original whose copies nobody reads any more while a later
    recomputation of the same op is read is removed too, so that the later one becomes
    the original (the op has moved, at no extra cost; not with ``moves=False``, which
    keeps the originals in the reference order). Originals unread in the graph itself stay.
    """
    seq = tuple(seq)
    reads, writes, persistent = problem.reads, problem.writes, problem.persistent
    while True:
        # which steps write a copy somebody reads (or the last copy of a graph output)
        current: dict[int, int] = {}  # storage -> the step that wrote its current copy
        useful = [False] * len(seq)
        for i, k in enumerate(seq):
            for s in reads[k]:
                w = current.get(s)
                if w is None:
                    raise ValueError(f"step {i} reads storage {problem.storage_ids[s]} before it is written")
                useful[w] = True
            for s in writes[k]:
                current[s] = i
        for s, i in current.items():
            if persistent[s]:
                useful[i] = True
        first_seen: dict[int, int] = {}
        later_useful: set[int] = set()
        for i, k in enumerate(seq):
            if k in first_seen:
                if useful[i]:
                    later_useful.add(k)
            else:
                first_seen[k] = i
        drop = set()
        for i, k in enumerate(seq):
            if useful[i] or not writes[k]:
                continue
            if first_seen[k] != i:
                drop.add(i)  # an unread recomputation
            elif moves and k in later_useful and k not in problem.pinned and _read_in_graph(problem, k):
                drop.add(i)  # an original whose readers all moved to a later copy
        if not drop:
            return seq
        # removing a step may leave its inputs' copies unread: loop until nothing changes
        seq = tuple(k for i, k in enumerate(seq) if i not in drop)


def _read_in_graph(problem: RematProblem, k: int) -> bool:
    """True when some output of op k is read (or returned) in the original graph."""
    return any(problem.readers[s] or problem.persistent[s] for s in problem.writes[k])


def check_plan(problem: RematProblem, seq: tuple[int, ...]) -> None:
    """``ValueError`` unless ``seq`` runs every op, reads only written storages, recomputes
    only recomputable ops, before their deadlines."""
    seen = [False] * problem.n
    for k in seq:
        if seen[k] and not problem.recomputable[k]:
            raise ValueError(f"op {problem.order[k]} is recomputed but cannot be")
        seen[k] = True
    if not all(seen):
        missing = [problem.order[k] for k in range(problem.n) if not seen[k]]
        raise ValueError(f"the plan never runs {', '.join(missing[:5])}")
    ran: set[int] = set()
    for k in seq:
        if k in ran:
            d = problem.deadline[k]
            if d < problem.n and d in ran:
                raise ValueError(f"op {problem.order[k]} is recomputed after an in-place write to its input")
        ran.add(k)
    written: set[int] = set()
    for i, k in enumerate(seq):
        for s in problem.reads[k]:
            if s not in written:
                raise ValueError(f"step {i} reads storage {problem.storage_ids[s]} before it is written")
        written.update(problem.writes[k])
