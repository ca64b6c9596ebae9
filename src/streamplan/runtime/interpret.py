"""Call one graph node with real tensors, and build the tensors a run starts from.

A node's ``op`` is the string form of an ATen overload ("aten.convolution.default")
and its ``attrs["args"]``/``["kwargs"]`` are encoded by ``frontends.argcodec``.
``call_node`` decodes them against an environment (value id -> tensor), calls the
op and returns the output tensors in ``node.outputs`` order. Any failure inside the
op is re-raised as ``ExecutionError`` "while executing %node (op)".

Ops that draw random numbers (dropout) carry ``attrs["seed_index"]``: each call seeds
torch's generator with ``RANDOM_OP_SEED + seed_index`` under one lock, so a node draws
the same numbers whichever thread or stream reaches it first (``seeded_random_ops``
does the same for eager code, counting its random ops in call order).
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from streamplan.cost.op_classes import op_base_name
from streamplan.errors import ExecutionError, UnsupportedError
from streamplan.frontends.argcodec import decode
from streamplan.ir.collectives import is_collective
from streamplan.ir.fused import fused_parts, is_fused
from streamplan.ir.graph import Graph, Node
from streamplan.ir.opname import PYTHON_OPS, split_op

RANDOM_OP_SEED = 20261203
_RANDOM_LOCK = threading.Lock()
_OP_CACHE: dict[str, Callable[..., Any]] = {}
_PYTHON_OPS: dict[str, Callable[..., Any]] = dict.fromkeys(PYTHON_OPS, operator.getitem)


def resolve_op(op: str) -> Callable[..., Any]:
    """The callable for an op name: ``"aten.add.Tensor"`` -> ``torch.ops.aten.add.Tensor``.

    Only an ``OpOverload`` of a ``torch.ops`` namespace (or indexing) is ever returned: the
    name is checked by ``ir.opname.split_op`` and each object on the way must be what it
    should be (a namespace, an overload packet, an overload), so a graph file cannot reach
    ``torch.ops.load_library``, ``import_module`` or any other callable through an op name.
    """
    fn = _OP_CACHE.get(op)
    if fn is not None:
        return fn
    if op in _PYTHON_OPS:
        fn = _PYTHON_OPS[op]
    else:
        try:
            ns, name, overload = split_op(op)
        except ValueError as e:
            raise UnsupportedError(
                f"cannot resolve op {e}", hint="expected 'namespace.name[.overload]'"
            ) from None
        try:
            namespace = getattr(torch.ops, ns)
            packet = getattr(namespace, name) if isinstance(namespace, torch._ops._OpNamespace) else None
            fn = getattr(packet, overload) if isinstance(packet, torch._ops.OpOverloadPacket) else None
        except (AttributeError, RuntimeError):
            fn = None
        if not isinstance(fn, torch._ops.OpOverload):
            raise UnsupportedError(f"torch has no op {op!r}", hint="is the graph from a newer torch?")
    _OP_CACHE[op] = fn
    return fn


def unresolvable_ops(graph: Graph) -> list[tuple[str, str]]:
    """(node id, op) of every node, or part of a fused kernel, whose op torch cannot resolve."""
    bad = []
    for n in graph.nodes:
        if is_collective(n):  # run by the process group, not resolved as an op
            continue
        for p in fused_parts(n) or (n,):
            try:
                resolve_op(p.op)
            except UnsupportedError:
                bad.append((p.id, p.op))
    return bad


def check_supported(graph: Graph) -> None:
    """Raise one ``UnsupportedError`` listing every op of ``graph`` torch cannot resolve."""
    bad = sorted({op for _, op in unresolvable_ops(graph)})
    if bad:
        raise UnsupportedError(
            f"cannot execute ops: {', '.join(repr(op) for op in bad[:10])}"
            + (" ..." if len(bad) > 10 else ""),
            where=graph.name,
            hint="these ops are not in this torch build",
        )


def call_node(node: Node, env: Mapping[str, Any], device: Any = None) -> tuple[Any, ...]:
    """Run ``node`` on the tensors in ``env``; return its outputs in ``node.outputs`` order.

    A fused kernel runs its parts in order (``runtime.fused``).
    """
    if is_fused(node):
        from streamplan.runtime.fused import call_fused

        return call_fused(node, env, device, call_node)
    if is_collective(node):  # the other ranks take part: torch.distributed, not an ATen op
        from streamplan.runtime.collectives import run_collective

        return run_collective(node, env)
    fn = resolve_op(node.op)
    try:
        args = decode(node.attrs.get("args", []), env, device=device)
        kwargs = decode(node.attrs.get("kwargs", {}), env, device=device)
        seed_index = node.attrs.get("seed_index")
        if seed_index is None:
            result = fn(*args, **kwargs)
        else:
            with _seeded(RANDOM_OP_SEED + int(seed_index)):
                result = fn(*args, **kwargs)
    except Exception as e:
        first = str(e).strip().split("\n")[0]  # torch adds the schema and a backtrace below
        raise ExecutionError(
            f"while executing %{node.id} ({node.op}): {type(e).__name__}: {first}",
            hint="the op failed on the tensors the run gave it: check a hand-written graph's shapes and "
            "dtypes; if the model runs eagerly, it is a streamplan bug (please report it)",
        ) from e
    return _match_outputs(node, result)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """torch's generator seeded with ``seed`` for one call, restored after, one caller at a time."""
    with _RANDOM_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class _SeedRandomOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if torch.Tag.nondeterministic_seeded not in func.tags:
            return func(*args, **(kwargs or {}))
        index, self.count = self.count, self.count + 1
        with _seeded(RANDOM_OP_SEED + index):
            return func(*args, **(kwargs or {}))


def seeded_random_ops() -> TorchDispatchMode:
    """A dispatch mode that seeds the k-th random op of eager code as a graph's node with
    ``seed_index`` k is seeded (a captured step draws what eager PyTorch draws)."""
    return _SeedRandomOps()


def _match_outputs(node: Node, result: Any) -> tuple[Any, ...]:
    n = len(node.outputs)
    if isinstance(result, torch.Tensor):
        flat: list[Any] = [result]
    elif isinstance(result, (tuple, list)):
        flat = list(_flatten(result))
        if len(flat) != n and "output_index" in node.attrs:
            idx = node.attrs["output_index"]
            flat = [result[i] for i in (idx if isinstance(idx, list) else [idx])]
    else:
        flat = [result]
    if len(flat) < n:
        raise ExecutionError(
            f"while executing %{node.id} ({node.op}): op returned {len(flat)} outputs, the graph expects {n}"
        )
    return tuple(flat[:n])


def _flatten(obj: Any):
    for x in obj:
        if isinstance(x, (tuple, list)):
            yield from _flatten(x)
        else:
            yield x


# -- the tensors a run starts from --------------------------------------------------


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def random_tensor(
    shape: Sequence[int],
    dtype: str,
    generator: torch.Generator,
    *,
    fan_in_scaled: bool = False,
    int_high: int = 4,
) -> torch.Tensor:
    """A deterministic random tensor of ``shape``/``dtype`` (ints in [0, ``int_high``), bools False).

    ``fan_in_scaled`` divides by sqrt(prod(shape[1:])), as weight initialisers do, so
    that deep random graphs keep finite values.
    """
    dt = torch_dtype(dtype)
    if dt.is_floating_point:
        t = torch.randn(tuple(shape), generator=generator, dtype=torch.float32)
        if fan_in_scaled and len(shape) >= 2:
            fan_in = 1
            for d in shape[1:]:
                fan_in *= d
            t = t / max(1.0, fan_in) ** 0.5
        return t.to(dt)
    if dt == torch.bool:
        return torch.zeros(tuple(shape), dtype=dt)
    return torch.randint(0, max(1, int_high), tuple(shape), generator=generator, dtype=dt)


def leaf_values(graph: Graph) -> list[str]:
    """Values no node produces that some node or output reads (inputs, params, constants)."""
    needed: dict[str, None] = {}
    for n in graph.nodes:
        for v in n.inputs:
            needed[v] = None
    for v in graph.outputs:
        needed[v] = None
    for v in graph.inputs:
        needed[v] = None
    return [v for v in needed if graph.producer(v) is None and v in graph.values]


def initial_env(
    graph: Graph,
    inputs: Sequence[Any] | Mapping[str, Any] | None,
    params: Mapping[str, Any] | None,
    *,
    seed: int = 0,
    device: Any = "cpu",
) -> dict[str, Any]:
    """value id -> tensor for every leaf value, on ``device``.

    ``inputs`` is a sequence in ``graph.inputs`` order or a mapping by value id;
    ``params`` maps value ids to tensors. Leaves given by neither get the values the graph
    recorded for small constants, else seeded random tensors (value-id order, so the same
    graph and seed always get the same tensors); optimizer state is made non-negative
    (Adam's second moment is a mean of squares), and so are batch norms' running variances
    (a negative one makes every value after the norm NaN, and a run on NaNs is not timed like
    a run on numbers: a max pooling's compare-and-branch always goes the same way on them).
    """
    env: dict[str, Any] = {}
    if inputs is not None:
        if isinstance(inputs, Mapping):
            env.update(inputs)
        else:
            inputs = list(inputs)
            if len(inputs) != len(graph.inputs):
                raise ExecutionError(
                    f"got {len(inputs)} inputs, the graph takes {len(graph.inputs)}",
                    where=graph.name,
                    hint=f"inputs are {', '.join(graph.inputs)}",
                )
            env.update(zip(graph.inputs, inputs, strict=True))
    if params:
        env.update(params)
    gen = torch.Generator().manual_seed(seed)
    constants = graph.meta.get("constant_values", {})
    variances = running_variances(graph)
    limits = index_limits(graph)
    for vid in leaf_values(graph):
        if vid not in env:
            v = graph.values[vid]
            if vid in constants:
                env[vid] = torch.tensor(constants[vid], dtype=torch_dtype(v.dtype)).reshape(v.shape)
                continue
            high = min(4, limits.get(vid, 4))
            env[vid] = random_tensor(v.shape, v.dtype, gen, fan_in_scaled=v.kind != "input", int_high=high)
            if graph.roles.get(vid) == "optimizer_state" or vid in variances:
                env[vid] = env[vid].abs()
    for vid, t in env.items():
        if isinstance(t, torch.Tensor) and t.device != torch.device(device):
            env[vid] = t.to(device)
    return env


_RUNNING_VAR_ARG = (
    4  # (input, weight, bias, running_mean, running_var, ...) in every ATen batch/instance norm
)
_NORMS_WITH_RUNNING_STATS = frozenset(
    {"batch_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
     "_native_batch_norm_legit_functional", "cudnn_batch_norm", "miopen_batch_norm", "instance_norm"}
)  # fmt: skip


def running_variances(graph: Graph) -> frozenset[str]:
    """The value ids that batch (or instance) norms read as their running variance."""
    out = set()
    for n in graph.nodes:
        base = op_base_name(n.op)
        args = n.attrs.get("args")
        if base in _NORMS_WITH_RUNNING_STATS and isinstance(args, list) and len(args) > _RUNNING_VAR_ARG:
            ref = args[_RUNNING_VAR_ARG]
            if isinstance(ref, Mapping) and isinstance(ref.get("$v"), str):
                out.add(ref["$v"])
    return frozenset(out)


# ops that index a table: (position of the table, of the index, which of the table's dims)
_INDEXING = {"embedding": (0, 1, 0), "index_select": (0, 2, None), "gather": (0, 2, None)}
# ops whose output holds only (some of) their first input's elements: an index stays an index
_SAME_ELEMENTS = frozenset(
    {"gather", "index_select", "index", "expand", "slice", "view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "clone", "alias",
     "permute", "transpose", "t", "contiguous", "select", "narrow", "_to_copy", "to", "flatten",
     "repeat", "expand_copy", "slice_copy", "view_copy", "unsqueeze_copy", "squeeze_copy"}
)  # fmt: skip


def index_limits(graph: Graph) -> dict[str, int]:
    """value id -> the size of the smallest table some op indexes with it (directly, or through
    views, slices and copies): an integer buffer such as BERT's ``token_type_ids`` must stay
    within its embedding's rows when a run makes it up."""

    def ref(args: list[Any], i: int) -> str | None:
        a = args[i] if i < len(args) else None
        return a.get("$v") if isinstance(a, Mapping) and isinstance(a.get("$v"), str) else None

    limits: dict[str, int] = {}

    def bound(vid: str | None, size: int) -> bool:
        if vid is None or size <= 0 or limits.get(vid, size + 1) <= size:
            return False
        limits[vid] = size
        return True

    for n in graph.nodes:
        args = n.attrs.get("args")
        if not isinstance(args, list):
            continue
        base = op_base_name(n.op)
        if base in _INDEXING:
            table_at, index_at, dim = _INDEXING[base]
            table = ref(args, table_at)
            if table is None or table not in graph.values:
                continue
            if dim is None:
                d = args[1] if len(args) > 1 and isinstance(args[1], int) else None
                shape = graph.values[table].shape
                if d is None or not shape:
                    continue
                dim = d % len(shape)
            shape = graph.values[table].shape
            if dim < len(shape):
                bound(ref(args, index_at), int(shape[dim]))
        elif base == "index" and len(args) > 1 and isinstance(args[1], list):
            table = ref(args, 0)
            shape = graph.values[table].shape if table in graph.values else ()
            for i, idx in enumerate(args[1][: len(shape)]):
                if isinstance(idx, Mapping) and isinstance(idx.get("$v"), str):
                    bound(idx["$v"], int(shape[i]))
    changed = True
    while changed:  # back through views and copies to the leaves (any node order)
        changed = False
        for n in graph.nodes:
            if op_base_name(n.op) in _SAME_ELEMENTS and n.inputs and n.outputs:
                out = min((limits[o] for o in n.outputs if o in limits), default=None)
                if out is not None:
                    changed |= bound(n.inputs[0], out)
    return limits


def written_leaves(graph: Graph) -> list[str]:
    """Leaf values whose storage some node writes in place (parameters and optimizer state
    under an update, batch-norm running statistics): a run changes them."""
    written = {graph.storage_of(v) for n in graph.nodes for v in n.mutates}
    return [v for v in leaf_values(graph) if graph.storage_of(v) in written]


class Restorer:
    """Puts the leaves a run writes in place back to their first values, in place (so the
    tensors, and a captured CUDA graph's addresses, stay the same): repeated runs are alike."""

    def __init__(self, graph: Graph, env: Mapping[str, Any]):
        self.env = env
        self.saved = {
            v: env[v].clone() for v in written_leaves(graph) if isinstance(env.get(v), torch.Tensor)
        }

    def __call__(self) -> None:
        with torch.no_grad():
            for vid, t in self.saved.items():
                self.env[vid].copy_(t)


def params_from_module(graph: Graph, module: Any) -> dict[str, Any]:
    """Map param/buffer/constant value ids to ``module``'s tensors via ``graph.param_names``."""
    names: Mapping[str, str] = graph.param_names
    state = dict(module.state_dict(keep_vars=True))
    state.update(dict(module.named_buffers()))
    out: dict[str, Any] = {}
    for vid, fqn in names.items():
        t = state.get(fqn)
        if t is None:
            t = _getattr_path(module, fqn)
        if isinstance(t, torch.Tensor):
            out[vid] = t.detach()
    return out


def _getattr_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
