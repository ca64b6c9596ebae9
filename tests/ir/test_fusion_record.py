"""A schedule's fusion record is a typed field: part of its identity and of its JSON, and files
saved when the record lived in ``meta["fusion"]`` still read."""

import json

from streamplan.fusion.plan import graph_for_schedule, schedule_with_fusion
from streamplan.ir.schedule import Fusion, StreamSchedule
from streamplan.models import load_model
from streamplan.schedule.context import ScheduleContext


def _fused(mode: str = "first") -> StreamSchedule:
    g = load_model("seed-concat")
    return schedule_with_fusion(g, "asap", ScheduleContext(fusion=mode)).schedule


def test_the_record_takes_part_in_equality_and_hashing():
    s = _fused()
    assert s.fusion is not None and s.fusion_mode is Fusion.FIRST
    plain = s.replace(fusion=None)
    assert s != plain and hash(s) != hash(plain)
    assert s == StreamSchedule.from_dict(json.loads(s.dumps())) and len({s, s.with_meta(x=1)}) == 1
    assert "fusion" not in s.meta and json.loads(s.dumps())["fusion"]["mode"] == "first"


def test_a_schedule_saved_with_the_record_in_meta_still_reads(tmp_path):
    s = _fused("stream-aware")
    old = s.to_dict()
    old["meta"]["fusion"] = old.pop("fusion")  # how schedules were saved before the typed field
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    loaded = StreamSchedule.load(path)
    assert loaded == s and loaded.fusion_mode is Fusion.STREAM_AWARE and "fusion" not in loaded.meta
    g = load_model("seed-concat")
    assert len(graph_for_schedule(g, loaded).graph.nodes) == 3  # the kernels rebuilt from the record
