"""Real timm and transformers architectures as ``file.py:function`` model specs (random
weights, configurations built offline), for trying streamplan on models nobody here wrote:

    streamplan run bench/outside_models.py:t5_small --policy sequential --repeat 1 --json
    streamplan run bench/outside_models.py:bart_base_train --train --optimizer adam --json

Needs ``timm`` (the vision models), ``transformers`` and ``diffusers``; BENCHMARKS.md has what
each gave.
"""

from __future__ import annotations

import torch


def _timm(name: str, size: int):
    import timm

    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False).eval(), (torch.randn(1, 3, size, size),)


def efficientvit_b0():
    """Attention computed in an autocast-disabled region."""
    return _timm("efficientvit_b0", 224)


def crossvit_tiny_240():
    """Bicubic resizes of patch grids."""
    return _timm("crossvit_tiny_240", 240)


def _seq2seq_inputs(vocab: int, low: int = 0):
    ids = torch.randint(low, vocab, (1, 16))
    return ids, torch.ones_like(ids), torch.randint(low, vocab, (1, 8))


def _logits_loss(out):
    return out.logits.float().pow(2).mean()


def t5_small():
    """t5-small's shape (6+6 layers, d_model 512): in-place position buckets feeding a lookup."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(use_cache=False)).eval(), _seq2seq_inputs(32000)


def t5_small_train():
    """One training step: the shared embedding is registered first, used only under other names."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(dropout_rate=0.0, use_cache=False))
    return model, _seq2seq_inputs(32000), _logits_loss


def bart_base_train():
    """bart-base's shape, one training step (its shared embedding tied like T5's)."""
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    config = BartConfig(
        d_model=768,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=12,
        decoder_attention_heads=12,
        encoder_ffn_dim=3072,
        decoder_ffn_dim=3072,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        use_cache=False,
    )
    return BartForConditionalGeneration(config), _seq2seq_inputs(50000, low=3), _logits_loss


def vit_tiny():
    """A vision transformer: patch embedding, 12 blocks of attention and MLP."""
    return _timm("vit_tiny_patch16_224", 224)


def convnext_atto():
    """ConvNeXt: 7 x 7 depthwise convolutions, channels-last layer norms, GELU MLPs."""
    return _timm("convnext_atto", 224)


def bert_base():
    """bert-base's shape (12 layers, hidden 768), 64 tokens."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    ids = torch.randint(0, 30522, (1, 64))
    return BertModel(BertConfig()).eval(), (ids, torch.ones_like(ids))


def gpt2_small():
    """gpt2's shape (12 layers, hidden 768), 64 tokens, no key-value cache."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(use_cache=False)).eval(), (torch.randint(0, 50257, (1, 64)),)


def unet_small():
    """A diffusers UNet2DModel at 64 x 64: residual blocks, group norms, attention in the middle."""
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    model = UNet2DModel(sample_size=64, block_out_channels=(32, 64, 128, 128), layers_per_block=1).eval()
    return model, (torch.randn(1, 3, 64, 64), torch.tensor([10]))
