"""Capturing a training step: one joint graph under FakeTensor, roles, in-place updates, clear errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers.training import MLP, mlp_graph, mlp_problem, two_branch_graph, two_branch_problem
from streamplan.errors import CaptureError, ModelSpecError
from streamplan.frontends.training import DEFAULT_LOSS, TrainingProblem, capture_training
from streamplan.ir.training import training_step


def _roles_of(g, role):
    return {sid for sid, r in g.roles.items() if r == role}


def test_step_has_forward_loss_backward_and_a_gradient_per_parameter():
    g = two_branch_graph()
    step = training_step(g)
    params = [v for v in g.params if g.values[v].kind == "param"]
    assert set(step.gradients) == set(params) == _roles_of(g, "parameter")
    assert g.outputs == (step.loss, *step.gradients.values())  # no optimizer: the gradients are outputs
    for p, grad in step.gradients.items():
        assert g.values[grad].shape == g.values[p].shape
        assert g.role(grad) == "gradient" and step.phase(g, g.producer(grad)) == "backward"
    assert step.optimizer == "none" and step.first_optimizer_op is None
    assert g.values[step.loss].shape == () and step.phase(g, g.producer(step.loss)) == "forward"


def test_saved_activations_are_what_the_backward_reads():
    g = two_branch_graph()
    step = training_step(g)
    saved = _roles_of(g, "saved_activation")
    # ReLU's backward reads its output; dropout's backward its mask; conv's backward its input
    readers = {g.node(c).op for s in saved for v in g.storages()[s].values for c in g.consumers(v)}
    assert {"aten.threshold_backward.default", "aten.native_dropout_backward.default"} <= readers
    for s in saved:
        assert step.phase(g, g.producer(s)) == "forward"
        users = [c for v in g.storages()[s].values for c in g.consumers(v)]
        assert any(step.phase(g, u) == "backward" for u in users)
    for s in _roles_of(g, "temporary"):  # a temporary made in the forward is dead before the backward
        if g.producer(s) and step.phase(g, g.producer(s)) == "forward" and s != g.storage_of(step.loss):
            users = [c for v in g.storages()[s].values for c in g.consumers(v)]
            assert all(step.phase(g, u) == "forward" for u in users), s


def test_running_statistics_are_written_in_place_where_they_are_made():
    g = two_branch_graph()
    copies = [n for n in g.nodes if n.op == "aten.copy_.default"]
    written = {g.values[n.mutates[0]].id for n in copies}
    assert written == {"b_bn_running_mean", "b_bn_running_var", "b_bn_num_batches_tracked"}
    step = training_step(g)
    assert all(step.phase(g, n.id) == "forward" for n in copies)


@pytest.mark.parametrize("optimizer,slots", [("sgd", 0), ("momentum", 1), ("adam", 2)])
def test_optimizer_updates_params_in_place_and_state_is_resident(optimizer, slots):
    g = two_branch_graph(optimizer)
    step = training_step(g)
    assert step.optimizer == optimizer and len(step.optimizer_state) == slots * len(step.gradients)
    for sid in step.optimizer_state:
        assert g.values[sid].kind == "buffer" and g.roles[sid] == "optimizer_state" and sid in g.params
    for p, updated in step.updates.items():
        assert g.storage_of(updated) == p and g.node(g.producer(updated)).mutates[0] in g.storages()[p].values
        assert step.phase(g, g.producer(updated)) == "optimizer"
    assert g.outputs == (step.loss, *step.updates.values())
    # a gradient lives until its update reads it, no longer: it is not an output any more
    for grad in step.gradients.values():
        last = max(g.position(c) for v in g.storages()[g.storage_of(grad)].values for c in g.consumers(v))
        assert step.phase(g, g.node_ids[last]) == "optimizer"
        assert grad not in g.outputs


def test_random_ops_are_numbered_for_seeding():
    g = two_branch_graph()
    seeded = [n for n in g.nodes if "seed_index" in n.attrs]
    assert [n.op for n in seeded] == ["aten.native_dropout.default"]
    assert seeded[0].attrs["seed_index"] == 0


def test_capture_runs_no_real_kernel_at_batch_64():
    from torch._subclasses.fake_tensor import is_fake

    problem = two_branch_problem(batch=64)
    seen: list[bool] = []
    problem.module.stem.register_forward_pre_hook(
        lambda m, args: seen.append(is_fake(args[0]) and is_fake(m.weight))
    )
    g = capture_training(problem, name="big")
    assert seen and all(seen), seen
    assert g.values["input_0"].shape == (64, 3, 8, 8)


def test_without_a_loss_function_the_sum_of_outputs_is_the_loss_and_it_says_so():
    problem = TrainingProblem(MLP(), (torch.randn(4, 6),))
    step = training_step(capture_training(problem))
    assert step.loss_is_default and step.loss_fn == DEFAULT_LOSS


def test_mlp_step_has_no_saved_forward_beyond_what_linear_and_tanh_need():
    g = mlp_graph()
    saved = {g.values[s].shape for s in _roles_of(g, "saved_activation")}
    # tanh's backward reads its output (4x8); the second linear's weight gradient reads it too
    assert (4, 8) in saved and len(saved) <= 3


def test_a_loss_that_is_not_a_scalar_is_one_clear_error():
    problem = TrainingProblem(MLP(), (torch.randn(4, 6),), lambda out: out.sum(dim=1))
    with pytest.raises(CaptureError, match=r"the loss must be a scalar, got \(4,\)"):
        capture_training(problem)


def test_a_model_with_nothing_to_train_is_refused():
    frozen = MLP().requires_grad_(False)
    with pytest.raises(ModelSpecError, match="no parameters that require grad"):
        capture_training(TrainingProblem(frozen, (torch.randn(4, 6),)))


class _BranchyGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        if grad.sum() > 0:  # data-dependent control flow, in the backward only
            return grad * 2
        return grad


class _Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return _BranchyGrad.apply(self.lin(x))


def test_data_dependent_control_flow_in_the_backward_is_named():
    with pytest.raises(CaptureError, match="data-dependent control flow in the backward"):
        capture_training(TrainingProblem(_Branchy(), (torch.randn(2, 4),)))


def test_an_unused_trainable_parameter_is_named():
    module = MLP()
    module.unused = nn.Linear(2, 2)
    with pytest.raises(CaptureError, match="gets no gradient"):
        capture_training(TrainingProblem(module, (torch.randn(4, 6),)))


def test_an_unknown_optimizer_is_refused_before_tracing():
    with pytest.raises(ModelSpecError, match="unknown optimizer 'lamb'"):
        capture_training(mlp_problem(), optimizer="lamb")


def test_labels_closed_over_by_the_loss_are_recorded_by_value():
    labels = torch.tensor([0, 2, 1, 1])
    problem = TrainingProblem(MLP(), (torch.randn(4, 6),), lambda out: F.cross_entropy(out, labels))
    g = capture_training(problem)
    constants = g.meta["constant_values"]
    assert [0, 2, 1, 1] in constants.values()


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.mid = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight  # tied, as language models tie their embeddings

    def forward(self, x):
        return self.head(torch.tanh(self.mid(self.emb(x))))


def test_tied_weights_are_one_parameter_whose_gradient_sums_both_uses():
    from streamplan.runtime import run_and_compare

    torch.manual_seed(0)
    x, y = torch.randint(0, 10, (2, 3)), torch.randint(0, 10, (2, 3))
    problem = TrainingProblem(
        _Tied(), (x,), lambda out, t: F.cross_entropy(out.reshape(-1, 10), t.reshape(-1)), (y,)
    )
    g = capture_training(problem, optimizer="adam")
    assert [p for p in g.params if g.values[p].kind == "param"] == [
        "p_emb_weight",
        "p_mid_weight",
        "p_mid_bias",
    ]
    assert g.node(g.producer(training_step(g).gradients["p_emb_weight"])).op == "aten.add.Tensor"
    c = run_and_compare(problem, "sequential", graph=g, train=True, optimizer="adam")
    assert c.matches_eager and c.max_abs_error == 0.0
