"""Inception V3's training step, on shrunk inputs, equals eager on one stream and under asap
(the rest of the zoo is in ``test_training_zoo.py``; this one alone is as slow as they are)."""

from __future__ import annotations

import pytest

from helpers.models import RUNNABLE_MODELS
from helpers.training import check_zoo_training_step, small_zoo_problem


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in RUNNABLE_MODELS if m == "inception_v3"])
def test_zoo_training_step_matches_eager(name):
    check_zoo_training_step(small_zoo_problem(name), name)
