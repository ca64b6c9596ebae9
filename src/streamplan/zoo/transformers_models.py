"""BERT-base and GPT-2 small from Hugging Face ``transformers`` configs, random weights, offline.

- ``bert_base``: ``BertModel(BertConfig())`` — the bert-base-uncased sizes (Devlin et al., 2018):
  12 layers, hidden 768, 12 heads, vocabulary 30,522, with the pooler: **109,482,240** parameters.
- ``gpt2``: ``GPT2Model(GPT2Config())`` — GPT-2 small (Radford et al., 2019): 12 layers, hidden
  768, vocabulary 50,257, context 1024, without the LM head: **124,439,808** parameters.

Both take ``input_ids`` of shape (batch, 128), int64; BERT also takes an all-ones attention mask.
Nothing is downloaded: the models are built from their config classes with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from streamplan.zoo._layers import seeded

BERT_PARAM_COUNT = 109_482_240
GPT2_PARAM_COUNT = 124_439_808
SEQ_LEN = 128
SEED = 0


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _token_ids(batch: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, SEQ_LEN), dtype=torch.int64)


def bert_base(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    """BERT-base encoder (eager attention) in eval mode; inputs ``(input_ids, attention_mask)``."""
    _offline()
    from transformers import BertConfig, BertModel

    seeded(SEED)
    config = BertConfig(attn_implementation="eager")
    model = BertModel(config).eval()
    ids = _token_ids(batch, config.vocab_size)
    return model, (ids, torch.ones_like(ids))


def gpt2(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """GPT-2 small without KV cache (eager attention) in eval mode; input ``input_ids``."""
    _offline()
    from transformers import GPT2Config, GPT2Model

    seeded(SEED)
    config = GPT2Config(use_cache=False, attn_implementation="eager")
    model = GPT2Model(config).eval()
    return model, (_token_ids(batch, config.vocab_size),)
