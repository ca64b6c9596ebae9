"""The optimizer update of a training step, as ATen ops on the graph (no torch needed).

Each update replays ``torch.optim``'s single-tensor implementation op for op (the one
it uses on the CPU, and with ``foreach=False`` everywhere), so that a graph run on one
stream gives bit-identical parameters:

- ``sgd`` (``torch.optim.SGD(lr)``): ``p.add_(g, alpha=-lr)``;
- ``momentum`` (``SGD(lr, momentum)``, steady state): ``buf.mul_(momentum).add_(g, alpha=1)``,
  then ``p.add_(buf, alpha=-lr)``;
- ``adam`` (``torch.optim.Adam(lr, betas, eps)`` at step ``step``):
  ``m.lerp_(g, 1 - beta1)``, ``v.mul_(beta2).addcmul_(g, g, value=1 - beta2)``,
  ``denom = (v.sqrt() / bias_correction2 ** 0.5).add_(eps)``,
  ``p.addcdiv_(m, denom, value=-lr / bias_correction1)``;
- ``adamw`` (``torch.optim.AdamW(lr, betas, eps, weight_decay)``): the decoupled decay
  ``p.mul_(1 - lr * weight_decay)`` first, then Adam's update.

**Mixed precision with master weights** (``master_dtype="float32"``), as mixed-precision
training keeps a low-precision model: the parameters and gradients are bf16 (or fp16),
and the optimizer owns an fp32 copy of every parameter (state slot ``master``) with its
state in fp32 too. The update casts the gradient up (``g.to(float32)``, a temporary),
updates the master copy exactly as above, and writes it back into the model's parameter
(``p.copy_(master)``, rounding to the parameter's dtype). That is 2 + 2 bytes per
parameter for the bf16 weights and gradients and 4 + 4 + 4 for the fp32 master and
Adam's moments: the "16 bytes per parameter" of mixed-precision Adam.

Updates are in place: each op's output aliases the storage it writes and the op lists
it in ``node.mutates``, so the parameter and the state keep their storage and the
gradient dies at its last read. The state (momentum buffer, Adam's two moments) is
resident, like the parameters (value kind ``buffer``). Adam's step counter is a host
number (the bias corrections are constants of the graph), as in ``torch.optim`` where it
is a CPU scalar read with ``.item()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.frontends.argcodec import tensor_ref
from streamplan.frontends.flops import node_flops
from streamplan.ir.dtypes import tensor_bytes
from streamplan.ir.graph import Node, Value
from streamplan.ir.training import OPTIMIZERS

DEFAULT_HYPERPARAMETERS: dict[str, dict[str, float]] = {
    "none": {},
    "sgd": {"lr": 0.01},
    "momentum": {"lr": 0.01, "momentum": 0.9},
    "adam": {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "step": 1.0},
    "adamw": {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "step": 1.0},
}
STATE_SLOTS: dict[str, tuple[str, ...]] = {
    "none": (),
    "sgd": (),
    "momentum": ("momentum_buffer",),
    "adam": ("exp_avg", "exp_avg_sq"),
    "adamw": ("exp_avg", "exp_avg_sq"),
}
MASTER_SLOT = "master"  # the fp32 copy of a parameter that mixed-precision training updates


def check_optimizer(name: str) -> str:
    """``name`` if it is a known optimizer; a ``ModelSpecError`` naming the choices otherwise."""
    if name not in OPTIMIZERS:
        raise ModelSpecError(f"unknown optimizer {name!r}", hint=f"use one of {', '.join(OPTIMIZERS)}")
    return name


@dataclass
class OptimizerUpdate:
    """What the update adds to a graph: nodes, new values, the state leaves, and for each
    parameter the value that holds it after the update."""

    nodes: list[Node] = field(default_factory=list)
    values: dict[str, Value] = field(default_factory=dict)
    state: dict[str, tuple[str, str]] = field(default_factory=dict)  # state id -> (param, slot)
    updates: dict[str, str] = field(default_factory=dict)  # param id -> its value after the update


class _Emitter:
    """Appends ATen nodes, naming each node and its output ``<param>.<step>``."""

    def __init__(self, values: Mapping[str, Value], out: OptimizerUpdate, taken: Callable[[str], bool]):
        self.known = values
        self.out = out
        self.taken = taken

    def value(self, vid: str) -> Value:
        return self.out.values.get(vid) or self.known[vid]

    def fresh(self, stem: str) -> str:
        name, k = stem, 1
        while self.taken(name) or name in self.out.values:
            k += 1
            name = f"{stem}{k}"
        return name

    def state(self, param: str, slot: str, dtype: str | None = None) -> str:
        """A state tensor shaped like ``param`` (in ``dtype``, default the parameter's)."""
        p = self.value(param)
        nbytes = p.nbytes if dtype is None or dtype == p.dtype else tensor_bytes(p.shape, dtype)
        vid = self.fresh(f"{param}.{slot}")
        self.out.values[vid] = Value(vid, p.shape, dtype or p.dtype, nbytes, "buffer")
        self.out.state[vid] = (param, slot)
        return vid

    def op(
        self,
        stem: str,
        op: str,
        args: list[Any],
        kwargs: dict[str, Any],
        *,
        writes: str | None,
        dtype: str | None = None,
    ) -> str:
        """One node; ``writes`` names the input it updates in place (its output aliases it);
        ``dtype`` is the output's when it differs from the first input's (a cast)."""
        inputs = tuple(dict.fromkeys(a["$v"] for a in args if isinstance(a, dict)))
        first = self.value(inputs[0])
        vid = self.fresh(stem)
        storage = self.value(writes).storage if writes else ""
        if writes:  # an in-place update keeps the written tensor's dtype and size
            dtype, nbytes = self.value(writes).dtype, self.value(writes).nbytes
        elif dtype is None or dtype == first.dtype:
            dtype, nbytes = first.dtype, first.nbytes
        else:
            nbytes = tensor_bytes(first.shape, dtype)
        out = Value(vid, first.shape, dtype, nbytes, "activation", storage)
        self.out.values[vid] = out
        base = op.split(".")[1].rstrip("_")
        self.out.nodes.append(
            Node(
                vid,
                op,
                inputs,
                (vid,),
                {"args": args, "kwargs": kwargs},
                flops=node_flops(base, {}, [out]),
                bytes_read=sum(self.value(v).nbytes for v in inputs),
                bytes_written=nbytes,
                mutates=(writes,) if writes else (),
            )
        )
        return vid


def optimizer_update(
    values: Mapping[str, Value],
    gradients: Mapping[str, str],
    optimizer: str,
    hyperparameters: Mapping[str, float],
    taken: Callable[[str], bool],
    *,
    master_dtype: str | None = None,
) -> OptimizerUpdate:
    """The update of every parameter in ``gradients`` (param id -> gradient id), in that order.

    ``taken(name)`` says whether a node or value id is already used in the graph.
    ``master_dtype`` (``"float32"``): the optimizer updates a master copy of each parameter in
    that dtype, its state in that dtype too, and copies the result back into the parameter
    (mixed precision, see the module docstring); None updates the parameters themselves.
    """
    check_optimizer(optimizer)
    h = {**DEFAULT_HYPERPARAMETERS[optimizer], **hyperparameters}
    out = OptimizerUpdate()
    e = _Emitter(values, out, taken)
    r = tensor_ref
    for p, g in gradients.items():
        if optimizer == "none":
            break
        target, grad = p, g
        if master_dtype is not None:
            target = e.state(p, MASTER_SLOT, master_dtype)
            if e.value(g).dtype != master_dtype:
                grad = e.op(
                    f"{g}.{master_dtype}",
                    "aten._to_copy.default",
                    [r(g)],
                    {"dtype": {"$dtype": master_dtype}},
                    writes=None,
                    dtype=master_dtype,
                )
        updated = _update_one(e, p, target, grad, optimizer, h, master_dtype)
        if master_dtype is not None:
            updated = e.op(f"{p}.copy_", "aten.copy_.default", [r(p), r(updated)], {}, writes=p)
        out.updates[p] = updated
    return out


def _update_one(
    e: _Emitter,
    param: str,
    target: str,
    g: str,
    optimizer: str,
    h: Mapping[str, float],
    state_dtype: str | None,
) -> str:
    """``optimizer``'s in-place update of ``target`` (``param`` itself, or its master copy) with
    gradient ``g``; the state is recorded as ``param``'s. Returns ``target``'s new value."""
    r = tensor_ref
    p = target
    if optimizer == "sgd":
        return e.op(f"{param}.add_", "aten.add_.Tensor", [r(p), r(g)], {"alpha": -h["lr"]}, writes=p)
    if optimizer == "momentum":
        buf = e.state(param, "momentum_buffer", state_dtype)
        scaled = e.op(f"{buf}.mul_", "aten.mul_.Scalar", [r(buf), h["momentum"]], {}, writes=buf)
        summed = e.op(f"{buf}.add_", "aten.add_.Tensor", [r(scaled), r(g)], {"alpha": 1}, writes=scaled)
        return e.op(f"{param}.add_", "aten.add_.Tensor", [r(p), r(summed)], {"alpha": -h["lr"]}, writes=p)
    # adam, adamw
    if optimizer == "adamw":  # decoupled weight decay first, as torch.optim.AdamW
        p = e.op(f"{param}.mul_", "aten.mul_.Scalar", [r(p), 1 - h["lr"] * h["weight_decay"]], {}, writes=p)
    beta1, beta2, step = h["beta1"], h["beta2"], h["step"]
    m, v = e.state(param, "exp_avg", state_dtype), e.state(param, "exp_avg_sq", state_dtype)
    m1 = e.op(f"{m}.lerp_", "aten.lerp_.Scalar", [r(m), r(g), 1 - beta1], {}, writes=m)
    v1 = e.op(f"{v}.mul_", "aten.mul_.Scalar", [r(v), beta2], {}, writes=v)
    v2 = e.op(f"{v}.addcmul_", "aten.addcmul_.default", [r(v1), r(g), r(g)], {"value": 1 - beta2}, writes=v1)
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    root = e.op(f"{param}.sqrt", "aten.sqrt.default", [r(v2)], {}, writes=None)
    scaled = e.op(f"{param}.denom", "aten.div.Scalar", [r(root), bias_correction2**0.5], {}, writes=None)
    denom = e.op(f"{param}.denom.add_", "aten.add_.Scalar", [r(scaled), h["eps"]], {}, writes=scaled)
    return e.op(
        f"{param}.addcdiv_",
        "aten.addcdiv_.default",
        [r(p), r(m1), r(denom)],
        {"value": -(h["lr"] / bias_correction1)},
        writes=p,
    )
