"""Op scratch and per-stream workspaces in the torch-cuda replay, hand-worked; the CPU measurement."""

from __future__ import annotations

import pytest
import torch

from helpers.dags import dag
from streamplan.cost.measured import MeasuredTable, op_signature
from streamplan.frontends.builder import GraphBuilder
from streamplan.memory.allocators import OpMemory, replay
from streamplan.runtime.interpret import initial_env
from streamplan.runtime.op_timing import op_scratch_bytes
from streamplan.schedule.events import with_derived_waits

MIB = 1 << 20
KIB = 1 << 10


def sched(graph, streams=None):
    order = graph.node_ids
    return with_derived_waits(graph, order, streams or dict.fromkeys(order, 0), "test")


def step(report, op):
    return next(s for s in report.trace if s.op == op)


def test_scratch_raises_the_peak_at_its_op_only():
    # a chain of 1 MiB values: two live at a time; n1 also needs 3 MiB while it runs
    g = dag({1: [0], 2: [1]}, 3, sizes=[MIB, MIB, MIB])
    base = replay(g, sched(g))
    r = replay(g, sched(g), op_memory=OpMemory({"n1": 3 * MIB}))
    assert base.allocated_peak_bytes == 2 * MIB
    assert r.allocated_peak_bytes == 2 * MIB + 3 * MIB
    assert r.op_memory and not base.op_memory
    # freed when the op returns: after n1 nothing of it is allocated
    assert step(r, "n2").allocated_bytes == step(base, "n2").allocated_bytes
    assert "+op scratch" in str(r)


def test_scratch_is_reused_from_the_cache_on_its_stream():
    g = dag({1: [0], 2: [1]}, 3, sizes=[MIB, MIB, MIB])
    r = replay(g, sched(g), op_memory=OpMemory({"n0": 4 * MIB, "n2": 4 * MIB}))
    # the large pool: n0's 4 MiB scratch block is cached and serves n2's
    once = replay(g, sched(g), op_memory=OpMemory({"n0": 4 * MIB}))
    assert r.reserved_peak_bytes == once.reserved_peak_bytes
    assert r.segment_allocs == once.segment_allocs


def test_one_workspace_per_stream_that_runs_blas_held_throughout():
    g = dag({1: [0], 2: [0], 3: [1, 2]}, 4, sizes=[KIB] * 4)
    ws = 32 * MIB
    extra = OpMemory({}, ws, frozenset({"n1", "n2", "n3"}))
    one = replay(g, sched(g), op_memory=extra)
    assert step(one, "n0").allocated_bytes >= ws  # held from the start (a later run's view)
    assert ws <= one.allocated_peak_bytes < ws + MIB  # one stream: one workspace
    two = replay(g, sched(g, {"n0": 0, "n1": 0, "n2": 1, "n3": 0}), op_memory=extra)
    assert 2 * ws <= two.allocated_peak_bytes < 2 * ws + MIB
    # stream 1 runs only n0, no BLAS op: it holds none
    other = replay(g, sched(g, {"n0": 1, "n1": 0, "n2": 0, "n3": 0}), op_memory=extra)
    assert ws <= other.allocated_peak_bytes < ws + MIB
    none = replay(g, sched(g), op_memory=OpMemory({}, ws, frozenset()))
    assert not none.op_memory and none.allocated_peak_bytes < MIB


def test_oom_in_scratch_names_it():
    g = dag({1: [0]}, 2, sizes=[MIB, MIB])
    r = replay(g, sched(g), op_memory=OpMemory({"n1": 30 * MIB}), device_memory_bytes=20 * MIB)
    assert r.oom is not None and (r.oom.op, r.oom.storage, r.oom.requested_bytes) == (
        "n1",
        "n1:scratch",
        30 * MIB,
    )


def _mm_graph():
    b = GraphBuilder("mm")
    x = b.input("x", (64, 32))
    w = b.param("w", (32, 16))
    y = b.matmul(x, w, name="mm1")
    return b.build([b.relu(y, name="act")])


def test_from_table_maps_signatures_to_nodes_and_marks_blas_ops():
    g = _mm_graph()
    sig = op_signature(g, g.node("act"))
    table = MeasuredTable("h200", {}, {sig: 4096}, 32 * MIB)
    extra = OpMemory.from_table(g, table)
    assert extra.scratch_bytes == {"act": 4096}
    assert extra.workspace_ops == frozenset({"mm1"})
    assert extra.stream_workspace_bytes == 32 * MIB
    assert OpMemory.from_table(g, MeasuredTable("h200", {})).empty


def test_table_round_trip_keeps_op_memory(tmp_path):
    table = MeasuredTable("h200", {"a": 1.5}, {"a": 2048}, 8 * MIB)
    path = tmp_path / "t.json"
    table.save(path)
    assert MeasuredTable.load(path) == table
    assert MeasuredTable.from_dict({"schema": "streamplan.measured", "ops": {}}).scratch_bytes == {}


def test_negative_scratch_is_a_format_error():
    from streamplan.errors import FileFormatError

    with pytest.raises(FileFormatError, match="negative"):
        MeasuredTable.from_dict({"schema": "streamplan.measured", "ops": {}, "scratch_bytes": {"a": -1}})


def test_cpu_scratch_sees_the_temporaries_of_composite_ops():
    """max_pool2d runs max_pool2d_with_indices and drops the int64 indices: those are scratch."""
    b = GraphBuilder("pool")
    x = b.input("x", (1, 8, 16, 16))
    p = b.pool2d(x, "max", 2, stride=2, name="pool")
    g = b.build([b.relu(p, name="act")])
    env = initial_env(g, None, None)
    scratch = op_scratch_bytes(g, env)
    pool_sig = op_signature(g, g.node("pool"))
    assert g.node("pool").op == "aten.max_pool2d.default"
    assert scratch[pool_sig] == 8 * 8 * 8 * torch.int64.itemsize  # the indices
    assert scratch[op_signature(g, g.node("act"))] == 0  # relu makes its output only
