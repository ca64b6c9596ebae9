"""Allocator models: hand-worked torch-cuda cases, page/pow2 arithmetic, invariants on random DAGs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.dags import UNIT, dag, random_dags
from streamplan.cost.timeline import OpSpan, Timeline
from streamplan.errors import ModelSpecError, ScheduleError
from streamplan.ir.includes import Includes
from streamplan.memory.allocators import MODELS, replay
from streamplan.memory.allocators.page import page_round
from streamplan.memory.allocators.pow2 import pow2_round
from streamplan.memory.allocators.torch_cuda import TorchCudaAllocator, round_request, segment_bytes
from streamplan.memory.liveness import liveness
from streamplan.schedule.events import with_derived_waits

MIB = 1 << 20
KIB = 1 << 10


def sched(graph, streams=None, order=None):
    order = order or graph.node_ids
    return with_derived_waits(graph, order, streams or dict.fromkeys(order, 0), "test")


def timeline(spans):
    """spans: op -> (stream, launch_ms, end_ms)."""
    out = tuple(OpSpan(op, s, launch, launch, end) for op, (s, launch, end) in spans.items())
    return Timeline(out, max(e for _, _, e in spans.values()), {})


def step(report, op):
    return next(s for s in report.trace if s.op == op)


# -- torch-cuda: rounding, pools, segment sizes --------------------------------------------
def test_one_byte_takes_512_bytes_of_a_2mib_small_segment():
    r = replay(dag({}, 1, sizes=[1]), sched(dag({}, 1, sizes=[1])))
    assert (r.allocated_peak_bytes, r.reserved_peak_bytes, r.segments) == (512, 2 * MIB, 1)


def test_just_over_1mib_goes_to_the_large_pool_in_a_20mib_segment():
    g = dag({}, 1, sizes=[MIB + 1])
    r = replay(g, sched(g))
    assert (r.allocated_peak_bytes, r.reserved_peak_bytes) == (MIB + 512, 20 * MIB)


@pytest.mark.parametrize(
    "nbytes, segment",
    [
        (12 * MIB, 12 * MIB),
        (12 * MIB + 1, 14 * MIB),
        (10 * MIB, 10 * MIB),
        (10 * MIB - 1, 10 * MIB),
        (10 * MIB - 512, 20 * MIB),
    ],
)
def test_large_requests_get_a_segment_rounded_to_2mib(nbytes, segment):
    g = dag({}, 1, sizes=[nbytes])
    r = replay(g, sched(g))
    assert r.reserved_peak_bytes == segment == segment_bytes(round_request(nbytes))
    assert r.allocated_peak_bytes == round_request(nbytes)


def test_large_split_that_would_leave_at_most_1mib_hands_out_the_whole_block():
    # a (10 MiB) is freed after n1; c reuses its block: 9.5 MiB leaves 0.5 MiB -> no split.
    g = dag({1: [0], 2: [1]}, 3, sizes=[10 * MIB, KIB, 9 * MIB + MIB // 2])
    r = replay(g, sched(g))
    assert step(r, "n2").allocated_bytes == KIB + 10 * MIB  # slack counted as allocated
    assert r.reserved_peak_bytes == 10 * MIB + 2 * MIB
    # 8.5 MiB leaves 1.5 MiB > 1 MiB: split, only 8.5 MiB allocated.
    g = dag({1: [0], 2: [1]}, 3, sizes=[10 * MIB, KIB, 8 * MIB + MIB // 2])
    assert step(replay(g, sched(g)), "n2").allocated_bytes == KIB + 8 * MIB + MIB // 2


def test_small_pool_splits_down_to_512_bytes():
    g = dag({}, 3, sizes=[MIB, MIB - 512, 512])  # one 2 MiB small segment fits all three exactly
    r = replay(g, sched(g))
    assert (r.allocated_peak_bytes, r.reserved_peak_bytes, r.segments) == (2 * MIB, 2 * MIB, 1)


def test_best_fit_picks_the_smallest_cached_block_that_fits():
    # a (12 MiB) and b (16 MiB) are freed after n2; c (11 MiB) takes the 12 MiB block whole.
    g = dag({2: [0, 1], 3: [2]}, 4, sizes=[12 * MIB, 16 * MIB, KIB, 11 * MIB])
    r = replay(g, sched(g))
    assert step(r, "n3").allocated_bytes == 12 * MIB + KIB
    assert r.reserved_peak_bytes == 28 * MIB + 2 * MIB
    # 13 MiB only fits in the 16 MiB block, which is split (3 MiB left).
    g = dag({2: [0, 1], 3: [2]}, 4, sizes=[12 * MIB, 16 * MIB, KIB, 13 * MIB])
    r = replay(g, sched(g))
    assert step(r, "n3").allocated_bytes == 13 * MIB + KIB
    assert r.reserved_peak_bytes == 30 * MIB


def test_a_block_freed_on_stream_1_is_not_reused_by_stream_0():
    g = dag({1: [0], 2: [1]}, 3, sizes=[12 * MIB, KIB, 12 * MIB])
    one_stream = replay(g, sched(g))
    assert one_stream.reserved_peak_bytes == 12 * MIB + 2 * MIB
    r = replay(g, sched(g, {"n0": 1, "n1": 1, "n2": 0}))
    assert r.reserved_peak_bytes == 24 * MIB + 2 * MIB
    assert r.segment_allocs == 3


def _cross_stream_case():
    # a (12 MiB, stream 0) is read by n1 on stream 1, then freed; n2 (stream 0) wants 12 MiB.
    g = dag({1: [0]}, 3, sizes=[12 * MIB, KIB, 12 * MIB])
    return g, sched(g, {"n0": 0, "n1": 1, "n2": 0})


@pytest.mark.parametrize("n2_launch_ms, reused", [(1.0, False), (4.999, False), (5.0, True), (6.0, True)])
def test_a_cross_stream_free_is_held_until_the_other_streams_event_completes(n2_launch_ms, reused):
    g, s = _cross_stream_case()
    tl = timeline({"n0": (0, 0.0, 0.5), "n1": (1, 0.1, 5.0), "n2": (0, n2_launch_ms, n2_launch_ms + 1)})
    r = replay(g, s, timeline=tl)
    assert r.uses_timeline
    assert r.reserved_peak_bytes == (12 if reused else 24) * MIB + 2 * MIB
    # allocated drops at the free even while the block is held
    assert step(r, "n2").allocated_bytes == KIB + 12 * MIB  # a already freed


def test_without_a_timeline_held_frees_never_come_back():
    g, s = _cross_stream_case()
    r = replay(g, s)
    assert not r.uses_timeline
    assert r.reserved_peak_bytes == 26 * MIB


def test_the_event_follows_the_last_op_launched_on_the_other_stream():
    # a is read by n1 (stream 1, ends 2 ms) and last by n3 (stream 0). n2 on stream 1 runs
    # until 8 ms and is launched before a's free, so the event recorded at the free waits for it.
    g = dag({1: [0], 3: [0], 4: [3]}, 5, sizes=[12 * MIB, KIB, KIB, KIB, 12 * MIB])
    s = sched(g, {"n0": 0, "n1": 1, "n2": 1, "n3": 0, "n4": 0})
    base = {"n0": (0, 0.0, 1.0), "n1": (1, 0.1, 2.0), "n2": (1, 0.2, 8.0), "n3": (0, 0.3, 3.0)}
    held = replay(g, s, timeline=timeline(base | {"n4": (0, 5.0, 9.0)}))
    reused = replay(g, s, timeline=timeline(base | {"n4": (0, 8.0, 9.0)}))
    assert held.reserved_peak_bytes == 24 * MIB + 2 * MIB + 2 * MIB
    assert reused.reserved_peak_bytes == 12 * MIB + 2 * MIB + 2 * MIB


def test_neighbours_in_one_segment_merge():
    # a [0,6) and b [6,12) of one 20 MiB segment, c takes [12,20); a and b freed after n3
    # merge into 12 MiB, which e (11 MiB) takes whole (1 MiB slack, no split).
    g = dag({3: [0, 1], 4: [3]}, 5, sizes=[6 * MIB, 6 * MIB, 8 * MIB, KIB, 11 * MIB])
    r = replay(g, sched(g))
    assert r.reserved_peak_bytes == 20 * MIB + 2 * MIB
    assert step(r, "n4").allocated_bytes == 8 * MIB + KIB + 12 * MIB


def test_blocks_in_different_segments_do_not_merge():
    # a and b have 12 MiB segments of their own; freed, they cannot serve a 20 MiB request.
    g = dag({2: [0, 1], 3: [2]}, 4, sizes=[12 * MIB, 12 * MIB, KIB, 20 * MIB])
    r = replay(g, sched(g))
    assert r.reserved_peak_bytes == 24 * MIB + 2 * MIB + 20 * MIB


def test_oom_names_the_op_and_the_request():
    g = dag({2: [0, 1]}, 3, sizes=[12 * MIB, 12 * MIB, 12 * MIB])
    r = replay(g, sched(g), device_memory_bytes=30 * MIB)
    assert r.oom is not None
    assert (r.oom.op, r.oom.storage, r.oom.requested_bytes, r.oom.device_request_bytes) == (
        "n2",
        "v2",
        12 * MIB,
        12 * MIB,
    )
    assert (r.oom.reserved_bytes, r.oom.capacity_bytes) == (24 * MIB, 30 * MIB)
    assert [s.op for s in r.trace] == ["n0", "n1"]
    assert "out of memory at n2" in str(r)
    assert replay(g, sched(g), device_memory_bytes=36 * MIB).oom is None


def test_oom_retry_releases_free_cached_segments_of_any_stream():
    g = dag({1: [0], 2: [1]}, 3, sizes=[12 * MIB, KIB, 12 * MIB])
    s = sched(g, {"n0": 1, "n1": 1, "n2": 0})
    r = replay(g, s, device_memory_bytes=25 * MIB)
    assert r.oom is None and r.alloc_retries == 1
    assert r.reserved_peak_bytes == 14 * MIB


def test_oom_retry_waits_for_held_cross_stream_frees():
    g, s = _cross_stream_case()
    r = replay(g, s, device_memory_bytes=25 * MIB)  # no timeline: held until the OOM path syncs
    assert r.oom is None and r.alloc_retries == 1
    assert r.reserved_peak_bytes == 14 * MIB


def test_oom_in_each_model_and_for_residents():
    g = dag({1: [0]}, 2, sizes=[12 * MIB, 12 * MIB])
    for model in MODELS:
        r = replay(g, sched(g), model, device_memory_bytes=20 * MIB)
        assert r.oom is not None and r.oom.op == "n1", model
    r = replay(g, sched(g), "exact", device_memory_bytes=MIB // 2, includes=Includes(inputs=True))
    assert r.oom is not None and r.oom.op is None and r.oom.storage == "x"


# -- page, pow2, exact ----------------------------------------------------------------------
def test_page_and_pow2_rounding():
    assert [page_round(n) for n in (0, 1, 4096, 4097, 10000)] == [4096, 4096, 4096, 8192, 12288]
    assert [pow2_round(n) for n in (1, 2, 3, 5000, MIB, MIB + 1)] == [1, 2, 4, 8192, MIB, 2 * MIB]
    assert [round_request(n) for n in (1, 512, 513, MIB + 1)] == [512, 512, 1024, MIB + 512]


def test_page_and_pow2_reuse_only_the_same_size_class():
    # a is freed after n1; c (same class as a) reuses it; d needs a new block.
    g = dag({1: [0], 2: [1], 3: [2]}, 4, sizes=[5000, 3000, 7000, 9000])
    page = replay(g, sched(g), "page")
    assert page.reserved_peak_bytes == 8192 + 4096 + 12288
    assert page.allocated_peak_bytes == 8192 + 12288
    assert [s.allocated_bytes for s in page.trace] == [8192, 12288, 12288, 20480]
    pow2 = replay(g, sched(g), "pow2")
    assert pow2.reserved_peak_bytes == 8192 + 4096 + 16384
    assert pow2.allocated_peak_bytes == 8192 + 16384
    # a different class cannot reuse a freed block
    g = dag({1: [0], 2: [1]}, 3, sizes=[5000, 3000, 9000])
    assert replay(g, sched(g), "page").reserved_peak_bytes == 8192 + 4096 + 12288


def _live_bytes_oracle(graph, order):
    """Live activation bytes after each launch's allocations: produced, and not yet past its last reader."""
    pos = {op: i for i, op in enumerate(order)}
    spans = []
    for n in graph.nodes:
        for v in n.outputs:
            readers = [pos[c] for c in graph.consumers(v)]
            end = len(order) if v in graph.outputs else max(readers, default=pos[n.id])
            spans.append((pos[n.id], end, graph.values[v].nbytes))
    return [sum(b for a, e, b in spans if a <= i <= e) for i in range(len(order))]


@given(random_dags(max_nodes=12, vary_sizes=True), st.randoms(use_true_random=False))
@settings(max_examples=40, deadline=None)
def test_exact_is_the_live_bytes_sum(graph, rnd):
    order = _random_topological_order(graph, rnd)
    r = replay(graph, sched(graph, order=order), "exact")
    expected = _live_bytes_oracle(graph, order)
    assert [s.allocated_bytes for s in r.trace] == expected
    assert all(s.reserved_bytes == s.allocated_bytes for s in r.trace)
    assert r.allocated_peak_bytes == max(expected)


# -- residents, errors, JSON ----------------------------------------------------------------
def test_inputs_and_params_are_resident_and_counted_on_request():
    g = dag({1: [0]}, 2, sizes=[MIB, MIB])
    act = replay(g, sched(g), "exact")
    with_inputs = replay(g, sched(g), "exact", includes=Includes(inputs=True))
    assert with_inputs.resident_bytes == UNIT
    assert with_inputs.allocated_peak_bytes == act.allocated_peak_bytes + UNIT
    assert (
        replay(g, sched(g), "exact", includes=Includes(params=True)).resident_bytes == 0
    )  # dag() has no params
    # torch-cuda: the input lives in a default-stream segment that the schedule's stream cannot reuse
    tc = replay(g, sched(g), includes=Includes(inputs=True))
    assert tc.reserved_peak_bytes == 2 * MIB + 2 * MIB


def test_unknown_model_and_mismatched_schedule_are_clear_errors():
    g = dag({1: [0]}, 2)
    with pytest.raises(ModelSpecError, match="unknown allocator model 'buddy'") as e:
        replay(g, sched(g), "buddy")
    assert "torch-cuda" in str(e.value)
    assert replay(g, sched(g), "torch_cuda").model == "torch-cuda"
    with pytest.raises(ScheduleError, match=r"1 op\(s\) never launched"):
        replay(g, with_derived_waits(dag({}, 1), ("n0",), {"n0": 0}, "x"))
    with pytest.raises(ScheduleError, match="timeline has no span for n1"):
        replay(g, sched(g), timeline=timeline({"n0": (0, 0.0, 1.0)}))


def test_a_precomputed_liveness_gives_the_same_report():
    g = dag({1: [0], 2: [0]}, 3)
    s = sched(g, {"n0": 0, "n1": 1, "n2": 0})
    live = liveness(g, s, includes=Includes(inputs=True))
    assert replay(g, s, includes=Includes(inputs=True), live=live) == replay(
        g, s, includes=Includes(inputs=True)
    )
    with pytest.raises(ScheduleError, match="liveness given counts"):
        replay(g, s, live=live)


def test_report_to_dict_is_json():
    g = dag({1: [0]}, 2)
    r = replay(g, sched(g), device_memory_bytes=MIB)
    data = json.loads(json.dumps(r.to_dict()))
    assert data["model"] == "torch-cuda" and data["oom"]["op"] == "n0"
    assert "trace" not in r.to_dict(trace=False)


# -- invariants on random DAGs and stream assignments ----------------------------------------
def _random_topological_order(graph, rnd):
    preds = graph.pred_positions()
    indeg = [len(p) for p in preds]
    succs = graph.succ_positions()
    ready = [i for i, d in enumerate(indeg) if d == 0]
    order = []
    while ready:
        i = ready.pop(rnd.randrange(len(ready)))
        order.append(graph.node_ids[i])
        for j in succs[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return order


def _toy_timeline(graph, schedule, rnd):
    """Host launches every 0.1 ms; an op starts after its stream, its waits and its launch."""
    end: dict[str, float] = {}
    stream_end: dict[int, float] = {}
    waits = schedule.waits_before()
    spans = {}
    for i, op in enumerate(schedule.launch_order):
        s = schedule.streams[op]
        launch = 0.1 * i
        start = max([launch, stream_end.get(s, 0.0)] + [end[u] for u in waits.get(op, ())])
        end[op] = stream_end[s] = start + rnd.uniform(0.01, 2.0)
        spans[op] = (s, launch, end[op])
    return timeline(spans)


@given(random_dags(max_nodes=12, vary_sizes=True), st.randoms(use_true_random=False), st.booleans())
@settings(max_examples=60, deadline=None)
def test_allocator_invariants_on_random_schedules(graph, rnd, with_timeline):
    order = _random_topological_order(graph, rnd)
    streams = {op: rnd.randrange(3) for op in order}
    s = sched(graph, streams, order)
    tl = _toy_timeline(graph, s, rnd) if with_timeline else None
    exact = replay(graph, s, "exact")
    for model in MODELS:
        r = replay(graph, s, model, timeline=tl)
        assert r.oom is None
        assert r.allocated_peak_bytes >= exact.allocated_peak_bytes
        assert r.reserved_peak_bytes >= r.allocated_peak_bytes
        for mine, ref in zip(r.trace, exact.trace, strict=True):
            assert mine.allocated_bytes >= ref.allocated_bytes >= 0
            assert mine.reserved_bytes >= mine.allocated_bytes
    one = sched(graph, dict.fromkeys(order, 0), order)  # one stream: a timeline changes nothing
    assert replay(graph, one).trace == replay(graph, one, timeline=_toy_timeline(graph, one, rnd)).trace


@given(
    st.lists(
        st.tuples(st.integers(0, 9), st.integers(1, 24 * MIB), st.integers(0, 1), st.booleans()), max_size=60
    )
)
@settings(max_examples=60, deadline=None)
def test_torch_cuda_blocks_tile_the_reserved_bytes(ops):
    """Random mallocs/frees (some held): free + held + allocated == reserved, free lists sorted, merged."""
    alloc = TorchCudaAllocator()
    live: dict[int, object] = {}
    for t, (slot, nbytes, stream, held) in enumerate(ops):
        if slot in live:
            alloc.free(live.pop(slot), t + 3.0 if held else None)
        else:
            live[slot] = alloc.malloc(nbytes, stream, float(t))
        alloc.check()
        assert alloc.reserved_bytes <= alloc.reserved_peak_bytes
