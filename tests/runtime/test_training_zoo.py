"""Every runnable zoo model's training step, on shrunk inputs, equals eager on one stream and under asap."""

from __future__ import annotations

import pytest

from helpers.models import RUNNABLE_MODELS
from helpers.training import small_zoo_problem
from streamplan.frontends.training import capture_training
from streamplan.runtime import run_and_compare
from streamplan.schedule.context import ScheduleContext


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE_MODELS)
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
