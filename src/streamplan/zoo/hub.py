"""Model specs for the ecosystems users have: ``hf:NAME``, ``hf:PATH``, ``timm:NAME``, ``torchvision:NAME``.

- ``hf:NAME`` — a curated table of well-known models (``HF_MODELS``) built offline from
  ``transformers`` config classes, at full size on the meta device (no weights, nothing
  downloaded); each entry's parameter count is checked against the published figure.
- ``hf:PATH`` — a local ``config.json`` (or a directory holding one): the model its
  ``architectures`` names, built the same way.
- ``timm:NAME`` — any ``timm.list_models()`` name, random weights.
- ``torchvision:NAME`` — any classification, segmentation or video model of
  ``torchvision.models.list_models()``, random weights.

A sequence length other than the default is written after ``@``: ``hf:llama-3-8b@8192``.
Each ecosystem needs only its own optional package (``pip install 'streamplan[hf]'``,
``[timm]``, ``[torchvision]``) and says so when it is missing. The graph is named after
the model (``llama-3-8b``, ``resnet50``), never after the ecosystem or a file.

This module needs no torch: it parses specs and holds the table; ``hub_models`` builds.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamplan.errors import ModelSpecError

PREFIXES: dict[str, str] = {"hf": "transformers", "timm": "timm", "torchvision": "torchvision"}
EXTRAS: dict[str, str] = {"hf": "hf", "timm": "timm", "torchvision": "torchvision"}


@dataclass(frozen=True)
class HfModel:
    """One curated Hugging Face model: how to build it, what it trains on, what it should weigh.

    ``config`` and ``model`` are ``transformers`` class names; ``config_kwargs`` the fields
    of the public ``config.json`` that decide the shapes. ``task`` decides the inputs and
    the loss (``hub_models.TASKS``). ``published_params`` is the count the source states,
    to ``tolerance`` (a relative error: 0 for an exact published count, else half the
    last stated digit's worth).
    """

    name: str
    summary: str
    config: str
    model: str
    config_kwargs: dict[str, Any] = field(default_factory=dict)
    task: str = "causal-lm"
    default_seq: int = 4096
    published_params: int = 0
    tolerance: float = 0.0
    source: str = ""


_LLAMA3 = dict(
    vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=False
)

# Published parameter counts: the model cards' safetensors totals (exact) where given, else the
# paper's rounded figure. The counts of the built modules are checked against these in the tests.
HF_MODELS: dict[str, HfModel] = {
    m.name: m
    for m in [
        HfModel(
            "llama-3-8b",
            "Meta Llama 3 8B: 32 layers, hidden 4096, GQA 32/8 heads, SwiGLU 14336, vocab 128256",
            "LlamaConfig",
            "LlamaForCausalLM",
            dict(
                _LLAMA3,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
            ),
            published_params=8_030_261_248,
            source="meta-llama/Meta-Llama-3-8B model card (safetensors: 8,030,261,248)",
        ),
        HfModel(
            "llama-3-70b",
            "Meta Llama 3 70B: 80 layers, hidden 8192, GQA 64/8 heads, SwiGLU 28672, vocab 128256",
            "LlamaConfig",
            "LlamaForCausalLM",
            dict(
                _LLAMA3,
                hidden_size=8192,
                intermediate_size=28672,
                num_hidden_layers=80,
                num_attention_heads=64,
                num_key_value_heads=8,
            ),
            published_params=70_553_706_496,
            source="meta-llama/Meta-Llama-3-70B model card (safetensors: 70,553,706,496)",
        ),
        HfModel(
            "mistral-7b",
            "Mistral 7B v0.1: 32 layers, hidden 4096, GQA 32/8, SwiGLU 14336, sliding window 4096",
            "MistralConfig",
            "MistralForCausalLM",
            dict(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                max_position_embeddings=32768,
                sliding_window=4096,
                rope_theta=10000.0,
                tie_word_embeddings=False,
            ),
            published_params=7_241_732_096,
            source="mistralai/Mistral-7B-v0.1 model card (safetensors: 7,241,732,096)",
        ),
        HfModel(
            "qwen2-7b",
            "Qwen2 7B: 28 layers, hidden 3584, GQA 28/4 with q/k/v bias, SwiGLU 18944, vocab 152064",
            "Qwen2Config",
            "Qwen2ForCausalLM",
            dict(
                vocab_size=152064,
                hidden_size=3584,
                intermediate_size=18944,
                num_hidden_layers=28,
                num_attention_heads=28,
                num_key_value_heads=4,
                max_position_embeddings=131072,
                rope_theta=1000000.0,
                tie_word_embeddings=False,
            ),
            published_params=7_615_616_512,
            source="Qwen/Qwen2-7B model card (safetensors: 7,615,616,512)",
        ),
        HfModel(
            "gemma-2-9b",
            "Gemma 2 9B: 42 layers, hidden 3584, 16/8 heads of 256, GeGLU 14336, vocab 256000 (tied)",
            "Gemma2Config",
            "Gemma2ForCausalLM",
            dict(
                vocab_size=256000,
                hidden_size=3584,
                intermediate_size=14336,
                num_hidden_layers=42,
                num_attention_heads=16,
                num_key_value_heads=8,
                head_dim=256,
                max_position_embeddings=8192,
                query_pre_attn_scalar=256,
                sliding_window=4096,
                final_logit_softcapping=30.0,
                attn_logit_softcapping=50.0,
                tie_word_embeddings=True,
            ),
            published_params=9_241_705_984,
            source="google/gemma-2-9b model card (safetensors: 9,241,705,984)",
        ),
        HfModel(
            "mixtral-8x7b",
            "Mixtral 8x7B (MoE): 32 layers, hidden 4096, 8 experts of SwiGLU 14336, top-2 routing",
            "MixtralConfig",
            "MixtralForCausalLM",
            dict(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                num_local_experts=8,
                num_experts_per_tok=2,
                max_position_embeddings=32768,
                rope_theta=1000000.0,
                tie_word_embeddings=False,
                # the experts as one grouped GEMM (what recent transformers runs on GPUs); the
                # per-expert Python loop branches on routing results and cannot be captured
                experts_implementation="grouped_mm",
            ),
            published_params=46_702_792_704,
            source="mistralai/Mixtral-8x7B-v0.1 model card (safetensors: 46,702,792,704; 46.7B)",
        ),
        HfModel(
            "bert-large",
            "BERT-large (uncased) pre-training: 24 layers, hidden 1024, 16 heads, MLM + NSP heads",
            "BertConfig",
            "BertForPreTraining",
            dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
            task="bert-pretraining",
            default_seq=512,
            published_params=336_000_000,
            tolerance=0.5 / 336,
            source="google-bert/bert-large-uncased model card (336M)",
        ),
        HfModel(
            "vit-huge",
            "ViT-H/14 at 224x224: 32 layers, hidden 1280, 16 heads, MLP 5120, 1000-class head",
            "ViTConfig",
            "ViTForImageClassification",
            dict(
                hidden_size=1280,
                num_hidden_layers=32,
                num_attention_heads=16,
                intermediate_size=5120,
                patch_size=14,
                image_size=224,
                num_labels=1000,
            ),
            task="image-classification",
            default_seq=224,
            published_params=632_000_000,
            tolerance=0.5 / 632,
            source="Dosovitskiy et al. 2021, Table 1 (ViT-Huge: 632M)",
        ),
        HfModel(
            "whisper-large",
            "Whisper large-v3: 32+32 layers, d_model 1280, 20 heads, 128 mel bins, 30 s audio, 448 tokens",
            "WhisperConfig",
            "WhisperForConditionalGeneration",
            dict(
                d_model=1280,
                encoder_layers=32,
                decoder_layers=32,
                encoder_attention_heads=20,
                decoder_attention_heads=20,
                encoder_ffn_dim=5120,
                decoder_ffn_dim=5120,
                vocab_size=51866,
                num_mel_bins=128,
                max_source_positions=1500,
                max_target_positions=448,
            ),
            task="speech-seq2seq",
            default_seq=448,
            published_params=1_550_000_000,
            tolerance=0.005,  # the paper rounds to tens of millions; the model counts 1,543,490,560
            source="Radford et al. 2022, Table 1 (Whisper large: 1550M)",
        ),
    ]
}


@dataclass(frozen=True)
class HubSpec:
    """A parsed ``ecosystem:name[@seq]`` spec. ``name`` is the model name (or config path for
    ``hf:``); ``seq`` the sequence length asked for (None: the model's default)."""

    ecosystem: str
    name: str
    seq: int | None = None

    @property
    def package(self) -> str:
        """The optional package this ecosystem needs."""
        return PREFIXES[self.ecosystem]

    @property
    def curated(self) -> HfModel | None:
        return HF_MODELS.get(self.name) if self.ecosystem == "hf" else None

    @property
    def config_path(self) -> Path | None:
        """The local ``config.json`` of an ``hf:PATH`` spec (None for a curated name)."""
        if self.ecosystem != "hf" or self.name in HF_MODELS:
            return None
        p = Path(self.name)
        return p / "config.json" if p.is_dir() else p

    @property
    def graph_name(self) -> str:
        """What the graph is called: the model's name (a local config: its directory, or its stem)."""
        path = self.config_path
        if path is not None:
            stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
            base = stem or "model"
        else:
            base = self.name
        return f"{base}@{self.seq}" if self.seq is not None else base


def is_hub_spec(spec: str) -> bool:
    """True for ``hf:``, ``timm:`` and ``torchvision:`` specs."""
    prefix, sep, _ = spec.partition(":")
    return bool(sep) and prefix in PREFIXES


def parse_hub_spec(spec: str) -> HubSpec:
    """``ecosystem:name[@seq]`` as a ``HubSpec``; a malformed spec is a ``ModelSpecError``."""
    prefix, _, rest = spec.partition(":")
    if prefix not in PREFIXES:
        raise ModelSpecError(
            f"{spec!r} is not a hub spec", hint=f"use one of {', '.join(f'{p}:NAME' for p in PREFIXES)}"
        )
    name, at, seq_text = rest.rpartition("@") if "@" in rest else (rest, "", "")
    seq = None
    if at:
        if not seq_text.isdigit() or int(seq_text) < 1:
            raise ModelSpecError(
                f"the length after '@' must be a positive integer, got {seq_text!r}",
                where=spec,
                hint=f"for example {prefix}:{name or 'NAME'}@2048",
            )
        seq = int(seq_text)
    if not name:
        raise ModelSpecError(f"{spec!r} names no model", hint=_names_hint(prefix))
    hub = HubSpec(prefix, name, seq)
    if prefix == "hf" and hub.curated is None:
        path = hub.config_path
        if path is None or not path.is_file():
            import difflib

            close = difflib.get_close_matches(name, HF_MODELS, n=3)
            hint = f"did you mean {', '.join(f'hf:{c}' for c in close)}?" if close else _names_hint("hf")
            raise ModelSpecError(
                f"hf:{name} is neither a curated model nor a local config.json (or a directory holding one)",
                where=spec,
                hint=hint,
            )
    if seq is not None and prefix != "hf":
        raise ModelSpecError(
            f"{prefix} models take images of their own size: '@{seq}' does not apply",
            where=spec,
            hint=f"drop '@{seq}'",
        )
    return hub


def require_package(hub: HubSpec) -> None:
    """Refuse, saying how to install it, when the ecosystem's package is missing."""
    if importlib.util.find_spec(hub.package) is None:
        raise ModelSpecError(
            f"{hub.ecosystem}: models need the optional package {hub.package!r}, which is not installed",
            where=f"{hub.ecosystem}:{hub.name}",
            hint=f"pip install {hub.package}  (or: pip install 'streamplan[{EXTRAS[hub.ecosystem]}]')",
        )


def _names_hint(prefix: str) -> str:
    if prefix == "hf":
        return f"curated: {', '.join(f'hf:{n}' for n in HF_MODELS)}; or hf:path/to/config.json"
    if prefix == "timm":
        return "any name of timm.list_models(), e.g. timm:resnet50"
    return "any classification, segmentation or video model of torchvision.models.list_models()"
