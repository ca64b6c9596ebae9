"""Real kernel allocations on the CPU (a dispatch-mode tracker) against the exact replay plus op scratch."""

from __future__ import annotations

import pytest
import torch

from helpers.models import graph_of
from streamplan.cost.measured import MeasuredTable
from streamplan.frontends.builder import GraphBuilder
from streamplan.memory.allocators import OpMemory, replay
from streamplan.memory.worst_case import worst_case_peak
from streamplan.models import load_model
from streamplan.runtime import run
from streamplan.runtime.interpret import initial_env
from streamplan.runtime.measure import AllocatedBytes
from streamplan.runtime.op_timing import op_scratch_bytes
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext

KIB = 1 << 10


def _pool_graph():
    """relu (128 KiB) -> max_pool2d (32 KiB out, 64 KiB of int64 indices dropped inside) -> relu."""
    b = GraphBuilder("pooled")
    x = b.input("x", (1, 8, 64, 64))
    a = b.relu(x, name="a")
    p = b.pool2d(a, "max", 2, stride=2, name="pool")
    return b.build([b.relu(p, name="out")])


def _predicted(graph, schedule, with_scratch=True):
    scratch = op_scratch_bytes(graph, initial_env(graph, None, None)) if with_scratch else {}
    extra = OpMemory.from_table(graph, MeasuredTable("cpu", {}, scratch))
    return replay(graph, schedule, "exact", op_memory=extra).allocated_peak_bytes


def test_scratch_at_the_peak_is_measured_and_predicted():
    g = _pool_graph()
    s = make_schedule(g, "sequential")
    result = run(g, s, track_allocations=True)
    # the graph's tensors alone peak at a + pool = 160 KiB; the kernels also hold the indices
    assert result.measured_peak_bytes == 160 * KIB
    assert result.tracked_peak_bytes == (128 + 32 + 64) * KIB
    assert _predicted(g, s, with_scratch=False) == 160 * KIB
    assert _predicted(g, s) == result.tracked_peak_bytes


@pytest.mark.parametrize("model", ["seed-example2", "random:60", "squeezenet"])
def test_one_stream_tracked_peak_is_predicted_exactly(model):
    g = graph_of(model, 1) if model == "squeezenet" else graph_of(model)
    s = make_schedule(g, "sequential")
    result = run(g, s, track_allocations=True)
    assert result.tracked_peak_bytes == _predicted(g, s)
    assert result.tracked_peak_bytes >= result.measured_peak_bytes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_multi_stream_tracked_peak_stays_under_the_worst_case(seed):
    g = load_model("random:80")
    s = make_schedule(g, "asap", ScheduleContext(max_streams=4))
    result = run(g, s, chaos=True, chaos_seed=seed, track_allocations=True)
    assert result.tracked_peak_bytes <= worst_case_peak(g, s).upper_bytes  # no op scratch in random graphs


def test_tracker_ignores_known_storages_and_counts_views_once():
    x = torch.randn(256)
    counter = AllocatedBytes.of_tensors([x])
    with counter.mode():
        y = torch.ops.aten.relu.default(x)  # new storage: 1 KiB
        v = torch.ops.aten.view.default(y, [16, 16])  # same storage
        torch.ops.aten.relu_.default(x)  # in place on a known storage
        assert counter.live_bytes == KIB
    del y
    assert counter.live_bytes == KIB  # the view keeps it
    del v
    assert counter.live_bytes == 0 and counter.peak_bytes == KIB
