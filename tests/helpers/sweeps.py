"""Sweep fixtures: small model files for the workers (a broken one, one whose process dies),
and a small SqueezeNet as a graph file, so that workers need no torch capture."""

from __future__ import annotations

import textwrap
from pathlib import Path

from streamplan.ir.serialize import graph_to_dict

# No torch import at the top: a worker that loads these dies (or raises) before torch loads.
MODEL_FILE = textwrap.dedent(
    """
    import os


    def broken():
        raise RuntimeError("this model is broken")


    def dies():
        os._exit(7)  # the worker process ends as if it were killed


    def dies_once():
        marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "died-once")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(7)
        import torch

        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), (torch.randn(2, 4),)
    """
)


def model_file(folder: Path) -> Path:
    """``folder/models.py`` with ``broken``, ``dies`` and ``dies_once`` (see ``MODEL_FILE``)."""
    path = folder / "models.py"
    path.write_text(MODEL_FILE)
    return path


def squeezenet_json(folder: Path) -> Path:
    """SqueezeNet captured at 64x64 (the session's cached capture) as a graph file."""
    import json

    from helpers.models import small_model

    path = folder / "squeezenet.json"
    path.write_text(json.dumps(graph_to_dict(small_model("squeezenet")[2])))
    return path


SMALL_MODELS = ("seed-example1", "seed-example2", "random:24:1")
SMALL_POLICIES = "sequential,asap,wavefront,ios"
