"""A transformers causal LM with its KV cache on (the library's default) is captured and run:
the cache object is not a tensor output, so the capture turns it off while tracing."""

from __future__ import annotations

import json

import pytest

from helpers.cli import cli

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

SPEC = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def lm():
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=64, bos_token_id=0, eos_token_id=0, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    assert cfg.use_cache
    return GPT2LMHeadModel(cfg).eval(), (torch.randint(0, 64, (1, 16)),)
"""


def _lm():
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(
        GPT2Config(
            vocab_size=64, bos_token_id=0, eos_token_id=0, n_positions=32, n_embd=32, n_layer=2, n_head=2
        )
    ).eval()


def test_capture_turns_the_cache_off_and_restores_it():
    from streamplan.frontends.torch_capture import capture

    model = _lm()
    g = capture(model, (torch.randint(0, 64, (1, 16)),), name="lm")
    assert g.nodes and model.config.use_cache is True  # the user's setting is left as it was


def test_a_cached_lm_from_a_file_runs_equal_to_eager(tmp_path):
    (tmp_path / "lm.py").write_text(SPEC)
    r = cli("run", str(tmp_path / "lm.py") + ":lm", "--policy", "asap", "--repeat", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["matches_eager"] is True
