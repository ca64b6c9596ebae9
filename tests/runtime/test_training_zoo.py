"""Zoo training steps, on shrunk inputs, equal eager on one stream and under asap.

``make test`` runs a representative set (residual and Inception CNNs, a transformer with
tied weights); ``STREAMPLAN_ALL_ZOO_TRAINING=1`` runs every runnable zoo model (about ten
minutes more on two cores).
"""

from __future__ import annotations

import os

import pytest

from helpers.models import RUNNABLE_MODELS
from helpers.training import small_zoo_problem
from streamplan.frontends.training import capture_training
from streamplan.runtime import run_and_compare
from streamplan.schedule.context import ScheduleContext

REPRESENTATIVE = ("resnet50", "inception_v3", "googlenet", "gpt2")
MODELS = (
    RUNNABLE_MODELS
    if os.environ.get("STREAMPLAN_ALL_ZOO_TRAINING")
    else [m for m in RUNNABLE_MODELS if m in REPRESENTATIVE]
)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_zoo_training_step_matches_eager(name):
    problem = small_zoo_problem(name)
    graph = capture_training(problem, optimizer="adam", name=name)
    one = run_and_compare(problem, "sequential", graph=graph, train=True, optimizer="adam")
    assert one.matches_eager and one.max_abs_error == 0.0, one.max_abs_error
    many = run_and_compare(
        problem,
        "asap",
        graph=graph,
        train=True,
        optimizer="adam",
        chaos=True,
        ctx=ScheduleContext(max_streams=4),
    )
    assert many.matches_eager, many.max_abs_error
