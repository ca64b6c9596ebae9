"""How a full-size step is run: mixed precision and the attention kernel (no torch needed).

- **Precision** (``PRECISIONS``): ``mixed-bf16`` (or ``mixed-fp16``) is mixed-precision
  training as it is run at scale (Megatron-LM, DeepSpeed's bf16 optimizer, FSDP with a
  bf16 ``param_dtype`` over fp32 shards): the model's parameters, activations and
  gradients in bf16, the optimizer's fp32 master copy of every parameter and its state in
  fp32 (``optimizers.optimizer_update(master_dtype=...)``). Without it, the model runs in
  the dtype it was built (or cast, ``--dtype``) in, optimizer state included.
- **Attention** (``ATTENTIONS``): ``flash`` and ``math`` choose the kernel of
  ``scaled_dot_product_attention`` (``fullsize.attention_backends``); ``eager`` asks a
  Hugging Face model for its Python attention code (``attn_implementation="eager"``).
  ``attention_in(graph)`` says, from the captured ops, which one a step really runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamplan.errors import ModelSpecError
from streamplan.ir.graph import Graph

# precision -> (dtype of the parameters, activations and gradients, dtype of the master weights and state)
PRECISIONS: dict[str, tuple[str, str]] = {
    "mixed-bf16": ("bfloat16", "float32"),
    "mixed-fp16": ("float16", "float32"),
}
ATTENTIONS: tuple[str, ...] = ("flash", "math", "eager")

_FUSED_ATTENTION = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_flash_attention_for_cpu": "flash",
    "_scaled_dot_product_efficient_attention": "memory-efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN",
    "_flash_attention_forward": "flash",
    "_efficient_attention_forward": "memory-efficient",
}
_SOFTMAX = {"_softmax", "softmax", "_safe_softmax"}


def check_precision(precision: str | None, *, train: bool, dtype: str | None) -> None:
    """Refuse a precision that does not exist or does not apply to the request."""
    if precision is None:
        return
    if precision not in PRECISIONS:
        raise ModelSpecError(
            f"unknown precision {precision!r}", hint=f"use one of {', '.join(PRECISIONS)}, or leave it out"
        )
    if not train:
        raise ModelSpecError(
            f"{precision} keeps fp32 master weights and optimizer state: it describes a training step",
            hint="add --train, or use --dtype bfloat16 for inference in bf16",
        )
    if dtype is not None:
        raise ModelSpecError(
            f"--dtype {dtype} and --precision {precision} both set the model's dtype",
            hint=f"{precision} runs the model in {PRECISIONS[precision][0]}: drop --dtype",
        )


def check_attention(attention: str | None) -> None:
    if attention is not None and attention not in ATTENTIONS:
        raise ModelSpecError(f"unknown attention {attention!r}", hint=f"use one of {', '.join(ATTENTIONS)}")


@dataclass(frozen=True)
class AttentionUse:
    """Which attention a graph runs: ``kernel`` is ``flash``, ``memory-efficient``, ``cuDNN``
    (fused SDPA kernels: no score matrix in memory), ``materialised`` (a softmax over a
    4-d score tensor per call: eager attention or SDPA's math kernel) or ``none``; ``calls``
    how many forward calls; ``scores_bytes`` the largest score (softmax) tensor materialised."""

    kernel: str
    calls: int
    scores_bytes: int = 0
    scores_shape: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "calls": self.calls,
            "scores_bytes": self.scores_bytes,
            "scores_shape": list(self.scores_shape),
        }

    def text(self) -> str:
        if self.kernel == "none":
            return "no attention"
        if self.kernel == "materialised":
            shape = "x".join(map(str, self.scores_shape))
            return (
                f"attention materialises its scores: {self.calls} softmax calls over {shape} tensors "
                f"({self.scores_bytes / (1 << 20):.0f} MiB each)"
            )
        return f"{self.kernel} attention ({self.calls} calls): no score matrix in memory"


def attention_in(graph: Graph) -> AttentionUse:
    """The attention ``graph`` runs, read from its ops (see ``AttentionUse``)."""
    fused: dict[str, int] = {}
    softmax_calls, largest, shape = 0, 0, ()
    for node in graph.nodes:
        base = node.op.split(".")[1] if node.op.startswith("aten.") else node.op
        if base in _FUSED_ATTENTION:
            kind = _FUSED_ATTENTION[base]
            fused[kind] = fused.get(kind, 0) + 1
        elif base in _SOFTMAX and node.outputs:
            out = graph.values[node.outputs[0]]
            if len(out.shape) == 4:
                softmax_calls += 1
                if out.nbytes > largest:
                    largest, shape = out.nbytes, out.shape
    if fused:
        kind = max(fused, key=fused.__getitem__)
        return AttentionUse(kind, fused[kind])
    if softmax_calls:
        return AttentionUse("materialised", softmax_calls, largest, tuple(shape))
    return AttentionUse("none", 0)
