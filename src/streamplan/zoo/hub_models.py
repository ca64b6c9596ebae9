"""Build the models of ``hub`` specs: the module, its example inputs, and the loss it trains with.

Models are built on ``device``: ``meta`` for capture (full size, no memory: every
parameter has a shape and a dtype but no storage, ``frontends.fullsize``), ``cpu`` for
running them for real (random weights from the model's own initialisation, seeded). A
timm or torchvision model whose constructor reads tensor values (``.item()`` on a drop-path
schedule, say) cannot be built on the meta device; it is built on the CPU instead.

The loss is the one each kind of model is trained with (``TASKS``), on labels drawn from
a fixed seed so that every build gives the same step:

- ``causal-lm``: next-token cross-entropy, computed as ``transformers`` computes it when the
  model is given labels (``model.loss_function``: the logits upcast to fp32, labels shifted);
- ``bert-pretraining``: masked-LM cross-entropy at 15% of the positions plus next-sentence
  prediction, as ``BertForPreTraining`` with labels;
- ``image-classification`` (ViT, timm, torchvision classifiers): cross-entropy against a
  label per image (Inception V3 and GoogLeNet add their auxiliary heads' losses, weighted
  0.4 and 0.3 as in their papers' training recipes);
- ``speech-seq2seq`` (Whisper): cross-entropy of the decoder's logits against the labels;
- ``sequence-classification``: cross-entropy against a label per sequence;
- ``segmentation`` (torchvision): per-pixel cross-entropy of the ``out`` map.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from streamplan.errors import ModelSpecError
from streamplan.frontends.training import TrainingProblem
from streamplan.zoo.hub import HubSpec, parse_hub_spec, require_package

SEED = 0
TARGET_SEED = 1234
MLM_PROBABILITY = 0.15
IGNORE_INDEX = -100
VIDEO_FRAMES = 16
TASKS = (
    "causal-lm",
    "bert-pretraining",
    "image-classification",
    "speech-seq2seq",
    "sequence-classification",
    "segmentation",
)


def hub_model(spec: str, *, batch: int | None = None, device: str = "meta", attention: str | None = None):
    """``(module, example_inputs, name)`` of a hub spec, for inference."""
    problem, name = hub_training_problem(spec, batch=batch, device=device, attention=attention)
    return problem.module.eval(), problem.inputs, name


def hub_training_problem(
    spec: str, *, batch: int | None = None, device: str = "meta", attention: str | None = None
) -> tuple[TrainingProblem, str]:
    """``(TrainingProblem, graph name)`` of a hub spec: the module on ``device``, its inputs at
    ``batch`` (default 1) and the loss its kind of model trains with."""
    hub = parse_hub_spec(spec)
    require_package(hub)
    batch = batch or 1
    builder = {"hf": _hf, "timm": _timm, "torchvision": _torchvision}[hub.ecosystem]
    torch.manual_seed(SEED)
    return builder(hub, batch, device, attention), hub.graph_name


# -- Hugging Face ------------------------------------------------------------------


def _hf(hub: HubSpec, batch: int, device: str, attention: str | None) -> TrainingProblem:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import transformers

    entry = hub.curated
    if entry is not None:
        config = getattr(transformers, entry.config)(**entry.config_kwargs)
        model_cls, task, seq = getattr(transformers, entry.model), entry.task, entry.default_seq
    else:
        config, model_cls, task = _local_config(hub)
        seq = _default_seq(config, task)
    seq = hub.seq or seq
    config._attn_implementation = _attn_implementation(model_cls, attention, hub)
    if hasattr(config, "use_cache"):
        config.use_cache = False  # a training step keeps no KV cache
    if (getattr(config, "num_local_experts", 0) or getattr(config, "num_experts", 0)) and not getattr(
        config, "_experts_implementation", None
    ):
        config._experts_implementation = "grouped_mm"  # see hub.HF_MODELS' mixtral entry
    with _quiet_transformers(), torch.device(device):
        model = model_cls(config)
    return _HF_TASKS[task](model, config, batch, seq)


def _local_config(hub: HubSpec) -> tuple[Any, type, str]:
    import transformers

    path = hub.config_path
    assert path is not None
    try:
        data = json.loads(path.read_text())
        model_type = data["model_type"]
        config = transformers.CONFIG_MAPPING[model_type].from_dict(data)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ModelSpecError(
            f"{path} is not a transformers config.json ({type(e).__name__}: {e})",
            where=f"hf:{hub.name}",
            hint="give the config.json of a Hugging Face model (it names a model_type)",
        ) from None
    archs = [a for a in (data.get("architectures") or []) if hasattr(transformers, a)]
    if archs:
        cls = getattr(transformers, archs[0])
    else:
        try:
            cls = transformers.AutoModelForCausalLM._model_mapping[type(config)]
        except KeyError:
            raise ModelSpecError(
                f"{path} names no architecture streamplan can train ({model_type})",
                where=f"hf:{hub.name}",
                hint='add "architectures": ["...ForCausalLM"] (or ForMaskedLM, ForImageClassification, ...)',
            ) from None
    return config, cls, _task_of(cls.__name__, model_type, hub)


def _task_of(cls_name: str, model_type: str, hub: HubSpec) -> str:
    if cls_name.endswith("ForCausalLM"):
        return "causal-lm"
    if cls_name == "BertForPreTraining":
        return "bert-pretraining"
    if cls_name.endswith("ForImageClassification"):
        return "image-classification"
    if cls_name.endswith("ForSequenceClassification"):
        return "sequence-classification"
    if model_type == "whisper" and cls_name.endswith("ForConditionalGeneration"):
        return "speech-seq2seq"
    raise ModelSpecError(
        f"{cls_name}: streamplan builds causal LMs, BERT pre-training, image and sequence classifiers "
        "and Whisper from a config",
        where=f"hf:{hub.name}",
        hint="set architectures in the config to one of those, or give a file.py:function spec",
    )


def _default_seq(config: Any, task: str) -> int:
    if task == "image-classification":
        return int(getattr(config, "image_size", 224))
    if task == "speech-seq2seq":
        return int(getattr(config, "max_target_positions", 448))
    return min(4096, int(getattr(config, "max_position_embeddings", 4096) or 4096))


def _attn_implementation(model_cls: type, attention: str | None, hub: HubSpec) -> str:
    """``sdpa`` for flash/math (the kernel is chosen while tracing), ``eager`` for eager; by
    default SDPA where the model has it (as transformers does), its eager code otherwise."""
    has_sdpa = bool(getattr(model_cls, "_supports_sdpa", False))
    if attention == "eager":
        return "eager"
    if attention is None:
        return "sdpa" if has_sdpa else "eager"
    if not has_sdpa:
        raise ModelSpecError(
            f"{model_cls.__name__} has no scaled-dot-product attention in this transformers version: "
            f"--attention {attention} cannot apply",
            where=f"hf:{hub.name}",
            hint="use --attention eager (its own attention code), or leave --attention out",
        )
    return "sdpa"


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _ints(shape: tuple[int, ...], high: int, seed: int = TARGET_SEED) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def _floats(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(SEED))


def _causal_lm(model: nn.Module, config: Any, batch: int, seq: int) -> TrainingProblem:
    ids = _ints((batch, seq), config.vocab_size, SEED)
    vocab = config.vocab_size

    def loss(output: Any, labels: torch.Tensor) -> torch.Tensor:
        return model.loss_function(logits=output.logits, labels=labels, vocab_size=vocab)

    # the padding mask a tokenizer gives with the ids (all ones: no padding), as a training loop
    # feeds it; built from an input, the causal mask is traced like any activation
    return TrainingProblem(
        model,
        ((), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}),
        loss,
        (ids.clone(),),
        loss_name="next-token cross-entropy (transformers' causal-LM loss: fp32 logits)",
    )


def _bert_pretraining(model: nn.Module, config: Any, batch: int, seq: int) -> TrainingProblem:
    ids = _ints((batch, seq), config.vocab_size, SEED)
    masked = torch.rand(ids.shape, generator=torch.Generator().manual_seed(SEED + 1)) < MLM_PROBABILITY
    masked[:, 0] = True  # every sequence has a label, so the mean is never over nothing
    labels = torch.where(masked, ids, torch.full_like(ids, IGNORE_INDEX))
    next_sentence = _ints((batch,), 2)
    vocab = config.vocab_size

    def loss(output: Any, mlm: torch.Tensor, nsp: torch.Tensor) -> torch.Tensor:
        mlm_loss = F.cross_entropy(output.prediction_logits.reshape(-1, vocab), mlm.reshape(-1))
        return mlm_loss + F.cross_entropy(output.seq_relationship_logits.reshape(-1, 2), nsp.reshape(-1))

    inputs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
    }
    return TrainingProblem(
        model,
        ((), inputs),
        loss,
        (labels, next_sentence),
        loss_name="masked-LM cross-entropy at 15% of the positions + next-sentence prediction",
    )


def _image_classification(model: nn.Module, config: Any, batch: int, size: int) -> TrainingProblem:
    channels = int(getattr(config, "num_channels", 3))
    pixels = _floats((batch, channels, size, size))
    return TrainingProblem(
        model,
        ((), {"pixel_values": pixels}),
        lambda output, labels: F.cross_entropy(output.logits, labels),
        (_ints((batch,), config.num_labels),),
        loss_name="cross-entropy against one label per image",
    )


def _speech_seq2seq(model: nn.Module, config: Any, batch: int, seq: int) -> TrainingProblem:
    frames = 2 * int(config.max_source_positions)  # the encoder's convolutions halve the mel frames
    features = _floats((batch, config.num_mel_bins, frames))
    decoder_ids = _ints((batch, seq), config.vocab_size, SEED)
    vocab = config.vocab_size

    def loss(output: Any, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output.logits.reshape(-1, vocab), labels.reshape(-1))

    return TrainingProblem(
        model,
        ((), {"input_features": features, "decoder_input_ids": decoder_ids}),
        loss,
        (_ints((batch, seq), vocab),),
        loss_name="cross-entropy of the decoder's logits against the transcript's tokens",
    )


def _sequence_classification(model: nn.Module, config: Any, batch: int, seq: int) -> TrainingProblem:
    ids = _ints((batch, seq), config.vocab_size, SEED)
    return TrainingProblem(
        model,
        ((), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}),
        lambda output, labels: F.cross_entropy(output.logits, labels),
        (_ints((batch,), config.num_labels),),
        loss_name="cross-entropy against one label per sequence",
    )


_HF_TASKS: dict[str, Callable[..., TrainingProblem]] = {
    "causal-lm": _causal_lm,
    "bert-pretraining": _bert_pretraining,
    "image-classification": _image_classification,
    "speech-seq2seq": _speech_seq2seq,
    "sequence-classification": _sequence_classification,
}


# -- timm and torchvision -------------------------------------------------------------


def _build(factory: Callable[[], nn.Module], device: str) -> nn.Module:
    """``factory()`` on ``device``; on the CPU when the constructor needs tensor values."""
    if device == "meta":
        try:
            with torch.device("meta"):
                return factory()
        except (NotImplementedError, RuntimeError):
            pass  # e.g. [x.item() for x in torch.linspace(...)]: meta tensors have no values
    with torch.device("cpu"):
        return factory()


def _timm(hub: HubSpec, batch: int, device: str, attention: str | None) -> TrainingProblem:
    import timm

    arch = hub.name.split(".")[0]  # a pretrained tag (resnet50.a1_in1k) names the same architecture
    if not timm.is_model(arch):
        import difflib

        close = difflib.get_close_matches(arch, timm.list_models(), n=3)
        raise ModelSpecError(
            f"timm has no model {hub.name!r}",
            where=f"timm:{hub.name}",
            hint=f"did you mean {', '.join(f'timm:{c}' for c in close)}?"
            if close
            else "see timm.list_models()",
        )
    model = _build(lambda: timm.create_model(hub.name, pretrained=False), device)
    size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    classes = int(getattr(model, "num_classes", 0) or 1000)
    return _classifier(model, _floats((batch, *size)), classes, batch)


def _torchvision(hub: HubSpec, batch: int, device: str, attention: str | None) -> TrainingProblem:
    import torchvision

    models = torchvision.models
    kinds = {
        "classification": set(models.list_models(module=models)),
        "segmentation": set(models.list_models(module=models.segmentation)),
        "video": set(models.list_models(module=models.video)),
    }
    kind = next((k for k, names in kinds.items() if hub.name in names), None)
    if kind is None:
        everything = set(models.list_models())
        if hub.name in everything:
            raise ModelSpecError(
                f"torchvision:{hub.name} is a detection, optical-flow or quantized model: its inputs are "
                "lists of images and targets, or its forward branches on data",
                where=f"torchvision:{hub.name}",
                hint="classification, segmentation and video models are supported",
            )
        import difflib

        close = difflib.get_close_matches(hub.name, sorted(everything), n=3)
        raise ModelSpecError(
            f"torchvision has no model {hub.name!r}",
            where=f"torchvision:{hub.name}",
            hint=f"did you mean {', '.join(f'torchvision:{c}' for c in close)}?"
            if close
            else "see list_models()",
        )
    # random weights everywhere: a segmentation model's backbone would otherwise be downloaded
    extra = {"weights_backbone": None} if kind == "segmentation" else {}
    model = _build(lambda: models.get_model(hub.name, weights=None, **extra), device)
    size = _torchvision_size(models, hub.name, kind)
    if kind == "segmentation":
        pixels = _floats((batch, 3, size, size))
        classes = int(model.classifier[-1].out_channels)
        return TrainingProblem(
            model,
            (pixels,),
            lambda output, labels: F.cross_entropy(output["out"], labels),
            (_ints((batch, size, size), classes),),
            loss_name="per-pixel cross-entropy of the segmentation map",
        )
    if kind == "video":
        return _classifier(model, _floats((batch, 3, VIDEO_FRAMES, size, size)), 400, batch, per="clip")
    return _classifier(model, _floats((batch, 3, size, size)), 1000, batch)


def _torchvision_size(models: Any, name: str, kind: str) -> int:
    """The crop size the model's reference weights were trained at (224 when it has none)."""
    try:
        transforms = models.get_model_weights(name).DEFAULT.transforms()
    except (ValueError, AttributeError, TypeError):
        return {"segmentation": 520, "video": 112}.get(kind, 224)
    crop = getattr(transforms, "crop_size", None) or getattr(transforms, "resize_size", None) or [224]
    return int(crop[0])


# auxiliary classifiers in training mode, and the weights their papers' recipes give their losses
_AUX_WEIGHTS = {"aux_logits": 0.4, "aux_logits1": 0.3, "aux_logits2": 0.3}


def _classifier(
    model: nn.Module, pixels: torch.Tensor, classes: int, batch: int, per: str = "image"
) -> TrainingProblem:
    def loss(output: Any, labels: torch.Tensor) -> torch.Tensor:
        if isinstance(output, torch.Tensor):
            return F.cross_entropy(output, labels)
        total = F.cross_entropy(output.logits, labels)
        for name, weight in _AUX_WEIGHTS.items():
            aux = getattr(output, name, None)
            if isinstance(aux, torch.Tensor):
                total = total + weight * F.cross_entropy(aux, labels)
        return total

    return TrainingProblem(
        model,
        (pixels,),
        loss,
        (_ints((batch,), classes),),
        loss_name=f"cross-entropy against one label per {per}",
    )
