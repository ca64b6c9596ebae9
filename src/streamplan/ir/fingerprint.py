"""Which graph a schedule was made for: a fingerprint stored in the schedule's ``meta``.

A schedule names ops by id, so handing it another graph used to give a list of
unknown ops. The fingerprint (graph name, the batch it was built at, op count, and a
digest of its ops, edges, shapes and dtypes) lets a mismatch be said in one line:
"schedule was made for inception_v3 at batch 1, not squeezenet".
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from streamplan.ir.graph import Graph

META_KEY = "graph"


def graph_fingerprint(graph: Graph) -> dict[str, Any]:
    """Name, batch (``meta["batch"]``, None when unknown), what it computes (``step``: None for
    inference, else the training step's optimizer update), op count and structure digest."""
    h = hashlib.sha256()
    for n in graph.nodes:
        h.update(f"{n.id}\x00{n.op}\x00{n.inputs}\x00{n.outputs}\x00{n.mutates}\n".encode())
    for v in graph.values.values():
        h.update(f"{v.id}\x00{v.shape}\x00{v.dtype}\x00{v.kind}\x00{v.storage}\n".encode())
    h.update(f"{graph.inputs}\x00{graph.params}\x00{graph.outputs}".encode())
    return {
        "name": graph.name,
        "batch": graph.meta.get("batch"),
        "step": _step_of(graph),
        "ops": len(graph.nodes),
        "sha256": h.hexdigest()[:24],
    }


def _step_of(graph: Graph) -> str | None:
    training = graph.meta.get("training")
    if not isinstance(training, Mapping):
        return None
    return str(training.get("optimizer", "none"))


def describe(fp: Mapping[str, Any]) -> str:
    """``inception_v3 at batch 1`` (or ``inception_v3`` when the batch is unknown); a training
    step is ``a training step of inception_v3 (adam update) at batch 1``."""
    batch = fp.get("batch")
    text = f"{fp.get('name')}" + (f" at batch {batch}" if batch is not None else "")
    step = fp.get("step")
    if step is None:
        return text
    update = "no optimizer update" if step == "none" else f"{step} update"
    return f"a training step of {fp.get('name')} ({update})" + text[len(str(fp.get("name"))) :]


def fingerprint_mismatch(meta: Mapping[str, Any], graph: Graph) -> str | None:
    """One line saying how the graph a schedule was made for differs from ``graph``; None
    when they agree or the schedule carries no fingerprint (made by hand or by older code)."""
    made = meta.get(META_KEY)
    if not isinstance(made, Mapping) or "sha256" not in made:
        return None
    now = graph_fingerprint(graph)
    if made.get("sha256") == now["sha256"]:
        return None
    other_step = "step" in made and made["step"] != now["step"]
    if made.get("name") != now["name"] or other_step:
        inference = " (inference)" if other_step and now["step"] is None else ""
        return f"schedule was made for {describe(made)}, not {describe(now)}{inference}"
    if made.get("batch") != now["batch"]:
        return f"schedule was made for {describe(made)}, not at batch {now['batch']}"
    return (
        f"schedule was made for another graph named {now['name']} "
        f"({made.get('ops')} ops; this one has {now['ops']}, or different shapes or dtypes)"
    )
