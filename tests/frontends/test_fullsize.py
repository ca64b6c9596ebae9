"""Full-size capture on purpose: a model built on the meta device captures as the same graph as
the same model with real weights (inference and training), the attention kernel is the one asked
for and said, and hub specs train with the loss of their kind of model."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from streamplan.errors import ModelSpecError
from streamplan.frontends.fullsize import attention_backends
from streamplan.frontends.precision import attention_in
from streamplan.frontends.torch_capture import capture
from streamplan.frontends.training import TrainingProblem, capture_training
from streamplan.ir.training import training_step
from streamplan.memory.breakdown import Composition
from streamplan.models import ModelRequest, load_model

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")

TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256, "hidden_size": 32,
    "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 128, "tie_word_embeddings": False,
}  # fmt: skip
SEQ = 32


def _llama(device: str):
    import transformers

    config = transformers.LlamaConfig(
        **{k: v for k, v in TINY.items() if k not in ("architectures", "model_type")}
    )
    config._attn_implementation = "sdpa"
    config.use_cache = False
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.LlamaForCausalLM(config)


def _problem(model):
    ids = torch.randint(0, 256, (2, SEQ), generator=torch.Generator().manual_seed(0))

    def loss(out, labels):
        return torch.nn.functional.cross_entropy(out.logits.reshape(-1, 256), labels.reshape(-1))

    return TrainingProblem(model, ((), {"input_ids": ids}), loss, (ids.clone(),), "cross-entropy")


def _signature(graph):
    return [(n.op, tuple(graph.values[o].shape for o in n.outputs)) for n in graph.nodes]


def test_a_meta_device_model_captures_as_the_real_one():
    meta, real = _llama("meta"), _llama("cpu")
    ids = torch.zeros((1, SEQ), dtype=torch.int64)
    g_meta = capture(meta, ((), {"input_ids": ids}), name="m")
    g_real = capture(real, ((), {"input_ids": ids}), name="m")
    assert _signature(g_meta) == _signature(g_real)
    assert all(p.is_meta for p in meta.parameters())  # the user's module keeps its meta parameters
    t_meta = capture_training(_problem(meta), optimizer="none", name="m")
    t_real = capture_training(_problem(real), optimizer="none", name="m")
    assert _signature(t_meta) == _signature(t_real)
    assert Composition.of(t_meta, t_meta.storages()) == Composition.of(t_real, t_real.storages())


@pytest.fixture(scope="module")
def steps():
    out = {}
    for attention in ("flash", "math"):
        with attention_backends(attention):
            out[attention] = capture_training(_problem(_llama("meta")), optimizer="sgd", name=attention)
    return out


def test_flash_attention_keeps_no_score_matrix_and_math_does(steps):
    flash, math = attention_in(steps["flash"]), attention_in(steps["math"])
    assert flash.kernel == "flash" and flash.calls == 2 and flash.scores_bytes == 0
    assert math.kernel == "materialised" and math.calls == 2
    assert math.scores_shape == (2, 4, SEQ, SEQ) and math.scores_bytes == 2 * 4 * SEQ * SEQ * 4
    saved = {k: Composition.of(g, g.storages())["saved_activations"] for k, g in steps.items()}
    assert saved["math"] > saved["flash"]
    assert "flash attention" in flash.text() and "materialises" in math.text()


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hub") / "TinyLlama"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY))
    return d


def test_hf_spec_trains_mixed_precision_with_the_causal_lm_loss(config_dir):
    g = load_model(f"hf:{config_dir}@{SEQ}", train=True, optimizer="adamw", precision="mixed-bf16", batch=2)
    step = training_step(g)
    assert g.name == f"TinyLlama@{SEQ}" and g.meta["batch"] == 2
    assert "next-token cross-entropy" in step.loss_fn and not step.loss_is_default
    assert step.master_dtype == "float32" and step.optimizer == "adamw"
    assert attention_in(g).kernel == "flash"
    eager = load_model(f"hf:{config_dir}@{SEQ}", train=True, optimizer="sgd", attention="eager")
    assert attention_in(eager).kernel == "materialised"


def test_requests_key_the_cache_on_precision_attention_and_the_config(config_dir):
    a = ModelRequest(f"hf:{config_dir}", train=True, optimizer="adamw", precision="mixed-bf16")
    b = ModelRequest(f"hf:{config_dir}", train=True, optimizer="adamw", attention="math")
    assert a.captures and a.python_file() == config_dir / "config.json"
    assert a.fields()["precision"] == "mixed-bf16" and b.fields()["attention"] == "math"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(precision="mixed-bf16"), ["training step", "--train"]),
        (dict(precision="mixed-bf16", train=True, dtype="float16"), ["both set"]),
        (dict(precision="fp8", train=True), ["unknown precision"]),
        (dict(attention="sparse"), ["unknown attention"]),
    ],
)
def test_precision_and_attention_mistakes_are_user_errors(kwargs, words):
    with pytest.raises(ModelSpecError) as e:
        load_model("gpt2", **kwargs)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_eager_attention_is_an_hf_choice():
    with pytest.raises(ModelSpecError, match="applies to hf: specs"):
        load_model("gpt2", attention="eager")
    with pytest.raises(ModelSpecError, match="not captured from torch"):
        load_model("random:10", attention="flash")


def test_a_module_made_under_fake_tensors_captures_too():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
        x = torch.randn(8, 64)
    inference = capture(model, (x,), name="fake")
    step = capture_training(TrainingProblem(model, (x,), None), optimizer="adam", name="fake")
    params = (64 * 256 + 256 + 256 * 10 + 10) * 4
    assert sum(inference.values[p].nbytes for p in inference.params) == params
    assert Composition.of(step, step.storages())["optimizer_state"] == 2 * params
