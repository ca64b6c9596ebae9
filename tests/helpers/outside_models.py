"""Small models written the way timm and transformers write theirs, each reproducing a defect
that real models from those libraries hit: in-place ops on intermediates, a model writing its
own input or a buffer, tied weights whose first module is never called or that are tied under
three names, autocast regions, a bicubic upsample.

Every function takes no arguments and returns ``(module, example_inputs[, loss_fn])``, so each
is also a ``file.py:function`` model spec (``SPECS`` is this file's path).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

SPECS = str(Path(__file__).resolve())


# -- in-place writes (a run must compute each value once, as eager does) ------------------------
class PositionBuckets(nn.Module):
    """T5's relative position buckets: an ``add_`` on an index tensor, then a table lookup (a
    second ``add_`` pushes the indices out of the table)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[1])
        buckets = (pos > 2).long() * 4
        buckets.add_(torch.minimum(pos, torch.full_like(pos, 3)))
        return x + self.table(buckets)


def position_buckets():
    torch.manual_seed(0)
    return PositionBuckets().eval(), (torch.randn(2, 6, 4),)


class WritesItsInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return self.lin(x)


def writes_its_input():
    torch.manual_seed(0)
    return WritesItsInput().eval(), (torch.randn(2, 4),)


class CountsCalls(nn.Module):
    """A buffer the forward writes in place (as a call counter or running statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.lin(x) + self.calls


def counts_calls():
    torch.manual_seed(0)
    return CountsCalls().eval(), (torch.randn(2, 4),)


def tiny_t5_encoder():
    """transformers' T5 encoder from a config (two layers, random weights)."""
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    config = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
    return T5EncoderModel(config).eval(), (torch.randint(0, 64, (1, 8)),)


# -- tied weights in a training step ------------------------------------------------------------
class SharedFirst(nn.Module):
    """T5/BART's shared embedding: registered first as ``shared``, only ever called through the
    encoder's and decoder's names for it."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Embedding(10, 4)
        self.encoder = nn.ModuleDict({"embed": self.shared, "mix": nn.Linear(4, 4)})
        self.decoder = nn.ModuleDict({"embed": self.shared, "mix": nn.Linear(4, 4)})

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        memory = torch.tanh(self.encoder["mix"](self.encoder["embed"](src))).mean(1, keepdim=True)
        return self.decoder["mix"](self.decoder["embed"](tgt) + memory)


def shared_first():
    torch.manual_seed(0)
    src, tgt = torch.randint(0, 10, (2, 5)), torch.randint(0, 10, (2, 3))
    return SharedFirst(), (src, tgt), lambda out: out.pow(2).mean()


class TiedThrice(nn.Module):
    """One weight under three names, all three used."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.mid = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.aux_head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight
        self.aux_head.weight = self.emb.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.mid(self.emb(x)))
        return self.head(h) + 0.5 * self.aux_head(h)


def tied_thrice():
    torch.manual_seed(0)
    x, y = torch.randint(0, 10, (2, 3)), torch.randint(0, 10, (2, 3))
    return TiedThrice(), (x,), lambda out: F.cross_entropy(out.reshape(-1, 10), y.reshape(-1))


def _tiny_seq2seq(config_cls, model_cls, **config):
    torch.manual_seed(0)
    model = model_cls(config_cls(**config))
    ids, decoder_ids = torch.randint(3, 64, (1, 8)), torch.randint(3, 64, (1, 6))
    return model, (ids, torch.ones_like(ids), decoder_ids), lambda out: out.logits.pow(2).mean()


def tiny_t5_train():
    """transformers' T5 for generation (its ``shared`` embedding is tied to the encoder's, the
    decoder's and the head's), one layer each side, no dropout."""
    from transformers import T5Config, T5ForConditionalGeneration

    return _tiny_seq2seq(
        T5Config,
        T5ForConditionalGeneration,
        vocab_size=64,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=4,
        dropout_rate=0.0,
    )


def tiny_bart_train():
    from transformers import BartConfig, BartForConditionalGeneration

    return _tiny_seq2seq(
        BartConfig,
        BartForConditionalGeneration,
        vocab_size=64,
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=32,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )


# -- autocast regions ---------------------------------------------------------------------------
class AutocastOff(nn.Module):
    """timm's efficientvit attention: a region computed with autocast disabled (in float32)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.qkv(x)
        with torch.autocast(device_type="cpu", enabled=False):
            k = torch.relu(h.float()) @ h.float().transpose(-1, -2)
        return self.proj(k @ h)


def autocast_off():
    torch.manual_seed(0)
    return AutocastOff().eval(), (torch.randn(2, 8, 8),)


class AutocastOn(nn.Module):
    """A bfloat16 autocast region holding a float32 one."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            k = self.b(h)
            with torch.autocast(device_type="cpu", enabled=False):
                j = k.float() @ h.t()
        return k.float() + j.sum()


def autocast_on():
    torch.manual_seed(0)
    return AutocastOn().eval(), (torch.randn(8, 8),)


# -- an op whose kernels depend on the autograd mode --------------------------------------------
class Bicubic(nn.Module):
    """crossvit's resize of patch grids."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=(40, 40), mode="bicubic", align_corners=False)


def bicubic():
    return Bicubic().eval(), (torch.randn(1, 3, 24, 24),)
