"""Zoo training steps, on shrunk inputs, equal eager on one stream and under asap.

``make test`` runs a representative set (residual and Inception CNNs, a transformer with
tied weights); ``STREAMPLAN_ALL_ZOO_TRAINING=1`` runs every runnable zoo model, GPT-2 at its
full depth and vocabulary (about ten minutes more on two cores). Inception V3, the slowest,
is in ``test_training_zoo_inception.py``: ``--dist loadfile`` gives each file to one worker,
and the two files keep the two workers about equally busy.
"""

from __future__ import annotations

import os

import pytest

from helpers.models import RUNNABLE_MODELS
from helpers.training import check_zoo_training_step, shallow_gpt2_problem, small_zoo_problem

ALL = bool(os.environ.get("STREAMPLAN_ALL_ZOO_TRAINING"))
REPRESENTATIVE = ("resnet50", "googlenet", "gpt2")  # and inception_v3, in the other file
MODELS = [m for m in RUNNABLE_MODELS if m != "inception_v3" and (ALL or m in REPRESENTATIVE)]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_zoo_training_step_matches_eager(name):
    # GPT-2 with 2 of its 12 identical blocks and a 2048-token vocabulary: the same ops, the
    # tied head included, in a third of the time (the full model with STREAMPLAN_ALL_ZOO_TRAINING)
    problem = shallow_gpt2_problem() if name == "gpt2" and not ALL else small_zoo_problem(name)
    check_zoo_training_step(problem, name)
