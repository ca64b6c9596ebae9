"""Rank programs (``--train --parallel``) written by codegen: the collectives on one process group
per communication stream, the host waits, the checker's view of both, and two gloo processes
running the generated FSDP and DDP steps as plain torch.distributed, equal to one eager step."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch

from helpers import fake_cuda
from helpers.cli import assert_user_error, cli
from helpers.codegen import assert_ruff_clean, generated_class, import_source
from helpers.codegen_ranks import RANKS, Case, eager_step, run_generated_ranks
from streamplan.codegen import generate_module, launch_plan
from streamplan.codegen.check import module_problems
from streamplan.errors import GraphError
from streamplan.ir.collectives import collectives
from streamplan.ir.training import training_step
from streamplan.runtime.distributed import _assemble, split_problem
from streamplan.runtime.training import run_inputs

HELPERS = Path(__file__).parents[1] / "helpers"
SPEC = f"{HELPERS / 'parallel_models.py'}:stack"


@pytest.fixture(scope="module")
def fsdp() -> Case:
    return Case("fsdp=2", "adam")


@pytest.fixture(scope="module")
def fsdp_fused() -> Case:
    return Case("fsdp=2", "momentum", fusion="first")


@pytest.fixture(scope="module")
def ddp() -> Case:
    return Case("ddp=2", "momentum")


def _forward_lines(source: str) -> list[str]:
    return [ln.strip() for ln in source[source.index("    def forward") :].splitlines()]


def test_collectives_run_on_their_streams_groups(fsdp) -> None:
    plan = launch_plan(fsdp.graph, fsdp.schedule)
    assert len(plan.communication_streams) == 2  # all-gathers and reduce-scatters apart
    lines = _forward_lines(fsdp.source)
    gathers = [ln for ln in lines if "= _all_gather(" in ln]
    scatters = [ln for ln in lines if "= _reduce_scatter(" in ln]
    kinds = [n.op for n in collectives(fsdp.graph)]
    assert len(gathers) == kinds.count("comm.all_gather") and len(scatters) == kinds.count(
        "comm.reduce_scatter"
    )
    # one group per stream: every all-gather on one, every reduce-scatter (averaging) on the other
    assert {ln.split("self.groups[")[1][0] for ln in gathers} == {"0"}
    assert {ln.split("self.groups[")[1] for ln in scatters} == {"1], True)"}
    assert 'PROCESS_GROUPS = (\n    (1, "dp", 2),\n    (2, "dp", 2),\n)' in fsdp.source
    assert "torch.ops.comm" not in fsdp.source
    assert module_problems(fsdp.source) == []


def test_host_waits_block_on_the_event_of_the_op_before_its_launch(fsdp) -> None:
    assert fsdp.schedule.host_waits  # the in-flight limit on all-gathers
    plan = launch_plan(fsdp.graph, fsdp.schedule)
    by_op = {s.op: s for s in plan.steps}
    lines = _forward_lines(fsdp.source)
    for w in fsdp.schedule.host_waits:
        assert by_op[w.after].records_event and w.after in by_op[w.before].host_waits_for
    waits = [ln for ln in lines if ln.startswith("_host_wait(")]
    assert len(waits) == len(fsdp.schedule.host_waits)
    for ln in waits:  # the host blocks on an event recorded earlier, right before a launch
        event = ln[len("_host_wait(") : -1]
        at = lines.index(ln)
        assert any(x.startswith(f"{event} = _event(") for x in lines[:at])
        assert not lines[at + 1].startswith(("del ", "_join("))


def test_without_record_stream_the_waits_order_the_reuse() -> None:
    case = Case("fsdp=2,record_stream=false", "sgd")
    assert not case.schedule.record_stream
    plan = launch_plan(case.graph, case.schedule)
    assert not any(s.record_on_stream for s in plan.steps)
    assert any(s.waits_for for s in plan.steps)
    lines = _forward_lines(case.source)
    assert not any(ln.startswith("_hand_over(") and ", caller)" not in ln for ln in lines)
    assert module_problems(case.source) == []
    header = case.source.split('"""')[1]  # the module docstring says how cross-stream frees are made
    assert "no record_stream" in header and "record_stream guards" not in header


def _mutated(source: str, old: str, new: str) -> str:
    assert old in source
    return source.replace(old, new, 1)


def test_checker_allows_the_collective_calls_and_nothing_broader(fsdp) -> None:
    src = fsdp.source
    gather = next(ln.strip() for ln in src.splitlines() if "= _all_gather(" in ln)
    target, call = gather.split(" = ")
    tensor = call[len("_all_gather(") : call.index(", self.groups")]
    hostile = [
        _mutated(src, gather, f"{target} = _all_gather({tensor}, self.groups)"),
        _mutated(src, gather, f"{target} = _all_gather({tensor}, self.tensors)"),
        _mutated(src, gather, f"{target} = _all_gather({tensor}, self.groups[0], True)"),
        _mutated(src, gather, f"{target} = torch.distributed.all_reduce({tensor})"),
        _mutated(src, gather, f"{target} = aten.add.Tensor({tensor}, self.groups[0])"),
        _mutated(src, "1], True)", "1], 1)"),
        _mutated(
            src, "torch.distributed.all_reduce(tensor, group=group)", "torch.distributed.broadcast(tensor, 0)"
        ),
        _mutated(
            src,
            "groups = tuple(torch.distributed.new_group()",
            "groups = tuple(torch.distributed.new_group(ranks=[0])",
        ),
        _mutated(src, '(1, "dp", 2),', "(__import__('os').system('true'), 2),"),
        _mutated(src, "_host_wait(event", "_host_wait(torch.distributed.barrier(), event"),
    ]
    for text in hostile:
        assert module_problems(text), text[:0]
    ast.parse(src)


def test_a_hand_edited_collective_is_refused(fsdp) -> None:
    import dataclasses

    g = fsdp.graph
    node = collectives(g)[0]
    bad = dataclasses.replace(node, attrs={**node.attrs, "group_size": "2"})
    edited = dataclasses.replace(g, nodes=tuple(bad if n.id == node.id else n for n in g.nodes))
    with pytest.raises(GraphError, match="group_size"):
        generate_module(edited, fsdp.schedule)


@pytest.mark.slow
@pytest.mark.parametrize("which, whole", [("fsdp", True), ("ddp", False), ("fsdp_fused", True)])
def test_generated_ranks_on_gloo_equal_one_eager_step(which, whole, request, tmp_path) -> None:
    """FSDP with Adam, each rank cutting its shards of the weights and moments itself; DDP with
    momentum, given the runtime's weights of each rank; FSDP over fused kernels (momentum)."""
    case: Case = request.getfixturevalue(which)
    assert ("# fused kernel " in case.source) == (which == "fsdp_fused")
    outputs = run_generated_ranks(case, tmp_path, whole)
    step = training_step(case.step_graph)
    by_fqn = {case.step_graph.param_names[p]: p for p in step.gradients}
    updated = _assemble(case.graph, outputs, by_fqn, RANKS)
    reference, reference_loss = eager_step(case)
    before = case.problem.module.state_dict()
    assert updated.keys() == reference.keys() and len(reference) == 22  # every weight and bias
    for k in reference:
        assert not torch.equal(reference[k], before[k]), k  # the step moved it: a no-op would fail
        torch.testing.assert_close(updated[k], reference[k], rtol=1e-4, atol=1e-6, msg=k)
    loss = sum(float(out[step.loss]) for out in outputs) / RANKS
    assert abs(loss - reference_loss) < 1e-5


@pytest.mark.slow
def test_generated_rank_programs_are_ruff_clean(fsdp, ddp, tmp_path) -> None:
    for name, case in (("fsdp", fsdp), ("ddp", ddp)):
        (tmp_path / f"stack_{name}.py").write_text(case.source)
    assert_ruff_clean(tmp_path)


def test_cli_writes_a_rank_program(tmp_path) -> None:
    out = tmp_path / "rank.py"
    r = cli(
        "codegen", SPEC, "--train", "--parallel", "fsdp=2", "--policy", "overlap", "-o", str(out), "--json"
    )
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["collectives"] > 0 and shown["process_groups"] == 2 and shown["host_waits"] > 0
    text = out.read_text()
    assert "rank program: " in text and "def __init__(self, groups: tuple | None = None)" in text
    assert "= _all_gather(" in text and "= _reduce_scatter(" in text and "_host_wait(" in text
    assert module_problems(text) == []


def test_cli_refuses_a_collective_it_cannot_write(fsdp, tmp_path) -> None:
    """A graph file whose collective was edited (a group size that is no number) exits 2 naming
    the node and the field, and writes nothing."""
    from streamplan.ir.serialize import dumps

    data = json.loads(dumps(fsdp.graph))
    node = next(n for n in data["nodes"] if n["op"].startswith("comm."))
    node["attrs"]["group_size"] = "two"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "rank.py"
    assert_user_error(cli("codegen", str(path), "--policy", "sequential", "-o", str(out)), "group_size")
    assert not out.exists()


def test_a_hand_edited_unit_is_refused(fsdp) -> None:
    import dataclasses

    g = fsdp.graph
    units = [dict(u) for u in g.meta["parallel"]["units"]]
    units[0]["dtype"] = "float32; import os"
    edited = dataclasses.replace(g, meta={**g.meta, "parallel": {**g.meta["parallel"], "units": units}})
    with pytest.raises(GraphError, match="not a torch dtype"):
        generate_module(edited, fsdp.schedule)
    units[0] = "embed"
    edited = dataclasses.replace(g, meta={**g.meta, "parallel": {**g.meta["parallel"], "units": units}})
    with pytest.raises(GraphError, match="not a unit of streamplan.parallel"):
        generate_module(edited, fsdp.schedule)


def test_on_cuda_streams_host_waits_block_on_recorded_events_and_collectives_keep_their_stream(
    fsdp, tmp_path, monkeypatch
) -> None:
    """The CUDA path under the fake ``torch.cuda`` (no GPU here): every host wait synchronises an
    event already recorded on the stream of the op it waits for, and each collective runs under
    the fake stream of its schedule stream with that stream's process group. The collectives are
    stand-ins (one process): what is checked is where and on what the module calls them."""
    fake_cuda.install(monkeypatch)
    log: list[tuple] = []

    def synchronize(event) -> None:
        assert event.stream is not None, "the host waits for an event never recorded"
        log.append(("host_wait", event.stream.name))

    monkeypatch.setattr(fake_cuda.FakeEvent, "synchronize", synchronize, raising=False)
    module = import_source(fsdp.source, tmp_path)
    monkeypatch.setattr(module, "_process_groups", lambda groups: ("group 0", "group 1"))
    stand_ins = {
        "all_gather": lambda t, group: torch.cat([t, t]),
        "reduce_scatter": lambda t, group, average: t.chunk(RANKS)[0].clone(),
    }
    for kind, run in stand_ins.items():

        def logged(*args, kind=kind, run=run):
            log.append((kind, fake_cuda._STATE.current.name, args[1]))
            return run(*args)

        monkeypatch.setattr(module, f"_{kind}", logged)
    model = generated_class(module)()
    model.use_streams = True
    with torch.no_grad():
        model(*run_inputs(fsdp.graph, split_problem(fsdp.problem, RANKS, 0)))
    schedule, plan = fsdp.schedule, launch_plan(fsdp.graph, fsdp.schedule)
    (fakes,) = model._streams.values()
    fake_of = {s: fake.name for s, fake in zip(plan.streams, fakes, strict=True)}
    comm = plan.communication_streams
    expected = [
        (
            n.op.removeprefix("comm."),
            fake_of[schedule.streams[n.id]],
            f"group {comm.index(schedule.streams[n.id])}",
        )
        for n in map(fsdp.graph.node, schedule.launch_order)
        if n.op.startswith("comm.")
    ]
    assert [e for e in log if e[0] != "host_wait"] == expected
    assert len({stream for _, stream, _ in expected}) == len(comm) == 2
    host = schedule.host_waits_before()
    waited = [fake_of[schedule.streams[u]] for op in schedule.launch_order for u in host.get(op, ())]
    assert [stream for kind, stream in (e[:2] for e in log) if kind == "host_wait"] == waited
    assert len(waited) == len(schedule.host_waits) > 0
