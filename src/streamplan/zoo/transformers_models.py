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


MLM_PROBABILITY = 0.15
IGNORE_INDEX = -100


class BertMaskedLM(nn.Module):
    """BERT-base encoder (no pooler) with the masked-LM head; the decoder reuses the word
    embeddings (tied, as in ``BertForMaskedLM``) so no parameter appears twice."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig(attn_implementation="eager")
        self.bert = BertModel(config, add_pooling_layer=False)
        self.transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder_bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        hidden = self.norm(nn.functional.gelu(self.transform(hidden)))
        return nn.functional.linear(hidden, self.bert.embeddings.word_embeddings.weight, self.decoder_bias)


class GPT2LM(nn.Module):
    """GPT-2 small with its LM head tied to the token embeddings (as ``GPT2LMHeadModel``)."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2Model

        self.transformer = GPT2Model(GPT2Config(use_cache=False, attn_implementation="eager"))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.transformer(input_ids=input_ids).last_hidden_state
        return nn.functional.linear(hidden, self.transformer.wte.weight)


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the masked positions (labels ``IGNORE_INDEX`` elsewhere)."""
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX
    )


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each position's logits against the next token."""
    shifted = logits[:, :-1, :].reshape(-1, logits.shape[-1])
    return nn.functional.cross_entropy(shifted, labels[:, 1:].reshape(-1))


def bert_base_train(batch: int = 1):
    """BERT-base masked-LM training problem: 15% of the positions carry a label."""
    from streamplan.frontends.training import TrainingProblem

    _offline()
    seeded(SEED)
    model = BertMaskedLM()
    ids = _token_ids(batch, model.bert.config.vocab_size)
    gen = torch.Generator().manual_seed(SEED + 1)
    masked = torch.rand(ids.shape, generator=gen) < MLM_PROBABILITY
    masked[:, 0] = True  # every sequence has a label, so the mean is never over nothing
    labels = torch.where(masked, ids, torch.full_like(ids, IGNORE_INDEX))
    return TrainingProblem(
        module=model,
        inputs=(ids, torch.ones_like(ids)),
        loss_fn=masked_lm_loss,
        targets=(labels,),
        loss_name="masked-LM cross-entropy at 15% of the positions",
    )


def gpt2_train(batch: int = 1):
    """GPT-2 small next-token training problem (the inputs shifted by one are the labels)."""
    from streamplan.frontends.training import TrainingProblem

    _offline()
    seeded(SEED)
    model = GPT2LM()
    ids = _token_ids(batch, model.transformer.config.vocab_size)
    return TrainingProblem(
        module=model,
        inputs=(ids,),
        loss_fn=next_token_loss,
        targets=(ids.clone(),),
        loss_name="next-token cross-entropy",
    )
