"""A captured training step records the batch it was built at, as an inference capture does
(``show --json`` reports it; a saved schedule's fingerprint names it)."""

from __future__ import annotations

import pytest

from streamplan.models import load_model

MODEL = """
import torch


def make():
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), (torch.randn(2, 4),)
"""


def test_a_file_model_step_records_the_batch_asked_for(tmp_path):
    spec = tmp_path / "tiny.py"
    spec.write_text(MODEL)
    assert load_model(f"{spec}:make", batch=3, train=True).meta["batch"] == 3
    assert load_model(f"{spec}:make", batch=3).meta["batch"] == 3  # as for inference


@pytest.mark.slow
def test_a_zoo_step_records_its_default_batch():
    assert load_model("squeezenet", train=True).meta["batch"] == 1
