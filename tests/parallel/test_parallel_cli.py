"""--parallel through the session API and the command line: memory at host launch, explain's
note on the collective buffers, JSON, and the user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamplan
from helpers.cli import assert_user_error, cli
from helpers.parallel_models import stack_problem

SPEC = f"{Path(__file__).parents[1] / 'helpers' / 'parallel_models.py'}:stack"


@pytest.fixture(scope="module")
def session():
    p = stack_problem(4)
    return streamplan.analyze(
        p.module,
        p.inputs,
        train=True,
        optimizer="sgd",
        loss_fn=p.loss_fn,
        targets=p.targets,
        parallel="fsdp=4,in_flight=none",
        device="h100",
    )


def test_a_session_on_a_rank_program_reports_memory_at_host_launch(session):
    m = session.memory("overlap")
    lt = m.report.launch_time
    assert lt.communicates and lt.host_waits == 0 and lt.record_stream
    assert lt.worst.peak_bytes >= lt.simulated.peak_bytes >= m.report.host_order.peak_bytes
    assert "held, worst case" in "\n".join(m.report.lines())
    assert "launch_time" in m.report.to_dict()


def test_explain_names_the_collective_buffers_and_the_hidden_communication(session):
    e = session.explain("overlap", vs=None)
    assert e.comm is not None and e.comm.buffers and e.overlap is not None
    assert 0 <= e.overlap.hidden_ms <= e.overlap.comm_ms
    d = e.to_dict()["communication"]
    assert d["overlap"]["collectives"] == len([n for n in session.graph.nodes if n.op.startswith("comm.")])


def test_memory_command_with_parallel():
    r = cli("memory", SPEC, "--train", "--parallel", "fsdp=2,prefetch=2", "--policy", "overlap", "--json")
    assert r.returncode == 0, r
    d = json.loads(r.stdout)
    assert d["launch_time"]["held_worst_case"]["peak_bytes"] >= d["host_order_peak_bytes"]
    assert d["launch_time"]["host_waits"] > 0


def test_explain_command_with_parallel():
    r = cli(
        "explain", SPEC, "--train", "--parallel", "fsdp=2,in_flight=none", "--policy", "overlap", "--vs", ""
    )
    assert r.returncode == 0, r
    assert "collective buffers hold" in r.stdout and "record_stream" in r.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("--parallel", "fsdp=2"), "--train"),
        (("--train", "--parallel", "tp=2"), "tensor parallelism"),
        (("--train", "--parallel", "fsdp=2,warp=9"), "unknown parallel plan knob"),
    ],
)
def test_user_errors(args, fragment):
    assert_user_error(cli("memory", SPEC, *args), fragment)


def test_simulate_says_how_much_communication_is_hidden():
    r = cli(
        "simulate",
        SPEC,
        "--train",
        "--parallel",
        "fsdp=2",
        "--policy",
        "overlap",
        "--device",
        "h100",
        "--json",
    )
    assert r.returncode == 0, r
    comm = json.loads(r.stdout)["communication"]
    assert comm["collectives"] > 0 and comm["comm_ms"] == pytest.approx(
        comm["hidden_ms"] + comm["exposed_ms"]
    )


def test_plan_command_chooses_knobs_under_a_budget():
    r = cli("plan", SPEC, "--parallel", "ddp=2", "--budget", "1GiB", "--device", "h100", "--json")
    assert r.returncode == 0, r
    d = json.loads(r.stdout)
    assert d["chosen"]["fits"] and len(d["points"]) == 8
    assert_user_error(cli("plan", SPEC, "--parallel", "ddp=2", "--budget", "lots"), "budget")
