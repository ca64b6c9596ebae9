"""What a training-step graph records about itself, read back as a typed value.

A training step is one graph: forward, loss, backward and (optionally) the optimizer
update. ``Graph.roles`` says what each storage is for; the rest of the facts live in
``graph.meta["training"]`` (plain JSON, so they round-trip with the graph) and are read
here into a frozen ``TrainingStep``:

- ``loss``: the value id of the scalar loss, and how it was computed (``loss_fn``);
  ``loss_is_default`` when no loss function was given and the sum of the outputs stood in;
- ``optimizer`` (``none``, ``sgd``, ``momentum``, ``adam``) and its ``hyperparameters``;
- ``gradients``: parameter value id -> the value holding its gradient;
- ``optimizer_state``: state value id -> (parameter value id, slot name);
- ``updates``: parameter value id -> the value that holds it after the update;
- ``first_backward_op`` / ``first_optimizer_op``: where, in graph order, the backward and
  the update begin (the forward is everything before the backward);
- ``master_dtype``: with mixed precision, the dtype of the master copy of each parameter
  the optimizer updates (state slot ``master``) and of its state; None otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamplan.errors import GraphError
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.graph import Graph

OPTIMIZERS: tuple[str, ...] = ("none", "sgd", "momentum", "adam", "adamw")
PHASES: tuple[str, ...] = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class TrainingStep:
    """The training facts of a graph (see the module docstring)."""

    loss: str
    loss_fn: str
    loss_is_default: bool
    optimizer: str
    hyperparameters: Mapping[str, float]
    gradients: Mapping[str, str]
    optimizer_state: Mapping[str, tuple[str, str]]
    updates: Mapping[str, str]
    first_backward_op: str | None
    first_optimizer_op: str | None
    master_dtype: str | None = None

    def to_meta(self) -> dict[str, Any]:
        """The JSON form stored in ``graph.meta["training"]``."""
        return {
            "loss": self.loss,
            "loss_fn": self.loss_fn,
            "loss_is_default": self.loss_is_default,
            "optimizer": self.optimizer,
            "hyperparameters": dict(self.hyperparameters),
            "gradients": dict(self.gradients),
            "optimizer_state": {k: {"param": p, "slot": s} for k, (p, s) in self.optimizer_state.items()},
            "updates": dict(self.updates),
            "first_backward_op": self.first_backward_op,
            "first_optimizer_op": self.first_optimizer_op,
            **({"master_dtype": self.master_dtype} if self.master_dtype else {}),
        }

    @staticmethod
    def from_meta(data: Any, *, where: str = "graph") -> TrainingStep:
        try:
            return TrainingStep(
                loss=str(data["loss"]),
                loss_fn=str(data.get("loss_fn", "")),
                loss_is_default=bool(data.get("loss_is_default", False)),
                optimizer=str(data.get("optimizer", "none")),
                hyperparameters=FrozenDict(
                    {str(k): float(v) for k, v in data.get("hyperparameters", {}).items()}
                ),
                gradients=FrozenDict({str(k): str(v) for k, v in data.get("gradients", {}).items()}),
                optimizer_state=FrozenDict(
                    {
                        str(k): (str(v["param"]), str(v["slot"]))
                        for k, v in data.get("optimizer_state", {}).items()
                    }
                ),
                updates=FrozenDict({str(k): str(v) for k, v in data.get("updates", {}).items()}),
                first_backward_op=data.get("first_backward_op"),
                first_optimizer_op=data.get("first_optimizer_op"),
                master_dtype=data.get("master_dtype"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise GraphError(
                f"malformed training facts in graph meta ({type(e).__name__}: {e})", where=where
            ) from None

    def phase(self, graph: Graph, node_id: str) -> str:
        """``forward``, ``backward`` or ``optimizer``: the part of the step ``node_id`` belongs to."""
        pos = graph.position(node_id)
        if self.first_optimizer_op is not None and pos >= graph.position(self.first_optimizer_op):
            return "optimizer"
        if self.first_backward_op is not None and pos >= graph.position(self.first_backward_op):
            return "backward"
        return "forward"


def training_step(graph: Graph) -> TrainingStep | None:
    """The graph's training facts, or None for an inference graph."""
    data = graph.meta.get("training")
    if data is None:
        return None
    return TrainingStep.from_meta(data, where=graph.name)
