"""Hub specs: hf:NAME (curated configs whose parameter counts match the published figures),
hf:PATH, timm:NAME and torchvision:NAME, each needing only its own package and saying so."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from streamplan.errors import ModelSpecError
from streamplan.zoo import hub
from streamplan.zoo.hub import HF_MODELS, parse_hub_spec, require_package

needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)


def test_specs_parse_with_sequence_lengths_and_name_the_graph_after_the_model(tmp_path):
    s = parse_hub_spec("hf:llama-3-8b@8192")
    assert (s.ecosystem, s.name, s.seq, s.graph_name) == ("hf", "llama-3-8b", 8192, "llama-3-8b@8192")
    assert parse_hub_spec("timm:resnet50").graph_name == "resnet50"
    assert parse_hub_spec("torchvision:vit_b_16").package == "torchvision"
    d = tmp_path / "My-Model"
    d.mkdir()
    (d / "config.json").write_text("{}")
    assert parse_hub_spec(f"hf:{d}").graph_name == "My-Model"
    assert parse_hub_spec(f"hf:{d}/config.json@128").graph_name == "My-Model@128"
    assert hub.is_hub_spec("hf:x") and not hub.is_hub_spec("resnet50") and not hub.is_hub_spec("m.py:f")


@pytest.mark.parametrize(
    "spec, words",
    [
        ("hf:llama-3-8", ["neither a curated model", "hf:llama-3-8b"]),
        ("hf:llama-3-8b@0", ["positive integer"]),
        ("hf:llama-3-8b@x", ["positive integer"]),
        ("timm:resnet50@64", ["does not apply"]),
        ("hf:", ["names no model"]),
    ],
)
def test_bad_specs_say_what_to_do(spec, words):
    with pytest.raises(ModelSpecError) as e:
        parse_hub_spec(spec)
    text = str(e.value)
    assert all(w in text for w in words), text


def test_a_missing_package_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "timm" else real(n, *a))
    with pytest.raises(ModelSpecError) as e:
        require_package(parse_hub_spec("timm:resnet50"))
    assert "pip install timm" in str(e.value) and "streamplan[timm]" in str(e.value)


@needs_transformers
@pytest.mark.parametrize("name", list(HF_MODELS))
def test_curated_models_have_their_published_parameter_counts(name):
    import transformers

    entry = HF_MODELS[name]
    config = getattr(transformers, entry.config)(**entry.config_kwargs)
    with torch.device("meta"):
        model = getattr(transformers, entry.model)(config)
    count = sum({id(p): p.numel() for p in model.parameters()}.values())  # tied weights once
    assert abs(count - entry.published_params) <= entry.tolerance * entry.published_params, (
        count,
        entry.source,
    )
    assert entry.source


@needs_transformers
def test_local_config_builds_the_architecture_it_names(tmp_path):
    from streamplan.zoo.hub_models import hub_training_problem

    config = {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 100, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 64,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    problem, name = hub_training_problem(f"hf:{path}@16", batch=2)
    assert name == f"{tmp_path.name}@16" and type(problem.module).__name__ == "MistralForCausalLM"
    assert all(p.is_meta for p in problem.module.parameters())
    assert problem.inputs[1]["input_ids"].shape == (2, 16) and "cross-entropy" in problem.loss_name
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ModelSpecError, match="not a transformers config"):
        hub_training_problem(f"hf:{tmp_path / 'bad.json'}")


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
def test_timm_models_build_on_the_meta_device_with_their_input_size():
    from streamplan.zoo.hub_models import hub_training_problem

    problem, name = hub_training_problem("timm:resnet18", batch=2)
    assert name == "resnet18" and problem.inputs[0].shape == (2, 3, 224, 224)
    assert problem.targets[0].shape == (2,)
    with pytest.raises(ModelSpecError, match="did you mean"):
        hub_training_problem("timm:resnet5O")


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed")
def test_torchvision_kinds_and_refusals():
    from streamplan.zoo.hub_models import hub_training_problem

    problem, _ = hub_training_problem("torchvision:inception_v3")
    assert problem.inputs[0].shape == (1, 3, 299, 299)
    seg, _ = hub_training_problem("torchvision:fcn_resnet50")
    assert seg.targets[0].dim() == 3
    with pytest.raises(ModelSpecError, match="detection"):
        hub_training_problem("torchvision:fasterrcnn_resnet50_fpn")
