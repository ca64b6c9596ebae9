"""FSDP (ZeRO-3, FSDP2 semantics): one rank's program of a training step.

Each wrapping unit's parameters become one flat buffer, padded to a multiple of the
ranks and sharded: the rank holds ``shard.<unit>`` (a parameter of the rank program).
Then, as FSDP runs it:

1. before the unit's first forward use, ``comm.all_gather`` gathers the full flat buffer
   (``full.<unit>.fwd``, allocated where it is launched) and each parameter becomes a view
   into it (``aten.as_strided``); the forward reads the views;
2. with reshard-after-forward the buffer dies after the unit's forward, and a second
   all-gather (``full.<unit>.bwd``) feeds the unit's backward: views of parameters the
   forward made and the backward reads (a transposed weight) are made again from it;
   without, the forward's buffer lives on into the backward;
3. after the unit's last gradient, the gradients are flattened (a transposed gradient is
   copied, as autograd's accumulation would), zero-padded and concatenated
   (``flatgrad.<unit>``) and ``comm.reduce_scatter`` averages them into this rank's
   gradient shard (``gshard.<unit>``);
4. the optimizer updates the shards (its state is per shard).

The all-gathers carry ``attrs["unit"]`` and ``attrs["phase"]``; the nodes of the reduction
(flattening, padding, concatenation, reduce-scatter) carry ``attrs["comm_stream"]``, so
the ``overlap`` policy puts all-gathers and reductions on their own streams. How they are
laid out (for running the program for real) is in ``meta["parallel"]["units"]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from streamplan.errors import ModelSpecError
from streamplan.frontends.optimizers import optimizer_update
from streamplan.frontends.train_step import storage_roles
from streamplan.ir.collectives import collective_node
from streamplan.ir.dtypes import itemsize, numel
from streamplan.ir.graph import Graph, Node, Role
from streamplan.ir.training import TrainingStep, training_step
from streamplan.ir.verify import verify
from streamplan.parallel.emit import COMM_STREAM, REDUCE, Emitter, renamed_inputs
from streamplan.parallel.plan import ParallelPlan
from streamplan.parallel.units import wrapping_units

GROUP = "dp"


def fsdp_rank_program(graph: Graph, plan: ParallelPlan) -> Graph:
    """One rank's program of training step ``graph`` under FSDP ``plan`` (module docstring)."""
    step = training_step(graph)
    assert step is not None
    n = plan.ranks
    nodes = graph.nodes
    bwd_at = graph.position(step.first_backward_op) if step.first_backward_op else len(nodes)
    opt_at = graph.position(step.first_optimizer_op) if step.first_optimizer_op else len(nodes)
    trained = list(step.gradients)
    fqn = {p: graph.param_names.get(p, p) for p in trained}
    unit_of = wrapping_units({fqn[p]: graph.values[p].nbytes for p in trained}, plan.units)
    dtypes: dict[str, set[str]] = {}
    for p in trained:
        dtypes.setdefault(unit_of[fqn[p]], set()).add(graph.values[p].dtype)
    members: dict[str, list[str]] = {}  # flat unit -> its parameters, in optimizer order
    for p in trained:
        u = unit_of[fqn[p]]
        key = u if len(dtypes[u]) == 1 else f"{u}:{graph.values[p].dtype}"
        members.setdefault(key, []).append(p)
    aliases = _param_aliases(graph, set(trained), opt_at)  # param -> values viewing its storage

    readers: dict[str, list[int]] = {}  # value -> positions of nodes (before the update) reading it
    for i, node in enumerate(nodes[:opt_at]):
        for v in node.inputs:
            readers.setdefault(v, []).append(i)

    def uses(unit: str, phase: str) -> list[int]:
        lo, hi = (0, bwd_at) if phase == "fwd" else (bwd_at, opt_at)
        out = []
        for p in members[unit]:
            for v in (p, *aliases.get(p, ())):
                out += [i for i in readers.get(v, ()) if lo <= i < hi]
        return out

    order = sorted(members, key=lambda u: min(uses(u, "fwd") or uses(u, "bwd") or [len(nodes)]))
    em = Emitter({*graph.values, *graph.node_ids})
    new_values = {vid: v for vid, v in graph.values.items() if vid not in trained}
    before: dict[int, list[Node]] = {}  # insert before the node at this position
    after: dict[int, list[Node]] = {}  # insert after it
    rename_fwd: dict[str, str] = {}
    rename_bwd: dict[str, str] = {}
    layout, shards, gshards = [], {}, {}
    restored: dict[str, str] = {}  # value -> the storage it must alias now
    for unit in order:
        params = members[unit]
        dtype = graph.values[params[0]].dtype
        count = sum(numel(graph.values[p].shape) for p in params)
        padded = math.ceil(count / n) * n
        shard = em.value(f"shard.{unit}", (padded // n,), dtype, kind="param")
        shards[unit] = shard
        offsets, at = {}, 0
        for p in params:
            offsets[p] = at
            at += numel(graph.values[p].shape)
        layout.append(
            {
                "unit": unit,
                "shard": shard,
                "dtype": dtype,
                "numel": count,
                "padded_numel": padded,
                "params": [[p, fqn[p], list(graph.values[p].shape), offsets[p]] for p in params],
            }
        )
        phases = ["fwd"] if not plan.reshard_after_forward else ["fwd", "bwd"]
        for phase in phases:
            used = uses(unit, phase)
            if phase == "fwd" and not used:
                used = uses(unit, "bwd")  # only the backward reads it: gather once, there
            if not used:
                continue
            full = em.value(f"full.{unit}.{phase}", (padded,), dtype)
            ag = collective_node(
                em.fresh(f"all_gather.{unit}.{phase}"),
                "all_gather",
                shard,
                full,
                group=GROUP,
                group_size=n,
                source_bytes=padded // n * itemsize(dtype),
                output_bytes=padded * itemsize(dtype),
                unit=unit,
                phase="forward" if phase == "fwd" else "backward",
            )
            emitted = [ag]
            rename = rename_fwd if phase == "fwd" else rename_bwd
            for p in params:
                view = em.view_into(
                    full, full, graph.values[p].shape, dtype, offsets[p], f"{p}@{phase}", unflatten=unit
                )
                emitted.append(view)
                rename[p] = view.outputs[0]
            if phase == "bwd":  # views of parameters the forward made and the backward reads
                emitted += _remake_views(
                    graph, params, aliases, bwd_at, opt_at, rename_bwd, em, full, restored
                )
            before.setdefault(min(used), []).extend(emitted)
        for p in params:  # views of a parameter now view the gathered buffer of their phase
            for a in aliases.get(p, ()):
                prod = graph.producer(a)
                late = prod is not None and graph.position(prod) >= bwd_at and plan.reshard_after_forward
                view = (rename_bwd if late else rename_fwd).get(p)
                if view is not None:
                    restored[a] = em.values[view].storage
    if not plan.reshard_after_forward:
        rename_bwd = dict(rename_fwd)
    # gradients: flatten, pad, concatenate and reduce-scatter after each unit's last one
    for unit in order:
        params = members[unit]
        grads = [step.gradients[p] for p in params]
        last = max(graph.position(graph.producer(g)) for g in grads if graph.producer(g) is not None)
        emitted, flat = [], []
        dtype = graph.values[params[0]].dtype
        for g in grads:
            node = em.flat_gradient(graph, g)
            emitted.append(node)
            flat.append(node.outputs[0])
        layout_entry = next(x for x in layout if x["unit"] == unit)
        pad = layout_entry["padded_numel"] - layout_entry["numel"]
        if pad:
            z = em.zeros(pad, dtype, f"pad.{unit}", **{COMM_STREAM: REDUCE})
            emitted.append(z)
            flat.append(z.outputs[0])
        cat = em.cat(flat, layout_entry["padded_numel"], dtype, f"flatgrad.{unit}", **{COMM_STREAM: REDUCE})
        emitted.append(cat)
        gshard = em.value(f"gshard.{unit}", (layout_entry["padded_numel"] // n,), dtype)
        emitted.append(
            collective_node(
                em.fresh(f"reduce_scatter.{unit}"),
                "reduce_scatter",
                cat.outputs[0],
                gshard,
                group=GROUP,
                group_size=n,
                source_bytes=em.values[cat.outputs[0]].nbytes,
                output_bytes=em.values[gshard].nbytes,
                reduce="avg",
                unit=unit,
                **{COMM_STREAM: REDUCE},
            )
        )
        gshards[unit] = gshard
        after.setdefault(last, []).extend(emitted)
    body: list[Node] = []
    for i, node in enumerate(nodes[:opt_at]):
        body.extend(before.get(i, ()))
        body.append(renamed_inputs(node, rename_fwd if i < bwd_at else rename_bwd))
        body.extend(after.get(i, ()))
    used = {*graph.inputs, *(v for node in body for v in (*node.inputs, *node.outputs))}
    used |= {p for p in graph.params if p not in trained and p not in step.optimizer_state}
    values = {
        vid: v for vid, v in {**new_values, **em.values}.items() if vid in used or vid in shards.values()
    }
    for vid, storage in restored.items():
        values[vid] = _with_storage(values[vid], storage)
    return _finish(graph, step, plan, body, values, shards, gshards, layout, order)


def _with_storage(v, storage: str):
    import dataclasses

    return dataclasses.replace(v, storage=storage)


def _param_aliases(graph: Graph, params: set[str], opt_at: int) -> dict[str, list[str]]:
    """Each parameter's views made before the update: the values whose storage is the
    parameter's, in the order they are made."""

    def made_at(vid: str) -> int:
        prod = graph.producer(vid)
        return graph.position(prod) if prod is not None else -1

    out: dict[str, list[str]] = {}
    for vid, v in graph.values.items():
        if v.storage in params and vid != v.storage and made_at(vid) < opt_at:
            out.setdefault(v.storage, []).append(vid)
    return {p: sorted(vs, key=made_at) for p, vs in out.items()}


def _remake_views(graph, params, aliases, bwd_at, opt_at, rename_bwd, em, full, restored) -> list[Node]:
    """Copies, reading the backward's gathered views, of the forward's views of ``params`` that
    the backward reads (with reshard-after-forward the forward's buffer is gone by then)."""
    out: list[Node] = []
    for p in params:
        for a in aliases.get(p, ()):
            prod = graph.producer(a)
            if prod is None or graph.position(prod) >= bwd_at:
                continue
            read_late = any(bwd_at <= graph.position(c) < opt_at for c in graph.consumers(a))
            if not read_late:
                continue
            node = graph.node(prod)
            outs = {}
            for o in node.outputs:
                ov = graph.values[o]
                outs[o] = em.value(f"{o}@bwd", ov.shape, ov.dtype, storage=full)
            copy = renamed_inputs(node, rename_bwd)
            copy = Node(
                em.fresh(f"{node.id}@bwd"),
                copy.op,
                copy.inputs,
                tuple(outs[o] for o in node.outputs),
                copy.attrs,
                copy.flops,
                copy.bytes_read,
                copy.bytes_written,
            )
            out.append(copy)
            rename_bwd.update(outs)
    return out


def _finish(
    graph: Graph,
    step: TrainingStep,
    plan: ParallelPlan,
    body: list[Node],
    values: dict,
    shards: Mapping[str, str],
    gshards: Mapping[str, str],
    layout: list,
    order: list[str],
) -> Graph:
    """The optimizer on the shards, the outputs, the roles and the training facts."""
    taken = {*values, *(n.id for n in body)}
    gradients = {shards[u]: gshards[u] for u in order}
    update = optimizer_update(values, gradients, step.optimizer, step.hyperparameters, taken.__contains__)
    values = {**values, **update.values}
    kept_params = [p for p in graph.params if p in values and p not in step.optimizer_state]
    params = (*kept_params, *(shards[u] for u in order), *update.state)
    outputs = (step.loss, *(update.updates.values() if step.optimizer != "none" else gradients.values()))
    new_step = TrainingStep(
        loss=step.loss,
        loss_fn=step.loss_fn,
        loss_is_default=step.loss_is_default,
        optimizer=step.optimizer,
        hyperparameters=step.hyperparameters,
        gradients=gradients,
        optimizer_state=update.state,
        updates=update.updates,
        first_backward_op=step.first_backward_op,
        first_optimizer_op=update.nodes[0].id if update.nodes else None,
    )
    meta = dict(graph.meta)
    meta["training"] = new_step.to_meta()
    meta["parallel"] = {"plan": plan.to_dict(), "units": layout, "group": GROUP}
    names = {k: v for k, v in graph.param_names.items() if k in values}
    out = Graph(
        name=f"{graph.name}.fsdp{plan.ranks}",
        nodes=(*body, *update.nodes),
        values=values,
        inputs=graph.inputs,
        params=tuple(dict.fromkeys(params)),
        outputs=tuple(dict.fromkeys(outputs)),
        meta=meta,
        param_names=names,
    )
    roles: dict[str, Role] = storage_roles(out, new_step)
    for entry in layout:
        for sid in out.storages():
            if sid.startswith(f"full.{entry['unit']}."):
                roles[sid] = "parameter"  # the gathered parameters (a buffer of the program)
            elif sid.startswith(f"flatgrad.{entry['unit']}"):
                roles[sid] = "gradient"
    try:
        return verify(out.with_roles(roles))
    except Exception as e:  # a construct the transform does not handle: say so, name the model
        raise ModelSpecError(
            f"the FSDP rank program of {graph.name} is malformed: {e}",
            hint="report the model; try units=children or the ddp strategy",
        ) from None
