"""Convert an ATen-level fx graph (nodes carrying ``meta["val"]``) into a streamplan Graph.

``FxConverter`` walks the fx nodes once, in order. For each ATen call it records a
``Node`` (op name, encoded call arguments, schema aliasing, FLOPs, bytes) and one
``Value`` per tensor result; ``getitem`` nodes fold into their producer's outputs,
ops without tensor results (``sym_size``, ``_assert_*``, profiler marks) are dropped
(static scalars are substituted into the ops that read them), and
``wrap_with_set_grad_enabled`` regions are inlined, and so are autocast regions (a disabled
one as written, an enabled one traced again under autocast, with the casts it inserts). Everything it cannot represent
goes into one ``Problems`` list, raised at the end as a single ``UnsupportedError``.
Used by ``torch_capture.capture`` and ``torch_capture.graph_from_fx``.
"""

from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.multiprocessing.reductions import StorageWeakRef

from streamplan.frontends.aliasing import base_name, bind_arguments, op_aliasing
from streamplan.frontends.argcodec import encode, iter_tensor_refs
from streamplan.frontends.flops import node_bytes_read, node_flops
from streamplan.frontends.problems import Problems
from streamplan.ir.dtypes import ITEMSIZE_BYTES
from streamplan.ir.graph import Graph, Node, Value
from streamplan.ir.verify import verify

STATIC_HINT = "capture with static shapes: pass concrete example inputs and no dynamic_shapes"


@dataclass(frozen=True, slots=True)
class _Ref:
    """A tensor argument of an fx node: the value id it stands for."""

    vid: str


_WRAPPERS_TO_INLINE = ("wrap_with_set_grad_enabled",)  # grad mode does not matter for inference


class FxConverter:
    """Walks an fx graph once and builds the values and nodes of a streamplan Graph."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        name: str,
        kinds: dict[str, str],
        fqns: dict[str, str],
        problems: Problems,
    ):
        self.gm = gm
        self.name = name
        self.kinds = kinds
        self.fqns = dict(fqns)
        self.problems = problems
        self.values: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.params: list[str] = []
        self.fake: dict[str, torch.Tensor] = {}  # value id -> traced tensor (storage identity checks)
        self.ref: dict[torch.fx.Node, Any] = {}  # fx node -> _Ref, list of _Ref, or a python scalar
        self.unresolved: dict[torch.fx.Node, tuple[str, str]] = {}  # symbolic scalars, and why
        self.outputs: list[Any] = []

    def run(
        self,
        *,
        input_names: list[str],
        constant_values: dict[str, Any],
        output_structure: str | None,
        source: str,
    ) -> Graph:
        """Convert the whole graph; raise one ``UnsupportedError`` listing every problem met."""
        self._walk(self.gm, self.gm.graph, prefix="", bindings={})
        self.problems.raise_if_any()
        leaves = [encode(x, lambda o: o.vid if isinstance(o, _Ref) else None) for x in self.outputs]
        out_ids = list(dict.fromkeys(v for leaf in leaves for v in iter_tensor_refs(leaf)))
        meta: dict[str, Any] = {
            "source": source,
            "input_names": [v for v in input_names if v in self.values],
            "output_values": leaves,
        }
        if output_structure is not None:
            meta["output_structure"] = output_structure
        if constant_values:
            meta["constant_values"] = constant_values
        graph = Graph(
            self.name,
            tuple(self.nodes),
            self.values,
            tuple(self.inputs),
            tuple(self.params),
            tuple(out_ids),
            meta,
            param_names=self.fqns,
        )
        return verify(graph)

    # -- walking ---------------------------------------------------------
    def _walk(
        self, gm: torch.fx.GraphModule, graph: torch.fx.Graph, *, prefix: str, bindings: dict[str, Any]
    ) -> list[Any]:
        """Convert every node of ``graph``; return what its output node returns (as refs)."""
        for node in graph.nodes:
            nid = prefix + node.name
            if node.op == "placeholder":
                if prefix:  # the placeholder of an inlined submodule: bound to the caller's operand
                    self.ref[node] = bindings[node.name]
                else:
                    self._placeholder(node)
            elif node.op == "get_attr":
                self._get_attr(gm, node)
            elif node.op == "call_function":
                self._call(gm, node, nid, prefix)
            elif node.op == "output":
                result = torch.fx.node.map_arg(node.args[0], lambda n: self.ref.get(n))
                if not prefix:
                    self.outputs = pytree.tree_leaves(result, is_leaf=lambda x: isinstance(x, _Ref))
                return list(result) if isinstance(result, (list, tuple)) else [result]
            else:
                self.problems.add(
                    f"fx node kind {node.op!r}",
                    nid,
                    "only ATen-level graphs (call_function nodes) can be converted",
                )
        return []

    def _placeholder(self, node: torch.fx.Node) -> None:
        val = node.meta.get("val")
        kind = self.kinds.get(node.name, "input")
        if not isinstance(val, torch.Tensor):
            if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                self.problems.add("symbolic (dynamic) scalar input", node.name, STATIC_HINT)
            elif val is None:
                self.problems.add(
                    "input without shape facts (no meta['val'])",
                    node.name,
                    "convert graphs traced with FakeTensors (torch.export / AOTAutograd)",
                )
            else:
                self.ref[node] = val
            return
        value = self._new_value(node.name, val, kind)
        if value is None:
            return
        self.ref[node] = _Ref(node.name)
        (self.inputs if kind == "input" else self.params).append(node.name)

    def _get_attr(self, gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
        attr = _fetch_attr(gm, str(node.target))
        if isinstance(attr, torch.Tensor):
            val = node.meta.get("val", attr)
            if self._new_value(node.name, val, "constant") is not None:
                self.ref[node] = _Ref(node.name)
                self.params.append(node.name)
                self.fqns[node.name] = str(node.target)
        else:
            self.ref[node] = attr  # a submodule, used by a higher-order op

    def _call(self, gm: torch.fx.GraphModule, node: torch.fx.Node, nid: str, prefix: str) -> None:
        target = node.target
        val = node.meta.get("val")
        if target is operator.getitem:
            base, index = node.args[0], node.args[1]
            got = self.ref.get(base)
            if isinstance(got, list) and isinstance(index, int) and index < len(got):
                self.ref[node] = got[index]
            elif base in self.ref:
                self.problems.add("getitem on a non-list result", nid, "unexpected graph form")
            return
        if isinstance(target, torch._ops.HigherOrderOperator):
            self._higher_order(gm, node, nid, prefix)
            return
        if not isinstance(target, torch._ops.OpOverload):
            self._python_call(node, nid, val)
            return
        aliasing = op_aliasing(target._schema)
        if not _has_tensor(val) and not aliasing.writes:
            self._data_free(node, nid, val, str(target))
            return
        if val is None:
            self.problems.add(
                f"op {target} without shape facts (no meta['val'])",
                nid,
                "it needs a fake/meta kernel; register one with torch.library.register_fake",
            )
            return
        self._aten(node, nid, target, val, aliasing)

    def _python_call(self, node: torch.fx.Node, nid: str, val: Any) -> None:
        """A Python-level call (symbolic int arithmetic...): keep it only as a static scalar."""
        if isinstance(val, (bool, int, float)):
            self.ref[node] = val
        elif isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            self.unresolved[node] = _symbolic_problem(val)
        else:
            name = getattr(node.target, "__name__", str(node.target))
            self.problems.add(f"non-ATen call {name}", nid, "only ATen ops can be captured")

    def _data_free(self, node: torch.fx.Node, nid: str, val: Any, op: str) -> None:
        """Ops with no tensor result (sym_size, _assert_*, profiler marks): drop, keep static scalars."""
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            # only a problem if a kept op reads it (asserts on symbols are dropped)
            self.unresolved[node] = _symbolic_problem(val)
        elif isinstance(val, (bool, int, float)):
            self.ref[node] = val
        # None or an opaque object: nothing reads data from it; drop the node

    def _higher_order(self, gm: torch.fx.GraphModule, node: torch.fx.Node, nid: str, prefix: str) -> None:
        op_name = node.target.name()
        found = self._subgraph_call(node)
        if op_name in _WRAPPERS_TO_INLINE and found is not None:
            self.ref[node] = self._inline(node, nid, *found)
            return
        if op_name == "wrap_with_autocast" and found is not None:
            sub, operands = found
            device_type, dtype, enabled, cache_enabled = node.args[:4]
            if enabled:  # what autocast runs: its casts as ops, the ops at the dtypes it picks
                sub = _autocast_traced(sub, operands, device_type, dtype, cache_enabled)
                if sub is None:
                    self.problems.add(
                        "higher-order op wrap_with_autocast",
                        nid,
                        "this autocast region could not be traced with its casts; cast the model to "
                        "one dtype (--dtype) instead",
                    )
                    return
            # a disabled region is a no-op: its ops run as written
            self.ref[node] = self._inline(node, nid, sub, operands)
            return
        todo = {
            "cond": "data-dependent branching (torch.cond) cannot be scheduled statically; "
            "capture each branch as its own model",
            "while_loop": "loops with a data-dependent trip count cannot be captured; unroll them",
        }.get(op_name, "higher-order ops are not supported; rewrite forward with plain tensor ops")
        self.problems.add(f"higher-order op {op_name}", nid, todo)

    def _subgraph_call(self, node: torch.fx.Node) -> tuple[torch.fx.GraphModule, tuple] | None:
        """The submodule a wrapper op calls and the operands it passes, or None."""
        for i, a in enumerate(node.args):
            sub = self.ref.get(a) if isinstance(a, torch.fx.Node) else None
            if isinstance(sub, torch.fx.GraphModule):
                return sub, tuple(node.args[i + 1 :])
        return None

    def _inline(self, node: torch.fx.Node, nid: str, sub: torch.fx.GraphModule, operands: tuple) -> list[Any]:
        holders = [n.name for n in sub.graph.nodes if n.op == "placeholder"]
        bindings = {
            h: (self.ref.get(a) if isinstance(a, torch.fx.Node) else a)
            for h, a in zip(holders, operands, strict=False)
        }
        return self._walk(sub, sub.graph, prefix=f"{nid}.", bindings=bindings)

    # -- ATen ops ----------------------------------------------------------
    def _aten(
        self, node: torch.fx.Node, nid: str, op: torch._ops.OpOverload, val: Any, aliasing: Any
    ) -> None:
        schema = op._schema
        args = torch.fx.node.map_arg(node.args, self._arg)
        kwargs = torch.fx.node.map_arg(node.kwargs, self._arg)
        missing = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, _Missing)]
        if missing:
            for m in missing:
                if m.problem is not None:  # else: already listed where it arose
                    what, todo = m.problem
                    self.problems.add(what, nid, todo)
            return
        tensor_id = lambda o: o.vid if isinstance(o, _Ref) else None  # noqa: E731
        try:
            enc_args = encode(list(args), tensor_id)
            enc_kwargs = encode(dict(kwargs), tensor_id)
        except TypeError as e:
            self.problems.add(
                f"op {op} with an argument that cannot be stored ({e})",
                nid,
                "only tensors, numbers, strings, dtypes, devices and lists of them are supported",
            )
            return
        inputs = tuple(dict.fromkeys((*iter_tensor_refs(enc_args), *iter_tensor_refs(enc_kwargs))))
        bound = bind_arguments(schema, tuple(args), dict(kwargs))

        multi = isinstance(val, (list, tuple))
        results = list(enumerate(val)) if multi else [(0, val)]
        names = _getitem_names(node, nid[: len(nid) - len(node.name)]) if multi else {}
        list_return = len(schema.returns) == 1 and multi
        outputs: list[Value] = []
        indices: list[int] = []
        all_views = bool(results)
        for index, tensor in results:
            if not isinstance(tensor, torch.Tensor):
                continue
            vid = names.get(index, f"{nid}.out{index}") if multi else nid
            position = 0 if list_return else index
            alias_arg = aliasing.returns[position] if position < len(aliasing.returns) else None
            base = bound.get(alias_arg) if alias_arg else None
            if isinstance(base, _Ref) and aliasing.may_copy and not self._same_storage(tensor, base.vid):
                base = None  # reshape/contiguous/to that had to copy
            if not isinstance(base, _Ref) or alias_arg in aliasing.writes:
                all_views = False
            storage = self.values[base.vid].storage if isinstance(base, _Ref) else ""
            value = self._new_value(vid, tensor, "activation", storage=storage)
            if value is None:
                return
            outputs.append(value)
            indices.append(index)
        mutates = tuple(v for w in aliasing.writes for v in _ref_ids(bound.get(w)) if v in inputs)
        pure_view = all_views and not mutates
        bound_values = {k: _to_values(v, self.values) for k, v in bound.items()}
        attrs: dict[str, Any] = {"args": enc_args, "kwargs": enc_kwargs}
        if multi:
            attrs["output_index"] = indices
        self.nodes.append(
            Node(
                nid,
                str(op),
                inputs,
                tuple(v.id for v in outputs),
                attrs,
                flops=0 if pure_view else node_flops(base_name(schema), bound_values, outputs),
                bytes_read=0
                if pure_view
                else node_bytes_read(
                    base_name(schema), bound_values, [self.values[v] for v in inputs], outputs
                ),
                bytes_written=0 if pure_view else sum(v.nbytes for v in outputs),
                mutates=mutates,
            )
        )
        refs = [_Ref(v.id) for v in outputs]
        if multi:
            by_index = dict(zip(indices, refs, strict=True))
            self.ref[node] = [by_index.get(i) for i in range(len(val))]
        elif refs:
            self.ref[node] = refs[0]

    def _arg(self, n: torch.fx.Node) -> Any:
        if n not in self.ref:
            return _Missing(self.unresolved.get(n))
        return self.ref[n]

    def _same_storage(self, tensor: torch.Tensor, base_vid: str) -> bool:
        base = self.fake.get(base_vid)
        try:
            return StorageWeakRef(tensor.untyped_storage()) == StorageWeakRef(base.untyped_storage())
        except Exception:  # no storage facts (e.g. meta tensors without storage): trust the schema
            return True

    def _new_value(self, vid: str, tensor: torch.Tensor, kind: str, *, storage: str = "") -> Value | None:
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in ITEMSIZE_BYTES:
            self.problems.add(f"dtype {dtype}", vid, f"use one of {', '.join(ITEMSIZE_BYTES)}")
            return None
        shape = tuple(tensor.shape)
        if any(not isinstance(d, int) for d in shape):
            what, todo = _symbolic_problem(next(d for d in shape if not isinstance(d, int)), "shape")
            self.problems.add(what, vid, todo)
            return None
        nbytes = tensor.numel() * ITEMSIZE_BYTES[dtype]
        if not storage and kind == "activation":
            with contextlib.suppress(Exception):  # a fresh tensor owns its whole storage
                nbytes = max(nbytes, int(tensor.untyped_storage().nbytes()))
        value = Value(vid, tuple(int(d) for d in shape), dtype, nbytes, kind, storage)  # type: ignore[arg-type]
        self.values[vid] = value
        self.fake[vid] = tensor
        return value


@dataclass(frozen=True, slots=True)
class _Missing:
    """Stands for an fx argument that could not be converted, and why (None: already reported)."""

    problem: tuple[str, str] | None = None


def _symbolic_problem(val: Any, noun: str = "scalar") -> tuple[str, str]:
    """(what, what to do) for a symbolic value: data-dependent (unbacked) or a dynamic size."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    if free_unbacked_symbols(val):
        return (
            f"data-dependent {noun}",
            "it depends on tensor data (.item(), nonzero, boolean masks); compute it outside forward "
            "or use fixed-size ops (torch.where instead of masking)",
        )
    return (f"symbolic (dynamic) {noun}", STATIC_HINT)


def _has_tensor(val: Any) -> bool:
    if isinstance(val, torch.Tensor):
        return True
    if isinstance(val, (list, tuple)):
        return any(isinstance(x, torch.Tensor) for x in val)
    return False


def _getitem_names(node: torch.fx.Node, prefix: str) -> dict[int, str]:
    names: dict[int, str] = {}
    for user in node.users:
        if user.op == "call_function" and user.target is operator.getitem and isinstance(user.args[1], int):
            names.setdefault(user.args[1], prefix + user.name)
    return names


def _ref_ids(x: Any) -> list[str]:
    if isinstance(x, _Ref):
        return [x.vid]
    if isinstance(x, (list, tuple)):
        return [r.vid for r in x if isinstance(r, _Ref)]
    return []


def _to_values(x: Any, values: dict[str, Value]) -> Any:
    if isinstance(x, _Ref):
        return values[x.vid]
    if isinstance(x, (list, tuple)):
        return [_to_values(y, values) for y in x]
    return x


def _autocast_traced(
    sub: torch.fx.GraphModule, operands: tuple, device_type: str, dtype: Any, cache_enabled: Any
) -> torch.fx.GraphModule | None:
    """``sub`` traced again under ``torch.autocast``: the export keeps an autocast region as a call
    whose ops are those written, while running it casts inputs and picks lower-precision kernels;
    tracing below autocast records those casts as ops (and composite ops as their parts)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in operands]
    fake_mode = next((v.fake_mode for v in vals if hasattr(v, "fake_mode")), None)
    if fake_mode is None:
        return None

    def region(*xs: Any) -> Any:
        with torch.autocast(device_type, dtype=dtype, enabled=True, cache_enabled=bool(cache_enabled)):
            return sub(*xs)

    try:
        with fake_mode:
            return make_fx(region, tracing_mode="real")(*vals)
    except Exception:  # noqa: BLE001 - reported as an unsupported construct by the caller
        return None


def _fetch_attr(gm: torch.nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj
