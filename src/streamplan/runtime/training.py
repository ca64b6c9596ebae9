"""Run a training step for real and compare it with eager PyTorch's ``loss.backward()`` + ``torch.optim``.

The reference is one eager step on a copy of the module: forward, the problem's loss,
``loss.backward()`` (gradients start from ``None``, i.e. ``zero_grad(set_to_none=True)``),
then ``torch.optim`` (``SGD``, ``Adam`` or ``AdamW``, ``foreach=False``: the single-tensor
code the graph's update replays) whose state is filled with the same starting values the
graph gets (``run_state``). A mixed-precision step (``TrainingStep.master_dtype``) runs the
optimizer on fp32 master copies of the parameters, their gradients cast up, and copies the
result back into the model's parameters, as the graph's update does. Random ops are seeded op by op on both sides
(``interpret.seeded_random_ops``), so dropout draws the same masks.

What is compared is what the graph returns: the loss, and the gradients (no optimizer)
or the updated parameters (with one, whose values depend on every gradient). The
reference runs torch at one thread, as the CPU executor runs each op, so that on one
stream both sum in the same order and agree to the bit.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from streamplan.errors import ExecutionError
from streamplan.frontends.optimizers import MASTER_SLOT
from streamplan.frontends.torch_capture import _split_inputs
from streamplan.frontends.user_code import running_user_code
from streamplan.ir.graph import Graph
from streamplan.ir.training import TrainingStep, training_step
from streamplan.runtime.interpret import (
    call_node,
    initial_env,
    params_from_module,
    random_tensor,
    seeded_random_ops,
)


def step_of(graph: Graph) -> TrainingStep:
    step = training_step(graph)
    if step is None:
        raise ExecutionError(f"{graph.name} is not a training step", hint="capture it with training on")
    return step


def run_state(graph: Graph, seed: int = 0) -> dict[str, torch.Tensor]:
    """Starting optimizer state (value id -> tensor): seeded, non-negative, as a step in
    the middle of training would find it (Adam's second moment is a mean of squares)."""
    step = step_of(graph)
    gen = torch.Generator().manual_seed(seed + 17)
    out = {}
    for vid in step.optimizer_state:
        v = graph.values[vid]
        out[vid] = random_tensor(v.shape, v.dtype, gen).abs() * 0.01
    return out


def run_inputs(graph: Graph, problem: Any) -> list[torch.Tensor]:
    """The tensors of ``graph.inputs``: the model's inputs (flattened), then the targets."""
    args, kwargs = _split_inputs(problem.inputs)
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    tensors += list(problem.targets)
    if len(tensors) != len(graph.inputs):
        raise ExecutionError(
            f"the step takes {len(graph.inputs)} inputs, the model gives {len(tensors)}", where=graph.name
        )
    return tensors


def run_params(graph: Graph, module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Copies of the module's parameters and buffers, by value id (a run updates them in place)."""
    return {vid: t.detach().clone() for vid, t in params_from_module(graph, module).items()}


def eager_step(
    graph: Graph, problem: Any, state: Mapping[str, torch.Tensor], *, device: str = "cpu"
) -> tuple[torch.Tensor, ...]:
    """One eager training step on a copy of ``problem.module``: the values of ``graph.outputs``."""
    step = step_of(graph)
    module = copy.deepcopy(problem.module).to(device).train()
    named = dict(module.named_parameters())
    fqn = graph.param_names
    args, kwargs = _split_inputs(problem.inputs)
    move = lambda x: x.to(device) if isinstance(x, torch.Tensor) else x  # noqa: E731
    args, kwargs = pytree.tree_map(move, (args, kwargs))
    targets = tuple(move(t) for t in problem.targets)
    with (
        torch.enable_grad(),
        running_user_code("the model's training step, run eagerly for reference,", graph.name),
    ):
        module.zero_grad(set_to_none=True)
        with seeded_random_ops():
            output = module(*args, **kwargs)
            loss = dataclasses.replace(problem, targets=targets).compute_loss(output)
        loss.backward()
    values: dict[str, torch.Tensor] = {step.loss: loss.detach()}
    params = [named[fqn[p]] for p in step.gradients]
    if step.optimizer == "none":
        for p, g in step.gradients.items():
            values[g] = named[fqn[p]].grad
    else:
        targets_of = _optimized_tensors(step, state, params, device)
        optimizer = _optimizer(step, list(targets_of.values()))
        by_param = dict(zip(step.gradients, targets_of.values(), strict=True))
        for vid, (p, slot) in step.optimizer_state.items():
            if slot != MASTER_SLOT:
                optimizer.state[by_param[p]][slot] = state[vid].to(device).clone()
        if step.optimizer in ("adam", "adamw"):
            for p in by_param.values():
                optimizer.state[p]["step"] = torch.tensor(step.hyperparameters["step"] - 1.0)
        optimizer.step()
        with torch.no_grad():
            for param, target in targets_of.items():
                if target is not param:  # mixed precision: the master copy goes back into the model
                    param.copy_(target)
        for p, updated in step.updates.items():
            values[updated] = named[fqn[p]].detach()
    missing = [v for v in graph.outputs if v not in values]
    if missing:
        raise ExecutionError(f"eager step has no value for {', '.join(missing[:3])}", where=graph.name)
    return tuple(values[v] for v in graph.outputs)


def graph_order_outputs(graph: Graph, seed: int = 0) -> tuple[Any, ...]:
    """The graph's ops run one by one in graph order from the seeded starting tensors (the
    reference of a step that has no module: ``random:N``, a saved graph)."""
    env = initial_env(graph, None, None, seed=seed)
    with torch.no_grad():
        for node in graph.nodes:
            env.update(zip(node.outputs, call_node(node, env, "cpu"), strict=True))
    return tuple(env[v] for v in graph.outputs)


def _in_dtype_of(problem: Any, graph: Graph) -> Any:
    """``problem`` with its module and floating inputs cast to the dtype of ``graph``'s parameters
    (a spec rebuilt in fp32 for a step captured in bf16, say); unchanged when they agree."""
    dtypes = {graph.values[p].dtype for p in graph.params if graph.values[p].kind == "param"}
    module_dtypes = {p.dtype for p in problem.module.parameters() if p.is_floating_point()}
    if len(dtypes) != 1 or dtypes == {str(d).removeprefix("torch.") for d in module_dtypes}:
        return problem
    tdt = getattr(torch, dtypes.pop())
    cast = lambda x: x.to(tdt) if isinstance(x, torch.Tensor) and x.is_floating_point() else x  # noqa: E731
    return dataclasses.replace(
        problem,
        module=problem.module.to(tdt),
        inputs=pytree.tree_map(cast, problem.inputs),
        targets=tuple(cast(t) for t in problem.targets),
    )


def _optimized_tensors(
    step: TrainingStep, state: Mapping[str, torch.Tensor], params: list[torch.nn.Parameter], device: str
) -> dict[torch.nn.Parameter, torch.nn.Parameter]:
    """Each parameter -> the tensor the optimizer updates: itself, or (mixed precision) its
    master copy from ``state``, holding the parameter's gradient cast to the master dtype."""
    if step.master_dtype is None:
        return {p: p for p in params}
    master_of = {p: vid for vid, (p, slot) in step.optimizer_state.items() if slot == MASTER_SLOT}
    out = {}
    for pid, param in zip(step.gradients, params, strict=True):
        master = torch.nn.Parameter(state[master_of[pid]].to(device).clone())
        master.grad = param.grad.to(master.dtype)
        out[param] = master
    return out


def _optimizer(step: TrainingStep, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    h = step.hyperparameters
    if step.optimizer == "sgd":
        return torch.optim.SGD(params, lr=h["lr"], foreach=False)
    if step.optimizer == "momentum":
        return torch.optim.SGD(params, lr=h["lr"], momentum=h["momentum"], foreach=False)
    betas = (h["beta1"], h["beta2"])
    if step.optimizer == "adamw":
        return torch.optim.AdamW(
            params, lr=h["lr"], betas=betas, eps=h["eps"], weight_decay=h["weight_decay"], foreach=False
        )
    return torch.optim.Adam(params, lr=h["lr"], betas=betas, eps=h["eps"], foreach=False)


@dataclass(frozen=True)
class PreparedStep:
    """A training step ready to run: its graph, starting tensors and the eager reference of its
    outputs (``params`` and ``inputs`` are None for graph-only specs: seeded tensors are used)."""

    name: str
    graph: Graph
    params: dict[str, torch.Tensor] | None
    inputs: list[torch.Tensor] | None
    reference: tuple[Any, ...]


def prepare_training(
    model: Any,
    *,
    optimizer: str = "none",
    batch: int | None = None,
    graph: Graph | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> PreparedStep:
    """Load (or take) a training step and compute the eager reference of its outputs.

    ``model`` is a spec (zoo name, ``file.py:function``, ``random:N``, graph ``.json``)
    or a ``TrainingProblem``. Graph-only specs have no module: their reference is the
    graph's own ops run in graph order from the same starting tensors.
    """
    from streamplan.frontends.training import TrainingProblem, capture_training
    from streamplan.models import load_model
    from streamplan.training_models import training_problem_of

    problem = None
    if isinstance(model, TrainingProblem):
        problem, name = model, type(model.module).__name__
    elif isinstance(model, str) and not model.startswith("random:") and not model.endswith(".json"):
        problem, name = training_problem_of(model, batch=batch)
        if graph is not None:  # a step captured in another precision (mixed-bf16): the module follows it
            problem = _in_dtype_of(problem, graph)
    else:
        name = str(model)
    if graph is None:
        if problem is not None:
            graph = capture_training(problem, optimizer=optimizer, name=name)
        else:
            graph = load_model(str(model), batch=batch, train=True, optimizer=optimizer)
    step_of(graph)
    from streamplan.runtime.execute import one_thread

    if problem is None:
        with one_thread():  # as the executor runs ops: the same reductions, the same roundings
            reference = graph_order_outputs(graph, seed)
        return PreparedStep(name, graph, None, None, reference)
    state = run_state(graph, seed)
    module_params = run_params(graph, problem.module)
    for vid, (p, slot) in step_of(graph).optimizer_state.items():
        if slot == MASTER_SLOT and p in module_params:  # a master copy starts as its parameter
            state[vid] = module_params[p].to(state[vid].dtype)
    with one_thread():
        reference = eager_step(graph, problem, state, device=device)
    params = {**module_params, **state}
    return PreparedStep(name, graph, params, run_inputs(graph, problem), reference)
