"""``run --cuda-graphs`` captures and replays the schedule on CUDA (predicted with the
simulator's CUDA-graph mode); on the CPU there is nothing to capture: a user error."""

from __future__ import annotations

import pytest

from helpers.cli import assert_user_error, cli
from streamplan.app.context import make_context
from streamplan.app.run import run_model
from streamplan.errors import ModelSpecError


def test_cuda_graphs_on_the_cpu_is_a_user_error():
    assert_user_error(cli("run", "seed-example2", "--cuda-graphs"), "CUDA graphs")
    with pytest.raises(ModelSpecError, match="CUDA graphs"):
        run_model("seed-example2", "asap", make_context(device="v100", cuda_graphs=True), target="cpu")
