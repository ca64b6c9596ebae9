"""Measured latency tables: signatures, overrides and the JSON round trip."""

from __future__ import annotations

import json

import pytest

from streamplan.cost import AnalyticCostModel, MeasuredCostModel, MeasuredTable, op_signature, simulate
from streamplan.errors import FileFormatError
from streamplan.frontends.builder import GraphBuilder
from streamplan.ir.schedule import StreamSchedule


def two_convs():
    b = GraphBuilder("convs")
    x = b.input("x", (1, 16, 32, 32))
    c1 = b.conv2d(x, 16, 3, padding=1, name="c1")
    c2 = b.conv2d(c1, 16, 3, padding=1, name="c2")
    c3 = b.conv2d(c2, 16, 1, name="c3")
    return b.build([c3])


def test_signature_names_op_shapes_and_key_args():
    g = two_convs()
    s1, s2, s3 = (op_signature(g, g.node(n)) for n in ("c1", "c2", "c3"))
    assert s1 == s2  # same op, shapes and arguments
    assert s1 != s3  # 1x1 kernel: different weight shape
    assert s1.startswith("aten.convolution.default(1x16x32x32:float32,16x16x3x3:float32")
    assert "[1,1]" in s1  # stride / padding are part of the signature


def test_measured_times_override_the_analytic_model(tmp_path):
    g = two_convs()
    sig = op_signature(g, g.node("c1"))
    table = MeasuredTable("v100", {sig: 0.5})
    path = tmp_path / "measured.json"
    table.save(path)
    data = json.loads(path.read_text())
    assert data["schema"] == "streamplan.measured" and data["ops"] == {sig: 0.5}
    assert MeasuredTable.load(path) == table
    model = MeasuredCostModel(path)
    analytic = AnalyticCostModel("v100")
    assert model.op_time_ms(g, g.node("c1")) == 0.5 and model.op_time_ms(g, g.node("c2")) == 0.5
    assert model.op_time_ms(g, g.node("c3")) == analytic.op_time_ms(g, g.node("c3"))
    assert model.occupancy(g, g.node("c1")) == analytic.occupancy(g, g.node("c1"))
    tl = simulate(g, StreamSchedule(g.node_ids, {n: 0 for n in g.node_ids}), model)
    assert tl.span("c2").end_ms - tl.span("c2").start_ms == pytest.approx(0.5)


def test_plain_dict_table_and_fallback_device():
    g = two_convs()
    model = MeasuredCostModel({op_signature(g, g.node("c3")): 0.25}, fallback="a100")
    assert model.op_time_ms(g, g.node("c3")) == 0.25
    assert model.fallback.device_name == "a100"


def test_malformed_tables_are_file_format_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other", "ops": {}}')
    with pytest.raises(FileFormatError, match="schema"):
        MeasuredTable.load(bad)
    bad.write_text("not json")
    with pytest.raises(FileFormatError, match="not valid JSON"):
        MeasuredTable.load(bad)
    with pytest.raises(FileFormatError, match="cannot read"):
        MeasuredTable.load(tmp_path / "missing.json")
