"""DDP: one rank's program of a training step, gradients all-reduced in buckets.

Parameters and optimizer state stay whole on every rank. Gradients are grouped into
buckets of at most ``plan.bucket_bytes`` in the order the backward makes them (a
gradient larger than a bucket has one of its own), and each bucket, once its last
gradient exists, is flattened into one buffer (``bucket.<k>``: ``aten.cat``; a transposed
gradient is copied first), averaged in place across the ranks by ``comm.all_reduce``, and
viewed back as the gradients the optimizer reads. The flattening and the all-reduce
carry ``attrs["comm_stream"]`` so the ``overlap`` policy runs them on a communication
stream while the backward goes on.
"""

from __future__ import annotations

from streamplan.ir.collectives import collective_node
from streamplan.ir.dtypes import numel
from streamplan.ir.graph import Graph, Node, Role
from streamplan.ir.training import TrainingStep, training_step
from streamplan.ir.verify import verify
from streamplan.parallel.emit import COMM_STREAM, REDUCE, Emitter, renamed_inputs
from streamplan.parallel.fsdp import GROUP
from streamplan.parallel.plan import ParallelPlan


def ddp_rank_program(graph: Graph, plan: ParallelPlan) -> Graph:
    """One rank's program of training step ``graph`` under DDP ``plan`` (module docstring)."""
    step = training_step(graph)
    assert step is not None
    nodes = graph.nodes
    opt_at = graph.position(step.first_optimizer_op) if step.first_optimizer_op else len(nodes)
    made = {g: graph.position(graph.producer(g)) for g in step.gradients.values() if graph.producer(g)}
    grads = sorted(made, key=made.__getitem__)  # as the backward makes them
    buckets: list[list[str]] = []
    size = 0
    for g in grads:
        nb = graph.values[g].nbytes
        dtype = graph.values[g].dtype
        fits = buckets and size + nb <= plan.bucket_bytes and graph.values[buckets[-1][0]].dtype == dtype
        if not fits:
            buckets.append([])
            size = 0
        buckets[-1].append(g)
        size += nb
    em = Emitter({*graph.values, *graph.node_ids})
    after: dict[int, list[Node]] = {}
    reduced: dict[str, str] = {}  # gradient -> its averaged view
    layout = []
    for k, bucket in enumerate(buckets):
        dtype = graph.values[bucket[0]].dtype
        emitted, flat = [], []
        for g in bucket:
            node = em.flat_gradient(graph, g)
            emitted.append(node)
            flat.append(node.outputs[0])
        count = sum(numel(graph.values[g].shape) for g in bucket)
        cat = em.cat(flat, count, dtype, f"bucket.{k}", **{COMM_STREAM: REDUCE})
        emitted.append(cat)
        buf = cat.outputs[0]
        done = em.value(f"bucket.{k}.reduced", (count,), dtype, storage=buf)
        nbytes = em.values[buf].nbytes
        emitted.append(
            collective_node(
                em.fresh(f"all_reduce.bucket.{k}"),
                "all_reduce",
                buf,
                done,
                group=GROUP,
                group_size=plan.ranks,
                source_bytes=nbytes,
                output_bytes=nbytes,
                reduce="avg",
                bucket=k,
                **{COMM_STREAM: REDUCE},
            )
        )
        at = 0
        for g in bucket:
            shape = graph.values[g].shape
            view = em.view_into(done, buf, shape, dtype, at, f"{g}.avg")
            emitted.append(view)
            reduced[g] = view.outputs[0]
            at += numel(shape)
        layout.append({"bucket": k, "buffer": buf, "gradients": list(bucket), "numel": count, "dtype": dtype})
        after.setdefault(max(made[g] for g in bucket), []).extend(emitted)
    body: list[Node] = []
    for i, node in enumerate(nodes):
        body.append(renamed_inputs(node, reduced) if i >= opt_at else node)
        body.extend(after.get(i, ()))
    values = {**graph.values, **em.values}
    gradients = {p: reduced.get(g, g) for p, g in step.gradients.items()}
    outputs = tuple(reduced.get(v, v) for v in graph.outputs)
    new_step = TrainingStep(
        loss=step.loss,
        loss_fn=step.loss_fn,
        loss_is_default=step.loss_is_default,
        optimizer=step.optimizer,
        hyperparameters=step.hyperparameters,
        gradients=gradients,
        optimizer_state=step.optimizer_state,
        updates=step.updates,
        first_backward_op=step.first_backward_op,
        first_optimizer_op=step.first_optimizer_op,
    )
    meta = {**graph.meta, "training": new_step.to_meta()}
    meta["parallel"] = {"plan": plan.to_dict(), "buckets": layout, "group": GROUP}
    out = graph.replace(
        name=f"{graph.name}.ddp{plan.ranks}", nodes=tuple(body), values=values, outputs=outputs, meta=meta
    )
    roles: dict[str, Role] = dict(graph.roles)
    for entry in layout:
        roles[entry["buffer"]] = "gradient"
    for sid, st in out.storages().items():
        if st.kind == "activation" and sid not in roles:
            roles[sid] = "temporary"
    return verify(out.with_roles(roles))
