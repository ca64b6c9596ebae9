"""The ONNX → IR converter: walks the nodes once, folds constants, emits ATen nodes.

``onnx_ops.OPS`` maps an ONNX op type to a function that reads the node through this
converter (``x(i)`` a tensor operand, ``const(i)`` a known value, ``attr``) and emits
ATen calls with ``emit``; ``bind`` names an ONNX output after what was emitted.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.multiprocessing.reductions import StorageWeakRef

from streamplan.frontends.aliasing import base_name, bind_arguments, op_aliasing
from streamplan.frontends.argcodec import encode, iter_tensor_refs
from streamplan.frontends.flops import node_bytes_read, node_flops
from streamplan.frontends.onnx_ops import FOLD_LIMIT, ONNX_DTYPES, OPS
from streamplan.frontends.problems import Problems
from streamplan.ir.dtypes import ITEMSIZE_BYTES
from streamplan.ir.graph import Graph, Node, Value
from streamplan.ir.verify import verify

# what reading an attribute of the wrong kind raises (int("x"), a graph where a number belongs,
# bytes that are not UTF-8, a missing input...): a problem of the file, reported with its node
MALFORMED = (ValueError, TypeError, KeyError, IndexError, OverflowError)


@dataclass(frozen=True, slots=True)
class T:
    """A tensor operand of an emitted ATen call: the IR value id."""

    vid: str


@contextlib.contextmanager
def _quiet_fake_tensors():
    """Silence FakeTensorMode's log of a failed op: a bad attribute is one of the file's problems,
    reported with its node, not a traceback on the user's terminal."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def onnx_problems(model: str) -> Problems:
    """The problem list of an ONNX import (its message and hint speak of importing)."""
    return Problems(
        model,
        action="import",
        hint="fix or replace each construct listed above (or re-export the model), then load it again",
    )


class Converter:
    def __init__(self, model: Any, name: str, problems: Problems):
        import onnx

        self.onnx = onnx
        self.model = model
        self.name = name
        self.problems = problems
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.mode = FakeTensorMode()
        self.values: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.fake: dict[str, torch.Tensor] = {}
        self.vid: dict[str, str] = {}  # ONNX tensor name -> IR value id
        self.known: dict[str, np.ndarray] = {}  # ONNX tensor name -> known value
        self.initializers = {i.name for i in model.graph.initializer}
        self.params: list[str] = []
        self.param_names: dict[str, str] = {}
        self.constant_values: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self.types: dict[str, Any] = {}
        for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
            self.types[vi.name] = vi.type.tensor_type
        self.node: Any = None

    # -- the walk ------------------------------------------------------------
    def run(self) -> Graph:
        g = self.model.graph
        for init in g.initializer:
            self.known[init.name] = self.onnx.numpy_helper.to_array(init)
        inputs = []
        for inp in g.input:
            if inp.name in self.initializers:
                continue
            vid = self._leaf_value(inp.name, self._static_shape(inp.name), self._dtype(inp.name), "input")
            if vid is not None:
                self.vid[inp.name] = vid
                inputs.append(vid)
        for node in g.node:
            self.node = node
            try:
                self._convert(node)
            except _Skip:
                pass
            except MALFORMED as e:  # the file is data: an attribute of the wrong kind is its problem
                self.problems.add(
                    f"{node.op_type} with a malformed attribute or input ({type(e).__name__}: {str(e)[:100]})",
                    node.name or node.op_type,
                    "check the node against the ONNX operator's definition",
                )
        self.problems.raise_if_any()  # before the outputs: a skipped op leaves one without producer
        outputs = []
        for o in g.output:
            with contextlib.suppress(_Skip):  # the problem is recorded
                outputs.append(self.tensor_of(o.name))
        self.problems.raise_if_any()
        meta: dict[str, Any] = {
            "input_names": inputs,
            "output_values": [{"$v": v.vid} for v in outputs],
            "onnx_inputs": [i.name for i in g.input if i.name not in self.initializers],
            "onnx_outputs": [o.name for o in g.output],
            "onnx_opset": self.opset,
        }
        if self.constant_values:
            meta["constant_values"] = self.constant_values
        graph = Graph(
            self.name,
            tuple(self.nodes),
            self.values,
            tuple(inputs),
            tuple(self.params),
            tuple(dict.fromkeys(v.vid for v in outputs)),
            meta,
            param_names=self.param_names,
        )
        return verify(graph)

    def _convert(self, node: Any) -> None:
        if node.op_type == "Constant":
            self.known[node.output[0]] = self._constant_attr(node)
        elif self._foldable(node):
            self._fold(node)
        elif node.op_type in OPS:
            OPS[node.op_type](self, node)
        elif node.domain in ("", "ai.onnx") and node.op_type not in ("If", "Loop", "Scan", "SequenceMap"):
            self.problems.add(
                f"op {node.op_type}",
                node.name or node.op_type,
                "streamplan has no mapping of this op to ATen",
            )

    # -- what op functions use ----------------------------------------------------
    def has(self, i: int) -> bool:
        return i < len(self.node.input) and bool(self.node.input[i])

    def const(self, i: int) -> np.ndarray | None:
        """The known value of input ``i`` (an initializer, a Constant or something folded)."""
        return self.known.get(self.node.input[i]) if self.has(i) else None

    def ints(self, i: int, what: str) -> list[int]:
        """Input ``i`` as a list of ints; it must be known at import."""
        value = self.const(i)
        if value is None:
            self.fail(f"{self.node.op_type} with a computed {what}", f"its {what} must be a constant")
        return [int(v) for v in np.asarray(value).reshape(-1)]

    def attr(self, name: str, default: Any = None) -> Any:
        for a in self.node.attribute:
            if a.name == name:
                value = self.onnx.helper.get_attribute_value(a)
                return value.decode() if isinstance(value, bytes) else value
        return default

    def shape(self, i: int) -> tuple[int, ...]:
        name = self.node.input[i]
        if name in self.vid:
            return tuple(self.fake[self.vid[name]].shape)
        return tuple(np.asarray(self.known[name]).shape)

    def dtype(self, i: int) -> str:
        name = self.node.input[i]
        if name in self.vid:
            return str(self.fake[self.vid[name]].dtype).removeprefix("torch.")
        return str(np.asarray(self.known[name]).dtype).replace("bool_", "bool")

    def x(self, i: int, *, kind: str = "param") -> T:
        """Input ``i`` as a tensor operand (a constant becomes a leaf value of the graph)."""
        return self.tensor_of(self.node.input[i], kind=kind)

    def tensor_of(self, name: str, *, kind: str = "param") -> T:
        if name in self.vid:
            return T(self.vid[name])
        if name not in self.known:
            self.fail(f"tensor {name!r} with no producer", "the model is malformed")
        value = np.asarray(self.known[name])
        if value.dtype.kind != "f":
            kind = "buffer"  # integer and boolean state (indices, masks) is not a trainable weight
        if name not in self.initializers:
            kind = "constant"
            if value.size > FOLD_LIMIT:
                self.fail("a computed constant of more than 65536 elements", "make it an initializer")
        dtype = "bool" if value.dtype == np.bool_ else str(value.dtype)
        vid = self._leaf_value(name, tuple(value.shape), dtype, kind)
        if vid is None:
            raise _Skip
        self.vid[name] = vid
        self.params.append(vid)
        self.param_names[vid] = name
        if kind == "constant":
            self.constant_values[vid] = value.tolist()
        return T(vid)

    def bind(self, j: int, t: T) -> None:
        """ONNX output ``j`` of the current node is IR value ``t`` (its shape checked against ONNX)."""
        name = self.node.output[j]
        if not name:
            return
        self.vid[name] = t.vid
        expected = self._static_shape(name, required=False)
        got = tuple(self.fake[t.vid].shape)
        if expected is not None and expected != got:
            self.fail(
                f"{self.node.op_type} mapped to a shape {list(got)} where ONNX infers {list(expected)}",
                "report this model: the ATen mapping of this op is wrong for it",
            )

    def fail(self, what: str, todo: str) -> None:
        where = "graph outputs" if self.node is None else self.node.name or self.node.op_type
        self.problems.add(what, where, todo)
        raise _Skip

    def emit(self, op: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> list[T]:
        """Add an ATen call ``op`` (e.g. ``"aten.relu.default"``); returns its tensor results."""
        kwargs = kwargs or {}
        _, name, overload = op.split(".")
        fn = getattr(getattr(torch.ops.aten, name), overload)
        fake = lambda o: self.fake[o.vid] if isinstance(o, T) else o  # noqa: E731
        fake_args = [([fake(y) for y in a] if isinstance(a, list) else fake(a)) for a in args]
        fake_kwargs = {k: fake(v) for k, v in kwargs.items()}
        try:
            with self.mode, _quiet_fake_tensors():
                result = fn(*fake_args, **fake_kwargs)
        except Exception as e:
            self.fail(
                f"{self.node.op_type} as {op} failed ({type(e).__name__}: {str(e)[:120]})", "check the op"
            )
        multi = isinstance(result, (list, tuple))
        results = list(result) if multi else [result]
        nid = self._node_id(name)
        schema = fn._schema
        aliasing = op_aliasing(schema)
        bound = bind_arguments(schema, tuple(args), kwargs)
        outputs, all_views = [], True
        for k, tensor in enumerate(results):
            position = 0 if (multi and len(schema.returns) == 1) else k
            alias_arg = aliasing.returns[position] if position < len(aliasing.returns) else None
            base = bound.get(alias_arg) if alias_arg else None
            if isinstance(base, T) and aliasing.may_copy and not self._same_storage(tensor, base.vid):
                base = None
            if not isinstance(base, T):
                all_views = False
            vid = f"{nid}_{k}" if multi else nid
            storage = self.values[base.vid].storage if isinstance(base, T) else ""
            outputs.append(self._new_value(vid, tensor, "activation", storage))
        tensor_id = lambda o: o.vid if isinstance(o, T) else None  # noqa: E731
        enc_args, enc_kwargs = encode(list(args), tensor_id), encode(dict(kwargs), tensor_id)
        inputs = tuple(dict.fromkeys((*iter_tensor_refs(enc_args), *iter_tensor_refs(enc_kwargs))))
        attrs: dict[str, Any] = {"args": enc_args, "kwargs": enc_kwargs, "onnx_node": self.node.name or ""}
        if multi:
            attrs["output_index"] = list(range(len(results)))
        bound_values = {k: self._as_values(v) for k, v in bound.items()}
        self.nodes.append(
            Node(
                nid,
                op,
                inputs,
                tuple(v.id for v in outputs),
                attrs,
                flops=0 if all_views else node_flops(base_name(schema), bound_values, outputs),
                bytes_read=0
                if all_views
                else node_bytes_read(
                    base_name(schema), bound_values, [self.values[v] for v in inputs], outputs
                ),
                bytes_written=0 if all_views else sum(v.nbytes for v in outputs),
            )
        )
        return [T(v.id) for v in outputs]

    # -- internals -----------------------------------------------------------------
    def _foldable(self, node: Any) -> bool:
        if node.op_type in ("Shape", "Size"):
            return bool(node.input) and (node.input[0] in self.vid or node.input[0] in self.known)
        present = [n for n in node.input if n]
        # a computation on weights stays in the graph (the weights remain parameters)
        return bool(present) and all(
            n in self.known
            and np.asarray(self.known[n]).size <= FOLD_LIMIT
            and not (n in self.initializers and np.asarray(self.known[n]).dtype.kind == "f")
            for n in present
        )

    def _fold(self, node: Any) -> None:
        if node.op_type in ("Shape", "Size"):
            name = node.input[0]
            shape = (
                list(self.fake[self.vid[name]].shape) if name in self.vid else list(self.known[name].shape)
            )
            if node.op_type == "Size":
                value = np.array(int(np.prod(shape)), dtype=np.int64)
            else:
                value = np.array(shape[self.attr("start", 0) : self.attr("end", None)], dtype=np.int64)
            self.known[node.output[0]] = value
            return
        from onnx.reference import ReferenceEvaluator

        helper = self.onnx.helper
        feeds = {n: self.known[n] for n in node.input if n}
        graph = helper.make_graph(
            [node],
            "fold",
            [
                helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                for n, v in feeds.items()
            ],
            [helper.make_tensor_value_info(o, 0, None) for o in node.output if o],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            results = ReferenceEvaluator(model).run(None, feeds)
        except Exception as e:
            self.problems.add(
                f"folding {node.op_type} failed ({type(e).__name__})", node.name or node.op_type, str(e)[:100]
            )
            return
        for o, r in zip([o for o in node.output if o], results, strict=True):
            self.known[o] = np.asarray(r)

    def _constant_attr(self, node: Any) -> np.ndarray:
        if len(node.attribute) != 1 or len(node.output) != 1:
            self.fail("Constant without exactly one value and one output", "give it one value attribute")
        a = node.attribute[0]
        value = self.onnx.helper.get_attribute_value(a)
        if a.name == "value":
            return self.onnx.numpy_helper.to_array(value)
        if a.name in ("value_float", "value_floats"):
            return np.asarray(value, dtype=np.float32)
        if a.name in ("value_int", "value_ints"):
            return np.asarray(value, dtype=np.int64)
        self.problems.add(f"Constant with {a.name}", node.name or "Constant", "use a tensor value")
        return np.zeros(0, dtype=np.float32)

    def _dtype(self, name: str) -> str | None:
        t = self.types.get(name)
        return ONNX_DTYPES.get(t.elem_type) if t is not None else None

    def _static_shape(self, name: str, *, required: bool = True) -> tuple[int, ...] | None:
        t = self.types.get(name)
        if t is None or not t.HasField("shape"):
            return None
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        return None if any(d is None for d in dims) else tuple(dims)

    def _leaf_value(
        self, name: str, shape: tuple[int, ...] | None, dtype: str | None, kind: str
    ) -> str | None:
        where = self.node.name if self.node is not None else name
        if shape is None:
            self.problems.add(f"input {name!r} without a static shape", where, "give it static dims")
            return None
        if dtype is None or dtype not in ITEMSIZE_BYTES:
            self.problems.add(
                f"tensor {name!r} of an unsupported element type", where, "use a standard dtype"
            )
            return None
        vid = _ident(name, self.values, prefix="" if kind == "input" else "p_")
        with self.mode:
            tensor = torch.empty(shape, dtype=getattr(torch, dtype))
        self._new_value(vid, tensor, kind, "")
        return vid

    def _new_value(self, vid: str, tensor: torch.Tensor, kind: str, storage: str) -> Value:
        dtype = str(tensor.dtype).removeprefix("torch.")
        nbytes = tensor.numel() * ITEMSIZE_BYTES[dtype]
        value = Value(vid, tuple(int(d) for d in tensor.shape), dtype, nbytes, kind, storage)  # type: ignore[arg-type]
        self.values[vid] = value
        self.fake[vid] = tensor
        return value

    def _node_id(self, base: str) -> str:
        base = base.strip("_") or "op"
        k = self.counts.get(base, 0)
        self.counts[base] = k + 1
        nid = base if k == 0 else f"{base}_{k}"
        while nid in self.values:
            nid += "_"
        return nid

    def _same_storage(self, tensor: torch.Tensor, base_vid: str) -> bool:
        try:
            return StorageWeakRef(tensor.untyped_storage()) == StorageWeakRef(
                self.fake[base_vid].untyped_storage()
            )
        except Exception:
            return True

    def _as_values(self, x: Any) -> Any:
        if isinstance(x, T):
            return self.values[x.vid]
        if isinstance(x, list):
            return [self._as_values(y) for y in x]
        return x


class _Skip(Exception):
    """The current node was reported as a problem; go on with the next."""


def _ident(name: str, taken: dict[str, Any], *, prefix: str) -> str:
    base = prefix + (re.sub(r"[^0-9A-Za-z_]+", "_", name).strip("_") or "t")
    vid, k = base, 1
    while vid in taken:
        vid = f"{base}_{k}"
        k += 1
    return vid
