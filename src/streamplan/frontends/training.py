"""Capture one training step — forward, loss, backward, optimizer update — as one Graph.

How: the model and its loss are wrapped in one module whose forward returns the scalar
loss, and AOTAutograd's joint tracer (``aot_export_module(..., trace_joint=True)``)
records forward and backward in one ATen graph, under a ``FakeTensorMode`` that holds
fake copies of every parameter, buffer and input: no kernel runs and no activation is
allocated. (Real parameters would make AOTAutograd run the model once for real.) The
joint graph is functional: batch-norm's running statistics come back as new values,
which become ``copy_`` nodes writing the buffers in place right where they are made,
as eager PyTorch updates them. The ATen-FX converter of ``torch.export`` captures
(``fx_import.FxConverter``) turns it into a Graph, and ``finish_training_step`` adds
the optimizer update, the outputs and the roles.

Names: parameters ``p_<name>``, buffers ``b_<name>``, the model's inputs ``input_<i>``,
the loss's targets ``target_<i>``, gradients ``grad_<name>`` (``<name>`` is the
parameter's ``state_dict`` key with ``.`` as ``_``). Random ops (dropout) get
``attrs["seed_index"]``, their order among the random ops, so that a run can seed each
one the same way whatever order threads reach them in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from streamplan.errors import CaptureError, ModelSpecError
from streamplan.frontends.fullsize import fake_of
from streamplan.frontends.fx_import import FxConverter, Problems
from streamplan.frontends.optimizers import check_optimizer
from streamplan.frontends.torch_capture import CONSTANT_VALUE_LIMIT, _quiet, _split_inputs, _user_frame
from streamplan.frontends.train_step import finish_training_step
from streamplan.ir.graph import Graph

DEFAULT_LOSS = "sum of the outputs (no loss function given)"


@dataclass(frozen=True)
class TrainingProblem:
    """A model, its example inputs and how its loss is computed.

    ``loss_fn(output, *targets)`` returns the scalar loss; None sums the model's
    floating outputs instead (``DEFAULT_LOSS``). ``inputs`` are the model's example
    inputs (a tensor, a tuple of positional arguments or ``(args, kwargs)``);
    ``targets`` are tensors only the loss reads (labels), graph inputs too.
    """

    module: torch.nn.Module
    inputs: Any
    loss_fn: Callable[..., torch.Tensor] | None = None
    targets: tuple[torch.Tensor, ...] = ()
    loss_name: str = "the given loss function"

    @property
    def loss_description(self) -> str:
        return DEFAULT_LOSS if self.loss_fn is None else self.loss_name

    def compute_loss(self, output: Any) -> torch.Tensor:
        """The loss of one forward output (what the captured step computes)."""
        if self.loss_fn is None:
            return sum_of_outputs(output)
        return self.loss_fn(output, *self.targets)


def sum_of_outputs(output: Any) -> torch.Tensor:
    """The sum of every floating tensor in ``output`` (the loss when none is given)."""
    leaves = [t for t in _tensors(output) if t.is_floating_point()]
    if not leaves:
        raise CaptureError(
            "the model returns no floating tensor to sum into a loss", hint="give a loss function"
        )
    total = leaves[0].sum()
    for t in leaves[1:]:
        total = total + t.sum()
    return total


def _tensors(obj: Any) -> list[torch.Tensor]:
    if hasattr(obj, "to_tuple"):  # transformers' ModelOutput
        obj = obj.to_tuple()
    return [t for t in pytree.tree_leaves(obj) if isinstance(t, torch.Tensor)]


class _LossNotScalar(Exception):
    pass


class _Step(torch.nn.Module):
    """model + loss as one module returning ``(loss,)``; remembers which half it is in.

    A tensor registered under several names (tied weights) is one parameter to the tracer:
    ``named_parameters``/``named_buffers`` list each tensor once, under its first name, and
    the forward points every other name at whatever the tracer put under the first. Traced
    name by name instead, the tensor becomes one input per name, and a name whose module is
    never called (T5's ``shared``, whose uses go through ``encoder.embed_tokens``) gets no
    gradient although eager gives the one parameter the sum of all its uses.
    """

    def __init__(self, problem: TrainingProblem, n_args: int, kwarg_names: tuple[str, ...] = ()):
        super().__init__()
        self.model = problem.module
        self.problem = problem
        self.n_args = n_args
        self.kwarg_names = kwarg_names  # keyword inputs, passed positionally after the arguments
        self.phase = "forward"
        self.aliases = _aliases(self.model)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return super().named_parameters(prefix, recurse, remove_duplicate=True)

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return super().named_buffers(prefix, recurse, remove_duplicate=True)

    def forward(self, *flat: Any, **kwargs: Any) -> tuple[torch.Tensor]:
        from torch.nn.utils.stateless import _reparametrize_module

        self.phase = "forward"
        n_kw = self.n_args + len(self.kwarg_names)
        args, targets = flat[: self.n_args], flat[n_kw:]
        kwargs = {**kwargs, **dict(zip(self.kwarg_names, flat[self.n_args : n_kw]))}
        tied = {alias: _attr_path(self.model, first) for alias, first in self.aliases.items()}
        with _reparametrize_module(self.model, tied):
            output = self.model(*args, **kwargs)
        problem = dataclasses.replace(self.problem, targets=tuple(targets))
        loss = problem.compute_loss(output)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise _LossNotScalar(f"the loss must be a scalar, got {shape}")
        self.phase = "backward"  # what runs after this is autograd's backward
        return (loss,)


def _slots(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every place a parameter or buffer is held (a module's attribute), each once: a module
    registered under two names (``encoder.embed_tokens`` is ``shared``) holds its tensors in one
    place, which setting them by each name in turn would swap twice (and not restore)."""
    return [
        (f"{prefix}.{key}" if prefix else key, t)
        for prefix, mod in module.named_modules()
        for held in (mod._parameters, mod._buffers)
        for key, t in held.items()
        if t is not None
    ]


def _aliases(module: torch.nn.Module) -> dict[str, str]:
    """Each further place holding a tensor held in several (tied weights) -> its first name."""
    first: dict[int, str] = {}
    out: dict[str, str] = {}
    for fqn, t in _slots(module):
        name = first.setdefault(id(t), fqn)
        if name != fqn:
            out[fqn] = name
    return out


def _attr_path(module: torch.nn.Module, fqn: str) -> Any:
    for part in fqn.split("."):
        module = getattr(module, part)
    return module


def capture_training(
    problem: TrainingProblem,
    *,
    optimizer: str = "none",
    name: str | None = None,
    hyperparameters: Mapping[str, float] | None = None,
    master_dtype: str | None = None,
) -> Graph:
    """Trace one training step of ``problem`` (forward, loss, backward, ``optimizer`` update).

    ``hyperparameters`` override the optimizer's defaults (``optimizers.DEFAULT_HYPERPARAMETERS``:
    ``lr``, ``momentum``, ``beta1``, ``beta2``, ``eps``, ``weight_decay``, and ``step``, Adam's
    step number). ``master_dtype``: mixed precision, the optimizer updates master copies of the
    parameters in that dtype (``precision.PRECISIONS``). The module may live on the meta device
    (``fullsize``): its parameters are traced as fake CPU tensors.

    Raises ``ModelSpecError`` for an unknown optimizer or a model without trainable
    parameters, ``CaptureError`` for a loss that is not a scalar, data-dependent control
    flow in the forward or the backward, or anything else the tracer cannot follow, and
    ``UnsupportedError`` listing constructs the graph cannot represent.
    """
    check_optimizer(optimizer)
    module = problem.module
    if not isinstance(module, torch.nn.Module):
        raise CaptureError(f"a training step needs a torch.nn.Module, got {type(module).__name__}")
    name = name or type(module).__name__
    if not any(p.requires_grad for p in module.parameters()):
        raise ModelSpecError(
            f"{name} has no parameters that require grad: there is nothing to train",
            where=name,
            hint="set requires_grad=True on the weights to train, or analyse the model for inference",
        )
    args, kwargs = _split_inputs(problem.inputs)
    # tensor keyword inputs (input_ids=...) travel as positional inputs: the joint tracer takes no
    # keyword tensors; the others (flags, None) stay keywords
    tensor_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    kwargs = {k: v for k, v in kwargs.items() if k not in tensor_kwargs}
    step = _Step(problem, len(args), tuple(tensor_kwargs))
    module.train()
    gm, sig = _trace(step, (*args, *tensor_kwargs.values(), *problem.targets), kwargs, name)
    n_inputs = len(pytree.tree_leaves((args, tensor_kwargs)))
    return _to_graph(
        gm,
        sig,
        problem,
        optimizer,
        name,
        n_inputs=n_inputs,
        hyperparameters=hyperparameters,
        master_dtype=master_dtype,
    )


# -- tracing ---------------------------------------------------------------------


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """Skip recording a Python stack per traced op (a tenth of the tracing time)."""
    import torch.fx.config as fx_config

    previous = fx_config.do_not_emit_stack_traces
    fx_config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        fx_config.do_not_emit_stack_traces = previous


def _trace(step: _Step, flat: tuple, kwargs: dict, name: str) -> tuple[torch.fx.GraphModule, Any]:
    from torch._export.utils import _compiling_state_context
    from torch._functorch.aot_autograd import aot_export_module
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.utils.stateless import _reparametrize_module

    mode = FakeTensorMode(allow_non_fake_inputs=True)  # a loss may close over real labels

    def fake(x: Any) -> Any:
        return fake_of(mode, x)  # meta tensors (full-size models) become fake CPU tensors

    state = dict(_slots(step))  # every place, tied ones too: none may keep a real tensor while tracing
    try:
        with _quiet(), _no_stack_traces():
            fakes: dict[int, Any] = {}  # a tensor registered under two names (tied weights) stays one
            fake_state = {k: fakes.setdefault(id(v), fake(v)) for k, v in state.items()}
            fake_flat = tuple(fake(x) for x in flat)
            fake_kwargs = pytree.tree_map(fake, kwargs)
            # model code sees what torch.export shows it ("compiling/exporting": e.g. transformers
            # then skips data-dependent checks of attention masks)
            with _reparametrize_module(step, fake_state), _compiling_state_context():
                return aot_export_module(
                    step, fake_flat, trace_joint=True, output_loss_index=0, kwargs=fake_kwargs
                )
    except Exception as e:  # the model, its loss or autograd failed while tracing
        raise _trace_error(e, step.phase, name) from None


def _trace_error(e: Exception, phase: str, name: str) -> CaptureError:
    chain, c = [], e
    while c is not None and len(chain) < 20:
        chain.append(c)
        c = c.__cause__ or c.__context__
    for c in chain:
        if isinstance(c, _LossNotScalar):
            return CaptureError(
                f"{c}", where=name, hint="reduce the loss to one number (e.g. .mean()) in the loss function"
            )
    frame = _user_frame(e)
    where = f"{name} ({frame.filename}:{frame.lineno} in {frame.name})" if frame else name
    kinds = " ".join(type(c).__name__ for c in chain)
    text = " ".join(str(c) for c in chain)
    first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)[:300]
    if "DataDependent" in kinds or "data-dependent" in text or "_local_scalar_dense" in text:
        return CaptureError(
            f"data-dependent control flow in the {phase}: it branches on a tensor's value "
            f"({type(e).__name__}: {first})",
            where=where,
            hint="a static graph cannot follow a branch on tensor data; use torch.where, or move the "
            "decision out of the model",
        )
    if "did not receive a gradient" in text:
        return CaptureError(
            "a parameter that requires grad gets no gradient: the loss does not use it",
            where=where,
            hint="set requires_grad=False on parameters the loss does not depend on",
        )
    if "does not require gradients" in text:
        return CaptureError(
            "the loss does not depend on any parameter that requires grad",
            where=where,
            hint="check that the loss is computed from the model's output",
        )
    return CaptureError(
        f"tracing the training step failed in the {phase}: {type(e).__name__}: {first}",
        where=where,
        hint="run one eager step (loss.backward()) on the same inputs to check it works",
    )


# -- from the joint fx graph to a training step ----------------------------------------


def _to_graph(
    gm: torch.fx.GraphModule,
    sig: Any,
    problem: TrainingProblem,
    optimizer: str,
    name: str,
    n_inputs: int,
    hyperparameters: Mapping[str, float] | None = None,
    master_dtype: str | None = None,
) -> Graph:
    g = gm.graph
    placeholders = [n for n in g.nodes if n.op == "placeholder"]
    by_name = {n.name: n for n in g.nodes}
    kinds: dict[str, str] = {}
    fqns: dict[str, str] = {}
    for ph_name, fqn in (*sig.inputs_to_parameters.items(), *sig.inputs_to_buffers.items()):
        node = by_name[ph_name]
        short = fqn.removeprefix("model.")
        is_param = ph_name in sig.inputs_to_parameters
        node._rename(("p_" if is_param else "b_") + _ident(short))
        kinds[node.name] = "param" if is_param else "buffer"
        fqns[node.name] = short
    user = [by_name[n] for n in sig.user_inputs]
    for i, node in enumerate(user):
        node._rename(f"input_{i}" if i < n_inputs else f"target_{i - n_inputs}")
        kinds[node.name] = "input"
    (outputs,) = [n for n in g.nodes if n.op == "output"]
    flat_out = list(outputs.args[0])
    out_by_name = {n.name: n for n in flat_out if isinstance(n, torch.fx.Node)}
    loss = out_by_name[sig.user_outputs[0]]
    if loss.op == "call_function":
        loss._rename("loss")
    grads: dict[str, torch.fx.Node] = {}  # param placeholder name -> gradient node
    for out_name, fqn in sig.backward_signature.gradients_to_parameters.items():
        param = next(n for n in placeholders if fqns.get(n.name) == fqn.removeprefix("model."))
        node = out_by_name[out_name]
        if node.op == "call_function" and node not in grads.values():
            node._rename("grad_" + _ident(fqns[param.name]))
        grads[param.name] = node
    for out_name, fqn in sig.buffers_to_mutate.items():
        _write_back(g, out_by_name[out_name], _by_name_of(placeholders, fqns, fqn.removeprefix("model.")))
    outputs.args = ((loss, *grads.values()),)
    seeded = _seed_random_ops(g)
    constants = _small_constants(gm)
    graph = FxConverter(gm, name, kinds, fqns, Problems(name)).run(
        input_names=[n.name for n in user],
        constant_values=constants,
        output_structure=None,
        source="aot_autograd",
    )
    if seeded:
        graph = graph.replace(
            nodes=tuple(
                dataclasses.replace(n, attrs={**n.attrs, "seed_index": seeded[n.id]}) if n.id in seeded else n
                for n in graph.nodes
            )
        )
    loss_producer = graph.producer(loss.name)
    after = graph.position(loss_producer) + 1 if loss_producer else 0
    return finish_training_step(
        graph,
        loss=loss.name,
        gradients={p: grads[p].name for p in graph.params if p in grads},
        first_backward_op=graph.nodes[after].id if after < len(graph.nodes) else None,
        optimizer=optimizer,
        hyperparameters=hyperparameters,
        loss_fn=problem.loss_description,
        loss_is_default=problem.loss_fn is None,
        extra_meta={"targets": [n.name for n in user[n_inputs:]]},
        master_dtype=master_dtype,
    )


def _by_name_of(placeholders: list[torch.fx.Node], fqns: dict[str, str], fqn: str) -> torch.fx.Node:
    return next(n for n in placeholders if fqns.get(n.name) == fqn)


def _write_back(g: torch.fx.Graph, new: torch.fx.Node, buffer: torch.fx.Node) -> None:
    """``buffer.copy_(new)`` right after ``new`` is made (as eager updates running statistics)."""
    anchor = new
    while anchor.next.op == "call_function" and anchor.next.target is operator.getitem:
        anchor = anchor.next  # keep getitems next to their producer
    with g.inserting_after(anchor):
        copy = g.call_function(torch.ops.aten.copy_.default, (buffer, new))
    copy.meta["val"] = buffer.meta["val"]
    copy._rename(f"{buffer.name}.copy_")


def _seed_random_ops(g: torch.fx.Graph) -> dict[str, int]:
    """fx name -> order among the ops that draw random numbers (dropout masks...)."""
    seeded: dict[str, int] = {}
    for n in g.nodes:
        target = n.target
        if n.op == "call_function" and isinstance(target, torch._ops.OpOverload):
            if torch.Tag.nondeterministic_seeded in target.tags:
                seeded[n.name] = len(seeded)
    return seeded


def _small_constants(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """Tensors the trace lifted as constants (a loss's closed-over labels), small ones by value."""
    out: dict[str, Any] = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            t = getattr(gm, str(n.target), None)
            if isinstance(t, torch.Tensor) and t.numel() <= CONSTANT_VALUE_LIMIT:
                with contextlib.suppress(Exception):
                    out[n.name] = t.detach().cpu().tolist()
    return out


def _ident(fqn: str) -> str:
    return fqn.replace(".", "_")
