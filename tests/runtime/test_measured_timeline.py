"""The CPU runtime's measured timeline: it respects the program and feeds a measured table."""

from __future__ import annotations

from streamplan.cost.measured import MeasuredCostModel, MeasuredTable, measured_op_times, op_signature
from streamplan.cost.simulate import simulate
from streamplan.models import load_model
from streamplan.runtime import run
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext


def test_measured_spans_respect_streams_and_data():
    g = load_model("random:60")
    s = make_schedule(g, "asap", ScheduleContext(max_streams=4))
    result = run(g, s, chaos=True, chaos_seed=3, repeat=2)
    assert len(result.timelines) == 2
    tl = result.timeline
    spans = tl.by_op()
    assert set(spans) == set(g.node_ids) and tl.device == "cpu (measured)"
    for p, c in g.edges():  # a consumer starts only after its producer ended
        assert spans[c].start_ms >= spans[p].end_ms, (p, c)
    for stream in set(s.streams.values()):  # one thread per stream: no overlap, launch order
        ops = s.ops_on_stream(stream)
        for a, b in zip(ops, ops[1:], strict=False):
            assert spans[a].end_ms <= spans[b].launch_ms <= spans[b].start_ms
            assert spans[a].stream == spans[b].stream == stream
    assert tl.makespan_ms == max(sp.end_ms for sp in tl.spans)
    assert sum(tl.stream_busy_ms.values()) <= len(tl.stream_busy_ms) * tl.makespan_ms


def test_in_situ_table_reproduces_a_sequential_run():
    g = load_model("seed-example2")
    seq = make_schedule(g, "sequential")
    result = run(g, seq, repeat=3)
    ops = measured_op_times(g, result.timelines)
    assert set(ops) == {op_signature(g, n) for n in g.nodes}
    model = MeasuredCostModel(MeasuredTable("cpu", ops), fallback="cpu")
    simulated = simulate(g, seq, model)
    assert model.coverage(g) == (len(g.nodes), 0)
    busy = sum(ops[op_signature(g, n)] for n in g.nodes)
    assert simulated.makespan_ms >= busy  # the ops back to back, plus launch overhead
