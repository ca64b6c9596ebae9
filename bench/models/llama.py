"""Llama-style decoders from ``transformers.LlamaConfig``, random weights, built offline.

Model specs for ``file.py:function`` (each function returns ``(module, example_inputs,
loss_fn, targets)``; the loss is the mean cross entropy of next-token prediction on random
tokens, the targets the next tokens):

- ``tiny``: 2 layers, hidden 64, vocabulary 256, sequence 16 (tests; runs for real in seconds);
- ``small``: 4 layers, hidden 256, vocabulary 2048, sequence 64;
- ``llama_1b``: Llama-3.2-1B's sizes (16 layers, hidden 2048, 32 heads, 8 KV heads, vocabulary
  128,256; the LM head untied from the embeddings, 1.5B parameters), built on the meta device
  and given one-element parameters (no memory: for analyses only), sequence 2048;
- ``llama_8b``: Llama-3.1-8B's sizes (32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14,336,
  vocabulary 128,256), built the same way, sequence 2048.

The batch is each rank's (``--batch``); inputs are token ids, the targets the next tokens.
"""

from __future__ import annotations

import os

import torch


def _build(config_kwargs: dict, batch: int, seq: int, meta: bool, dtype: torch.dtype = torch.float32):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(attn_implementation="eager", use_cache=False, **config_kwargs)
    torch.manual_seed(0)
    if meta:
        with torch.device("meta"):
            model = LlamaForCausalLM(config).to(dtype)
        _without_memory(model)
    else:
        model = LlamaForCausalLM(config)
        if dtype != torch.float32:
            model = model.to(dtype)
    ids = torch.randint(0, config.vocab_size, (batch, seq + 1), generator=torch.Generator().manual_seed(1))
    tokens, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def loss_fn(output, labels):
        logits = output.logits if hasattr(output, "logits") else output[0]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    return model, (tokens,), loss_fn, (targets,)


def _without_memory(model: torch.nn.Module) -> None:
    """Every parameter and buffer as a CPU tensor of its shape that holds one element (stride 0):
    the capture runs on fake tensors and needs shapes only, and autograd's tracer, unlike with
    meta tensors, then treats the module as it treats a real one."""
    for sub in model.modules():
        for name, p in list(sub.named_parameters(recurse=False)):
            sub._parameters[name] = torch.nn.Parameter(
                torch.zeros((), dtype=p.dtype).expand(p.shape), requires_grad=p.requires_grad
            )
        for name, b in list(sub.named_buffers(recurse=False)):
            sub._buffers[name] = torch.zeros((), dtype=b.dtype).expand(b.shape)


def tiny(batch: int = 2):
    kw = dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        max_position_embeddings=64,
    )
    return _build(kw, batch, 16, meta=False)


def small(batch: int = 2):
    kw = dict(
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=2048,
        max_position_embeddings=128,
    )
    return _build(kw, batch, 64, meta=False)


_1B = dict(
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
)
_8B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    max_position_embeddings=2048,
)


def llama_1b_short(batch: int = 1):
    """``llama_1b`` on sequences of 256 tokens: little activation memory beside the parameters,
    as under activation checkpointing, where the gathered parameters decide the peak."""
    return _build(_1B, batch, 256, meta=True, dtype=torch.bfloat16)


def llama_8b_short(batch: int = 1):
    """``llama_8b`` on sequences of 256 tokens (see ``llama_1b_short``)."""
    return _build(_8B, batch, 256, meta=True, dtype=torch.bfloat16)


def llama_1b(batch: int = 1):
    return _build(_1B, batch, 2048, meta=True, dtype=torch.bfloat16)


def llama_8b(batch: int = 1):
    return _build(_8B, batch, 2048, meta=True, dtype=torch.bfloat16)
