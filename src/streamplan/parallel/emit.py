"""The ATen nodes a parallel plan adds around its collectives: views into flat buffers,
flattening gradients into one buffer, zero padding; and renaming what a node reads.

Every node is an ordinary ATen call the runtime can run (``aten.as_strided``, ``aten.view``,
``aten.cat``, ``aten.zeros``); views alias the storage they look into, so the memory
figures see one flat buffer per unit, as FSDP and DDP allocate them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.dtypes import itemsize, numel
from streamplan.ir.graph import Graph, Node, Value

COMM_STREAM = "comm_stream"  # node attr: which communication stream the overlap policy puts it on
UNSHARD, REDUCE = "unshard", "reduce"
TRANSPOSING_VIEWS = ("permute", "t", "transpose", "numpy_T", "expand", "as_strided")


def base_op(op: str) -> str:
    """An ATen op's name without namespace and overload (``aten.permute.default`` -> ``permute``)."""
    parts = op.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1]


def contiguous_strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(1, d)
    return out[::-1]


class Emitter:
    """Collects new values and nodes for one transform (ids made unique against ``taken``)."""

    def __init__(self, taken: set[str]):
        self.taken = taken
        self.values: dict[str, Value] = {}

    def fresh(self, stem: str) -> str:
        name, k = stem, 1
        while name in self.taken:
            k += 1
            name = f"{stem}.{k}"
        self.taken.add(name)
        return name

    def value(
        self, stem: str, shape: tuple[int, ...], dtype: str, *, storage: str = "", kind: str = "activation"
    ) -> str:
        vid = self.fresh(stem)
        nbytes = numel(shape) * itemsize(dtype)
        self.values[vid] = Value(vid, tuple(shape), dtype, nbytes, kind, storage)  # type: ignore[arg-type]
        return vid

    def view_into(
        self,
        flat: str,
        flat_storage: str,
        shape: tuple[int, ...],
        dtype: str,
        offset: int,
        stem: str,
        **attrs: Any,
    ) -> Node:
        """``aten.as_strided(flat, shape, contiguous strides, offset)``: a view of part of a flat buffer."""
        out = self.value(stem, shape, dtype, storage=flat_storage)
        args = [tensor_ref(flat), list(shape), contiguous_strides(shape), offset]
        return Node(
            self.fresh(f"{stem}.view"),
            "aten.as_strided.default",
            (flat,),
            (out,),
            {"args": args, "kwargs": {}, **attrs},
        )

    def flatten(self, src: Value, stem: str, **attrs: Any) -> Node:
        """``aten.view(src, [numel])``: ``src`` as one dimension (same storage)."""
        out = self.value(stem, (numel(src.shape),), src.dtype, storage=src.storage)
        args = [tensor_ref(src.id), [numel(src.shape)]]
        return Node(
            self.fresh(f"{stem}.view"),
            "aten.view.default",
            (src.id,),
            (out,),
            {"args": args, "kwargs": {}, **attrs},
        )

    def flat_gradient(self, graph: Graph, g: str) -> Node:
        """Gradient ``g`` as one dimension, on the reduction stream: a view of its storage, or a
        copy (``aten.reshape``) when it is a transposing view, as accumulating into a contiguous
        ``.grad`` makes one."""
        gv = graph.values[g]
        prod = graph.producer(g)
        if gv.is_alias and prod is not None and base_op(graph.node(prod).op) in TRANSPOSING_VIEWS:
            out = self.value(f"{g}.flat", (numel(gv.shape),), gv.dtype)
            return Node(
                self.fresh(f"{g}.flat"),
                "aten.reshape.default",
                (g,),
                (out,),
                {"args": [{"$v": g}, [numel(gv.shape)]], "kwargs": {}, COMM_STREAM: REDUCE},
                bytes_read=gv.nbytes,
                bytes_written=gv.nbytes,
            )
        return self.flatten(gv, f"{g}.flat", **{COMM_STREAM: REDUCE})

    def zeros(self, count: int, dtype: str, stem: str, **attrs: Any) -> Node:
        out = self.value(stem, (count,), dtype)
        kwargs = {"dtype": {"$dtype": dtype}, "device": {"$device": "cpu"}}
        nbytes = self.values[out].nbytes
        return Node(
            self.fresh(f"{stem}.zeros"),
            "aten.zeros.default",
            (),
            (out,),
            {"args": [[count]], "kwargs": kwargs, **attrs},
            bytes_written=nbytes,
        )

    def cat(self, parts: list[str], count: int, dtype: str, stem: str, **attrs: Any) -> Node:
        """``aten.cat(parts)``: one new flat buffer of ``count`` elements."""
        out = self.value(stem, (count,), dtype)
        nbytes = self.values[out].nbytes
        args = [[tensor_ref(p) for p in parts], 0]
        return Node(
            self.fresh(f"{stem}.cat"),
            "aten.cat.default",
            tuple(dict.fromkeys(parts)),
            (out,),
            {"args": args, "kwargs": {}, **attrs},
            bytes_read=nbytes,
            bytes_written=nbytes,
        )


def renamed_inputs(node: Node, mapping: Mapping[str, str]) -> Node:
    """``node`` reading ``mapping[v]`` wherever it read ``v`` (inputs, mutates and call arguments)."""
    if not any(v in mapping for v in node.inputs):
        return node
    attrs = {k: (_rename(v, mapping) if k in ("args", "kwargs") else v) for k, v in node.attrs.items()}
    return Node(
        node.id,
        node.op,
        tuple(dict.fromkeys(mapping.get(v, v) for v in node.inputs)),
        node.outputs,
        attrs,
        node.flops,
        node.bytes_read,
        node.bytes_written,
        tuple(mapping.get(v, v) for v in node.mutates),
        node.after,
    )


def _rename(obj: Any, mapping: Mapping[str, str]) -> Any:
    if isinstance(obj, Mapping):
        if "$v" in obj:
            return {"$v": mapping.get(obj["$v"], obj["$v"])}
        return {k: _rename(v, mapping) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rename(x, mapping) for x in obj]
    return obj
