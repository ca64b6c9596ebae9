"""Llama-style training steps as ``file.py:function`` model specs, built without weights.

Each function returns ``(module, example_inputs)`` for ``streamplan ... --train``; the module
takes ``(input_ids, labels)`` and returns the loss itself:

- ``llama3_8b``: Llama-3-8B at its published sizes (32 layers, hidden 4096, 32 heads with 8
  key/value heads, MLP 14,336, vocabulary 128,256, RMSNorm eps 1e-5, rope theta 500,000;
  8,030,261,248 parameters) on the **meta device**: nothing is allocated, the capture
  traces shapes only. Sequence ``LLAMA_SEQ`` (default 4096), batch ``LLAMA_BATCH`` (1).
- ``llama_small``: the same architecture with 2 layers, hidden 256 and a 1,024-token
  vocabulary (random CPU weights): what the tests and quick runs use.

The loss is next-token cross-entropy on labels (the logits of every position against the
next token). The attention is ``LLAMA_ATTN`` (``eager``: the softmax materialised per head,
the default; ``sdpa``: PyTorch's fused attention). Environment variables, not arguments,
because a spec function takes none.

    streamplan remat bench/specs_llama.py:llama3_8b --train --optimizer adam --budget 0.5x
"""

from __future__ import annotations

import os

import torch
from torch import nn
from torch.nn import functional as F


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class CausalLM(nn.Module):
    """A transformers ``LlamaModel``, its LM head and the next-token loss."""

    def __init__(self, config) -> None:
        super().__init__()
        from transformers import LlamaModel

        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        hidden = self.model(input_ids=input_ids, use_cache=False).last_hidden_state
        return next_token_loss(self.lm_head(hidden), labels)


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each position's logits against the next token.

    Written as log-softmax and a gather: ``F.cross_entropy`` (``nll_loss``) on meta tensors
    loses the gradient of the parameters under AOTAutograd's tracer (torch 2.13)."""
    logp = F.log_softmax(logits[:, :-1], dim=-1)
    return -logp.gather(-1, labels[:, 1:].unsqueeze(-1)).mean()


def _step(config, *, seq: int, batch: int, device: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    with torch.device(device):
        model = CausalLM(config)
    ids = torch.randint(0, config.vocab_size, (batch, seq), dtype=torch.int64, device=device)
    model.train()
    return model, (ids, ids.clone())


def llama3_8b():
    """Llama-3-8B on the meta device (sizes from the published config)."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=128_256,
        hidden_size=4096,
        intermediate_size=14_336,
        num_hidden_layers=_env_int("LLAMA_LAYERS", 32),
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        rope_theta=500_000.0,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        attn_implementation=os.environ.get("LLAMA_ATTN", "eager"),
    )
    return _step(config, seq=_env_int("LLAMA_SEQ", 4096), batch=_env_int("LLAMA_BATCH", 1), device="meta")


def llama_small():
    """A Llama-style step small enough for tests: 2 layers, hidden 256, vocabulary 1,024."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=1024,
        hidden_size=256,
        intermediate_size=704,
        num_hidden_layers=_env_int("LLAMA_LAYERS", 2),
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        attn_implementation=os.environ.get("LLAMA_ATTN", "eager"),
    )
    return _step(config, seq=_env_int("LLAMA_SEQ", 128), batch=_env_int("LLAMA_BATCH", 1), device="cpu")
