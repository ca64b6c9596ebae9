"""Tied weights in a training step, as transformers ties them: one parameter per tensor whatever
the names it is registered under and whichever of its modules the forward calls, and the step
equal to eager ``loss.backward()`` + ``torch.optim``."""

from __future__ import annotations

import pytest
from torch._subclasses.fake_tensor import FakeTensor

from helpers import outside_models
from streamplan.frontends.training import TrainingProblem, capture_training
from streamplan.ir.training import training_step
from streamplan.runtime import run_and_compare


@pytest.mark.parametrize(
    "name,first",
    [
        ("shared_first", "shared.weight"),  # its first module is never called: it "got no gradient"
        ("tied_thrice", "emb.weight"),  # the second merge of its gradients was an internal error
        ("tiny_t5_train", "shared.weight"),
        ("tiny_bart_train", "model.shared.weight"),
    ],
)
def test_a_tied_weight_is_one_parameter_and_the_step_equals_eager(name, first):
    module, inputs, loss_fn = getattr(outside_models, name)()
    problem = TrainingProblem(module, inputs, loss_fn)
    graph = capture_training(problem, optimizer="adam", name=name)
    assert not any(isinstance(p, FakeTensor) for p in module.parameters())  # the module is left as it was
    names = [graph.param_names[p] for p in graph.params if graph.values[p].kind == "param"]
    assert len(names) == len({id(p) for p in module.parameters()}) and first in names
    assert set(training_step(graph).gradients) == {p for p in graph.params if graph.values[p].kind == "param"}
    c = run_and_compare(problem, "asap", graph=graph, train=True, optimizer="adam")
    assert c.matches_eager, c
