"""Full-size models without their memory: meta-device modules, and the attention kernel a step runs.

A model built on the meta device (``with torch.device("meta"): model = Model(config)``)
has every parameter's shape and dtype but no storage, so an 8-billion-parameter model
costs nothing to build. Capture traces it under a ``FakeTensorMode``, where each meta
parameter, buffer or input becomes a fake tensor on the CPU: shape, dtype and strides,
no data. Fake CPU tensors (rather than fake meta ones) let the model's real inputs (token
ids, labels), which live on the CPU, meet its parameters in one device, and make the
CPU's kernel choices apply: scaled dot-product attention picks the CPU's flash kernel,
whose memory is that of the CUDA flash kernel (the output and a log-sum-exp per row are
saved, never the sequence x sequence score matrix).

``attention_backends`` forces the kernel ``torch.nn.functional.scaled_dot_product_attention``
dispatches to while a model is traced: ``flash`` (saves the output and the log-sum-exp)
or ``math`` (the reference composition: materialises the scores and the softmax for
every head, as eager attention code does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from streamplan.errors import ModelSpecError
from streamplan.frontends.precision import ATTENTIONS


def has_meta_state(module: torch.nn.Module) -> bool:
    """True when any parameter or buffer of ``module`` lives on the meta device."""
    return any(t.is_meta for t in (*module.parameters(), *module.buffers()))


def fake_of(mode: Any, x: Any) -> Any:
    """``x`` as a fake tensor of ``mode``: a meta tensor becomes a fake CPU tensor of the same
    shape, strides, dtype and ``requires_grad``; other tensors are converted as they are."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.is_meta:
        with mode:
            t = torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device="cpu")
        return t.requires_grad_(x.requires_grad) if x.is_floating_point() else t
    return mode.from_tensor(x, static_shapes=True)


def fake_state(module: torch.nn.Module, mode: Any) -> dict[str, Any]:
    """Every parameter and buffer of ``module`` by name, as fakes of ``mode`` (parameters stay
    ``nn.Parameter``, as ``torch.export`` checks); a tensor registered under two names (tied
    weights) stays one fake tensor."""

    def fake(v: torch.Tensor) -> Any:
        t = fake_of(mode, v)
        return (
            torch.nn.Parameter(t, requires_grad=v.requires_grad) if isinstance(v, torch.nn.Parameter) else t
        )

    state = {
        **dict(module.named_parameters(remove_duplicate=False)),
        **dict(module.named_buffers(remove_duplicate=False)),
    }
    fakes: dict[int, Any] = {}
    return {k: fakes.setdefault(id(v), fake(v)) for k, v in state.items()}


@contextlib.contextmanager
def faked_module(module: torch.nn.Module, args: tuple, kwargs: dict) -> Iterator[tuple[tuple, dict]]:
    """Inside: ``module``'s parameters and buffers are fake CPU tensors (meta ones included) and
    the yielded ``(args, kwargs)`` are fakes of the same mode, ready for ``torch.export``."""
    import torch.utils._pytree as pytree
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.utils.stateless import _reparametrize_module

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake = lambda x: fake_of(mode, x)  # noqa: E731
    with _reparametrize_module(module, fake_state(module, mode)):
        yield pytree.tree_map(fake, args), pytree.tree_map(fake, kwargs)


@contextlib.contextmanager
def attention_backends(attention: str | None) -> Iterator[None]:
    """Force the kernel of ``scaled_dot_product_attention`` while tracing: ``flash`` or ``math``;
    None (or ``eager``, which concerns the model's own code, not SDPA) changes nothing."""
    if attention is None or attention == "eager":
        yield
        return
    if attention not in ATTENTIONS:
        raise ModelSpecError(f"unknown attention {attention!r}", hint=f"use one of {', '.join(ATTENTIONS)}")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = SDPBackend.FLASH_ATTENTION if attention == "flash" else SDPBackend.MATH
    with sdpa_kernel([backend]):
        yield
