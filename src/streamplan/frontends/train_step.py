"""Turn a forward+loss+backward graph into a training step: the update, the outputs, the roles.

``finish_training_step`` is shared by the torch capture (``frontends/training.py``) and
the synthetic ``random:N`` training graphs, and needs no torch. Given a joint graph, the
loss value, the gradient of each parameter and where the backward starts, it

1. appends the optimizer update (``frontends/optimizers.py``), in place on the
   parameters and the state;
2. sets the graph's outputs: the loss and, without an optimizer, every gradient (the
   caller of ``loss.backward()`` reads them afterwards), with one the updated parameters;
3. tags every storage with its role (``Graph.roles``):
   ``parameter`` (trainable weights), ``optimizer_state``, ``gradient`` (the storage of a
   parameter's gradient), ``saved_activation`` (made in the forward, read by the
   backward: what autograd keeps between the two) and ``temporary`` (every other
   intermediate, the loss included). Inputs, buffers and constants keep their kinds;
4. records the facts ``ir.training.TrainingStep`` reads back in ``meta["training"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamplan.frontends.optimizers import DEFAULT_HYPERPARAMETERS, check_optimizer, optimizer_update
from streamplan.ir.graph import Graph, Role
from streamplan.ir.training import TrainingStep
from streamplan.ir.verify import verify


def finish_training_step(
    graph: Graph,
    *,
    loss: str,
    gradients: Mapping[str, str],
    first_backward_op: str | None,
    optimizer: str = "none",
    hyperparameters: Mapping[str, float] | None = None,
    loss_fn: str = "",
    loss_is_default: bool = False,
    extra_meta: Mapping[str, Any] | None = None,
    master_dtype: str | None = None,
) -> Graph:
    """The training step of ``graph`` (see the module docstring), verified.

    ``gradients`` maps each trainable parameter's value id to its gradient's value id,
    in the order the optimizer visits them. ``master_dtype``: mixed precision, the optimizer
    updates master copies of the parameters in that dtype (``optimizers.optimizer_update``).
    """
    check_optimizer(optimizer)
    hyper = {**DEFAULT_HYPERPARAMETERS[optimizer], **(hyperparameters or {})}
    ids = {*graph.values, *graph.node_ids}
    if optimizer == "none":
        master_dtype = None  # no update: nothing owns a master copy
    update = optimizer_update(
        graph.values, gradients, optimizer, hyper, ids.__contains__, master_dtype=master_dtype
    )
    values = {**graph.values, **update.values}
    params = (*graph.params, *update.state)
    if optimizer == "none":
        outputs = (loss, *gradients.values())
    else:
        outputs = (loss, *update.updates.values())
    step = TrainingStep(
        loss=loss,
        loss_fn=loss_fn,
        loss_is_default=loss_is_default,
        optimizer=optimizer,
        hyperparameters=hyper,
        gradients=dict(gradients),
        optimizer_state=update.state,
        updates=update.updates,
        first_backward_op=first_backward_op,
        first_optimizer_op=update.nodes[0].id if update.nodes else None,
        master_dtype=master_dtype,
    )
    meta = {**graph.meta, **(extra_meta or {}), "training": step.to_meta()}
    meta.pop("output_values", None)  # the outputs changed; the forward's structure no longer applies
    meta.pop("output_structure", None)
    out = graph.replace(
        nodes=(*graph.nodes, *update.nodes),
        values=values,
        params=tuple(dict.fromkeys(params)),
        outputs=tuple(dict.fromkeys(outputs)),
        meta=meta,
    )
    return verify(out.with_roles(storage_roles(out, step)))


def storage_roles(graph: Graph, step: TrainingStep) -> dict[str, Role]:
    """The role of every parameter, state and activation storage of a training step."""
    roles: dict[str, Role] = {}
    grads = {graph.storage_of(g) for g in step.gradients.values()}
    state = {graph.storage_of(s) for s in step.optimizer_state}
    loss = graph.storage_of(step.loss)
    backward_from = (
        graph.position(step.first_backward_op) if step.first_backward_op is not None else len(graph.nodes)
    )
    last_use: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        for v in (*node.inputs, *node.mutates):
            last_use[graph.storage_of(v)] = i
    for sid, st in graph.storages().items():
        if st.kind == "param":
            roles[sid] = "parameter"
        elif sid in state:
            roles[sid] = "optimizer_state"
        elif st.kind != "activation":
            continue
        elif sid in grads:
            roles[sid] = "gradient"
        else:
            made = graph.producer(sid)
            saved = (
                sid != loss
                and made is not None
                and graph.position(made) < backward_from
                and last_use.get(sid, -1) >= backward_from
            )
            roles[sid] = "saved_activation" if saved else "temporary"
    return roles
