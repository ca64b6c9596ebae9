"""Write a scheduled graph as a self-contained PyTorch module (the ``codegen`` command).

The module imports torch only. It defines an ``nn.Module`` whose ``forward`` calls
the graph's ATen ops in the schedule's launch order. With CUDA inputs every op runs
under ``torch.cuda.stream`` of its schedule stream, with the waits, events,
``record_stream`` calls and frees of ``codegen.plan``; on the CPU the streams are
``None``, the stream helpers do nothing, and the same ops run in launch order. The
weights live in a child module ``tensors`` under their names in the original model's
``state_dict``, so ``load_weights(model)`` fills them.
"""

from __future__ import annotations

import ast
import contextlib
import gc
from collections.abc import Iterator, Mapping
from typing import Any

import streamplan.codegen.pysource as ps
import streamplan.codegen.templates as templates
from streamplan.codegen.check import module_problems
from streamplan.codegen.forward import FOLDED, class_stmt, reading
from streamplan.codegen.header import Predictions, header
from streamplan.codegen.plan import launch_plan
from streamplan.codegen.pyast import (
    MAX_DEPTH,
    Unwritable,
    attr,
    is_identifier,
    literal,
    store,
    torch_constant,
)
from streamplan.codegen.render import Fixed, Stmt, write_module
from streamplan.errors import GraphError, ModelSpecError, UnsupportedError
from streamplan.ir.collectives import collective_problems, collectives
from streamplan.ir.fused import folded_pair, fused_parts, is_fused
from streamplan.ir.graph import Graph
from streamplan.ir.schedule import StreamSchedule
from streamplan.ir.training import TrainingStep, training_step

# names of the generated code that values must not take
RESERVED = {
    "torch", "aten", "contextlib", "self", "w", "device", "caller", "_r", "WEIGHTS", "CONSTANTS", "PREDICTIONS",
    "OUTPUTS", "RENAMED", "PROCESS_GROUPS", "SHARDS", *FOLDED.values(),
}  # fmt: skip
# where a training step's optimizer state lives among the module's tensors
STATE_PREFIX = "optimizer_state"
# what codegen reads of an FSDP unit (``meta["parallel"]["units"]``) to cut a rank's shards
UNIT_FIELDS = frozenset({"shard", "dtype", "padded_numel", "params"})
# the public attributes of torch.nn.Module (a test compares them with torch's): a weight path
# may not reuse them, or the generated module could not add a child or tensor under that name
MODULE_ATTRS = frozenset(
    """T_destination add_module apply bfloat16 buffers call_super_init children compile cpu cuda double
    dump_patches eval extra_repr float forward get_buffer get_extra_state get_parameter get_submodule
    half ipu load_state_dict modules mtia named_buffers named_children named_modules named_parameters
    parameters register_backward_hook register_buffer register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_full_backward_pre_hook register_load_state_dict_post_hook
    register_load_state_dict_pre_hook register_module register_parameter register_state_dict_post_hook
    register_state_dict_pre_hook requires_grad_ set_extra_state set_submodule share_memory state_dict to
    to_empty train training type xpu zero_grad""".split()
)


def default_class_name(graph: Graph, schedule: StreamSchedule) -> str:
    """The class name made of the graph's name and the policy's (``SeedExample2Asap``)."""
    step = training_step(graph)
    words = () if step is None else ("train",) if step.optimizer == "none" else ("train", step.optimizer)
    cls = ps.class_name(graph.name, schedule.policy, *words)
    return cls if is_identifier(cls) and cls not in RESERVED else cls + "Module"


def generate_module(
    graph: Graph,
    schedule: StreamSchedule,
    *,
    model: str | None = None,
    predictions: Predictions | None = None,
    class_name: str | None = None,
) -> str:
    """The source of a torch-only module running ``schedule`` (byte-stable for the same input).

    For a training step the module's ``forward`` is the whole step (see ``docs/codegen.md``):
    it takes the inputs and targets, updates the parameters, buffers and optimizer state it
    holds in place, and returns the loss and the gradients (no optimizer) or the updated
    parameters; ``OUTPUTS`` names what it returns. A fused kernel is written as its parts'
    ATen calls in order (a folded batch-norm as the convolution with the folded weight).

    The module is built as an ``ast`` tree (``codegen.render``): names, literals, dtypes and
    ops are checked as they are made, and what the graph holds that cannot be written raises
    ``GraphError`` naming the node and the field; ``codegen.check`` then vets the result.
    """
    with _collector_paused():
        return _generate(graph, schedule, model, predictions, class_name)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: a module is some 10^5 ``ast`` nodes made and
    parsed in a process that holds torch's objects, and the collector, started over and over
    by so many allocations, would walk that whole heap each time (several times the work of
    writing the module). Nothing made here needs it: the nodes form no reference cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _generate(
    graph: Graph,
    schedule: StreamSchedule,
    model: str | None,
    predictions: Predictions | None,
    class_name: str | None,
) -> str:
    step = training_step(graph)
    plan = launch_plan(graph, schedule)
    _check_collectives(graph)
    names = ps.Namer(RESERVED | {f"s{s}" for s in plan.streams})
    for v in graph.inputs:
        names(v)
    weights = _weight_table(graph, step)
    cls = class_name or default_class_name(graph, schedule)
    if not is_identifier(cls) or cls in RESERVED:
        raise ModelSpecError(f"{cls!r} cannot name a Python class", hint="use an identifier, e.g. MyModel")
    block: list[Stmt | Fixed] = [
        Stmt(ast.Expr(ast.Constant(header(graph, schedule, model, predictions, step))))
    ]
    block += [
        Stmt(ast.Import([ast.alias("contextlib")]), before=("",)),
        Stmt(ast.Import([ast.alias("torch")]), before=("",)),
    ]
    if any(n.op.startswith("aten.") for m in graph.nodes for n in (fused_parts(m) or (m,))):
        block.append(_assign("aten", attr("torch", "ops", "aten"), before=("",)))
    if predictions is not None:
        table = _dict({k: literal(v) for k, v in predictions.to_dict().items()})
        block.append(_assign("PREDICTIONS", table, before=("",), exploded=True))
    if step is not None:
        outputs = ast.Tuple([literal(o) for o in _output_names(graph, step)], ast.Load())
        block.append(
            _assign("OUTPUTS", outputs, before=("", "what forward returns, in order"), exploded=True)
        )
    rows = [_weight_row(graph, v, key, step) for v, key, _ in weights]
    block.append(
        _assign(
            "WEIGHTS",
            ast.Tuple(rows, ast.Load()),
            before=(
                "",
                "name in the model's state_dict, shape, dtype, kind (param, buffer, constant or state)",
            ),
            exploded=True,
        )
    )
    renamed = {name: key for _, key, name in weights if name != key}
    if renamed:
        why = "state_dict names kept under another name (not a name a module's child may have)"
        table = _dict({name: ast.Constant(key) for name, key in renamed.items()})
        block.append(_assign("RENAMED", table, before=("", why), exploded=True))
    constants = _constants(graph, weights)
    if constants:
        block.append(_assign("CONSTANTS", _dict(constants), before=("",), exploded=True))
    if plan.communication_streams:
        why = "one process group per communication stream: stream, group, ranks it spans"
        rows = ast.Tuple(_process_group_rows(graph, schedule, plan.communication_streams), ast.Load())
        block.append(_assign("PROCESS_GROUPS", rows, before=("", why), exploded=True))
    shards = _shard_rows(graph, step, {v: name for v, _, name in weights})
    if shards:
        why = "an FSDP rank's weights: name, flat padded size, dtype, (whole tensor, offset) in it"
        block.append(_assign("SHARDS", ast.Tuple(shards, ast.Load()), before=("", why), exploded=True))
    block.append(Fixed(templates.HELPERS, before=("", "")))
    if any(step.host_waits_for for step in plan.steps):
        block.append(Fixed(templates.HOST_WAIT_HELPER, before=("", "")))
    if plan.communication_streams:
        block.append(Fixed(templates.COLLECTIVE_HELPERS, before=("", "")))
    if shards:
        block.append(Fixed(templates.SHARD_HELPER, before=("", "")))
    if any(folded_pair(n) is not None for n in graph.nodes if is_fused(n)):
        block.append(Fixed(templates.FOLD_HELPER, before=("", "")))
    doc = f"{ps.plain(graph.name)} in the launch order of its {ps.plain(schedule.policy)} schedule."
    if step is not None:
        doc = "One training step of " + doc
        if len(doc) + 10 > ps.LINE_LENGTH:
            doc = f"One training step in the launch order of its {ps.plain(schedule.policy)} schedule."
    cls_stmt = class_stmt(
        graph,
        plan,
        names,
        {v: key for v, key, _ in weights},
        cls,
        doc,
        constants_embedded=bool(constants),
        renamed=bool(renamed),
        step=step,
        sharded=bool(shards),
    )
    block.append(cls_stmt)
    source, parsed = write_module(block)
    problems = module_problems(parsed)
    if problems:  # the builders above refuse what cannot be written: this is a bug
        raise RuntimeError(f"codegen wrote a module its own check refuses: {problems[0]}")
    return source


def _check_collectives(graph: Graph) -> None:
    """Refuse a collective node that is not one ``streamplan.parallel`` makes (``GraphError``
    naming it): a known kind, one input and output, an int group size, sum or avg."""
    for node in collectives(graph):
        problems = collective_problems(graph, node)
        if problems:
            raise GraphError(
                f"node {node.id!r:.60}: {problems[0]}",
                where=graph.name,
                hint="codegen writes the collectives streamplan.parallel makes; was the graph edited by hand?",
            )


def _shard_rows(graph: Graph, step: TrainingStep | None, names: dict[str, str]) -> list[ast.expr]:
    """``(name, padded numel, dtype, ((whole tensor, offset), ...))`` of each FSDP unit's shard and
    of each slot of its optimizer state (``meta["parallel"]["units"]``), by the names
    ``load_weights`` takes: what ``_shard`` cuts this rank's shards from."""
    parallel = graph.meta.get("parallel") or {}
    units = parallel.get("units", ()) if isinstance(parallel, Mapping) else ()
    state = step.optimizer_state if step is not None else {}
    rows = []
    for unit in units:
        with reading(graph, "meta.parallel", "units"):
            try:
                if not UNIT_FIELDS <= unit.keys():
                    raise KeyError(min(UNIT_FIELDS - unit.keys()))
                parts = [(fqn, offset) for _, fqn, _, offset in unit["params"]]
            except (AttributeError, KeyError, TypeError, ValueError):
                raise Unwritable(f"{unit!r:.60} is not a unit of streamplan.parallel") from None
            torch_constant("$dtype", unit["dtype"])
            if unit["shard"] in names:
                rows.append(
                    literal((names[unit["shard"]], unit["padded_numel"], unit["dtype"], tuple(parts)))
                )
            for v, (param, slot) in state.items():
                if param == unit["shard"] and v in names:
                    whole = tuple((f"{STATE_PREFIX}.{fqn}.{slot}", offset) for fqn, offset in parts)
                    rows.append(literal((names[v], unit["padded_numel"], unit["dtype"], whole)))
    return rows


def _process_group_rows(graph: Graph, schedule: StreamSchedule, streams: tuple[int, ...]) -> list[ast.expr]:
    """``(stream, group, ranks)`` for each communication stream: the group names of its
    collectives and the number of ranks they span (one number: a group has one size)."""
    rows = []
    for stream in streams:
        nodes = [n for n in collectives(graph) if schedule.streams[n.id] == stream]
        sizes = sorted({n.attrs.get("group_size") for n in nodes}, key=repr)
        if len(sizes) != 1 or isinstance(sizes[0], bool) or not isinstance(sizes[0], int):
            raise UnsupportedError(
                f"the collectives on stream {stream} span {', '.join(map(repr, sizes))} ranks",
                where=graph.name,
                hint="codegen gives each communication stream one process group, of one size; "
                "put collectives over groups of different sizes on different streams",
            )
        label = ", ".join(sorted({str(n.attrs.get("group", "")) for n in nodes}))
        rows.append(literal((stream, label, sizes[0])))
    return rows


def weight_names(graph: Graph) -> dict[str, str]:
    """The name ``load_weights`` of the module written for ``graph`` takes each weight under, by
    value id: its ``state_dict`` name, ``optimizer_state.<parameter>.<slot>`` for a training
    step's optimizer state, or the value id when the graph names none (an FSDP unit's shard)."""
    return {v: name for v, _, name in _weight_table(graph, training_step(graph))}


def _assign(target: str, value: ast.expr, **layout: Any) -> Stmt:
    return Stmt(ast.Assign(targets=[store(target)], value=value), **layout)


def _dict(items: dict[str, ast.expr] | list[tuple[str, ast.expr]]) -> ast.Dict:
    pairs = list(items.items()) if isinstance(items, dict) else items
    return ast.Dict(keys=[ast.Constant(k) for k, _ in pairs], values=[v for _, v in pairs])


def _weight_row(graph: Graph, v: str, key: str, step: TrainingStep | None) -> ast.expr:
    """``(state_dict name, shape, dtype, kind)`` of one weight; the dtype is one torch has (the
    module's ``getattr(torch, dtype)`` reads it)."""
    value = graph.values[v]
    with reading(graph, f"value {v!r:.60}", "dtype"):
        torch_constant("$dtype", value.dtype)
        return literal((key, tuple(value.shape), value.dtype, _kind(v, step, graph)))


# -- weights ----------------------------------------------------------------------


def _output_names(graph: Graph, step: TrainingStep) -> list[str]:
    """``loss``, then the state_dict name of each parameter whose gradient (or updated value) follows."""
    of_value = {g: p for p, g in step.gradients.items()} | {u: p for p, u in step.updates.items()}
    names = []
    for v in graph.outputs:
        if v == step.loss:
            names.append("loss")
        else:
            p = of_value.get(v)
            names.append(graph.param_names.get(p, p) if p is not None else v)
    return names


def _kind(v: str, step: TrainingStep | None, graph: Graph) -> str:
    return "state" if step is not None and v in step.optimizer_state else graph.values[v].kind


def _weight_table(graph: Graph, step: TrainingStep | None = None) -> list[tuple[str, str, str]]:
    """(value id, module path, state_dict name) of every param/buffer/constant the graph reads, in
    graph order; a training step's optimizer state goes under ``optimizer_state.<parameter>.<slot>``.
    The module path is the name unless that cannot name a child module or tensor (an empty part,
    one starting with an underscore, an attribute of ``nn.Module``, or a name already taken)."""
    used: dict[str, None] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if graph.producer(v) is None and graph.values[v].kind in ("param", "buffer", "constant"):
                used[v] = None
    for v in graph.outputs:
        if graph.producer(v) is None and graph.values[v].kind in ("param", "buffer", "constant"):
            used[v] = None
    taken: set[str] = set()
    out = []
    rank = {v: i for i, v in enumerate(graph.params)}
    state = step.optimizer_state if step is not None else {}
    for v in sorted(used, key=lambda v: (rank.get(v, len(rank)), v)):
        if v in state:
            param, slot = state[v]
            name = f"{STATE_PREFIX}.{graph.param_names.get(param, param)}.{slot}"
        else:
            name = graph.param_names.get(v, v)
        key = _module_path(name)
        while key in taken or any(t.startswith(key + ".") or key.startswith(t + ".") for t in taken):
            key += "_"
        taken.add(key)
        out.append((v, key, name))
    return out


def _module_path(key: str) -> str:
    parts = [p if p and p not in MODULE_ATTRS and not p.startswith("_") else f"t{p}" for p in key.split(".")]
    return ".".join(parts)


def _constants(graph: Graph, weights: list[tuple[str, str, str]]) -> list[tuple[str, ast.expr]]:
    """The embedded data of small constants (numbers, or nested lists of them) by module path."""
    known = graph.meta.get("constant_values", {}) or {}
    if not isinstance(known, Mapping):
        raise GraphError("meta.constant_values is not a mapping of value ids to data", where=graph.name)
    out = []
    for v, key, _ in weights:
        if graph.values[v].kind == "constant" and v in known:
            with reading(graph, f"value {v!r:.60}", "constant_values"):
                out.append((key, literal(_numbers(known[v]))))
    return out


def _numbers(x: Any, depth: int = 0) -> Any:
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, list) and depth < MAX_DEPTH:
        return [_numbers(y, depth + 1) for y in x]
    raise Unwritable(f"{x!r:.40} is not a number or a list of numbers")
