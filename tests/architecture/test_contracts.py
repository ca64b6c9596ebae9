"""The contracts the rest of the code leans on: one way to call a policy, immutable data, typed results."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from streamplan.cost import FakeCostModel, MeasuredCostModel, MeasuredTable, op_signature
from streamplan.errors import ScheduleError
from streamplan.ir import Node, StreamSchedule, Wait
from streamplan.models import load_model
from streamplan.schedule import POLICIES, ScheduleContext, get_policy, make_schedule


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_rejects_an_unknown_option(policy):
    g = load_model("seed-example2")
    with pytest.raises(ScheduleError, match="no option 'max_stream'"):
        make_schedule(g, policy, ScheduleContext(options={"max_stream": 1}))


def test_make_schedule_has_no_side_door_for_options():
    g = load_model("seed-example2")
    with pytest.raises(TypeError):
        make_schedule(g, "nimble", max_stream=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_has_the_one_signature(policy):
    g = load_model("seed-concat")
    s = get_policy(policy)(g, ScheduleContext(max_streams=2))
    assert isinstance(s, StreamSchedule) and s.num_streams <= 2


def test_ios_searches_on_the_measured_table_it_is_given():
    """Two tables that differ only in op times make the IOS search choose differently."""
    g = load_model("seed-example2")  # a -> {b -> d, c -> e} -> f
    sig = {n.id: op_signature(g, n) for n in g.nodes}
    assert len(set(sig.values())) < len(sig)  # several ops share a signature: time them all alike

    def table(ms: float) -> MeasuredCostModel:
        return MeasuredCostModel(MeasuredTable("fake", dict.fromkeys(sig.values(), ms)), fallback="v100")

    # microsecond ops: launches dominate, one stream wins; millisecond ops: the branches overlap
    fast = make_schedule(g, "ios", ScheduleContext(cost=table(0.0005)))
    slow = make_schedule(g, "ios", ScheduleContext(cost=table(2.0)))
    assert fast.num_streams == 1
    assert slow.num_streams == 2
    assert fast.meta["device"] == slow.meta["device"] == "fake"


def test_ios_search_uses_the_context_cost_model_not_a_profile():
    g = load_model("seed-example2")
    s = make_schedule(g, "ios", ScheduleContext(cost=FakeCostModel(1.0, occupancy=0.5)))
    assert s.meta["predicted_ms"] == 4.0 and s.num_streams == 2


def test_graph_is_read_only_and_hashable():
    g = load_model("seed-example2")
    with pytest.raises(TypeError):
        g.values["z"] = g.values["a"]  # type: ignore[index]
    with pytest.raises(TypeError):
        g.meta["x"] = 1  # type: ignore[index]
    with pytest.raises((TypeError, AttributeError)):
        g.pred_positions()[0] = ()  # type: ignore[index]
    assert hash(g) == hash(load_model("seed-example2"))
    node = g.nodes[0]
    assert isinstance(hash(node), int) and node in {node}
    with pytest.raises(TypeError):
        node.attrs["x"] = 1  # type: ignore[index]
    assert Node("n", "op", (), ("v",), attrs={"args": [1, 2]}) == Node(
        "n", "op", (), ("v",), attrs={"args": [1, 2]}
    )


def test_read_only_mappings_still_serialise_copy_and_pickle():
    g = load_model("seed-example2")
    s = make_schedule(g, "asap")
    assert pickle.loads(pickle.dumps(g)) == g
    assert copy.deepcopy(s) == s
    assert json.loads(s.dumps())["streams"] == dict(s.streams)
    with pytest.raises(TypeError):
        s.streams["a"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        s.meta["x"] = 1  # type: ignore[index]
    assert len({s, s.with_meta(note="x")}) == 1  # meta is not part of the identity


def test_schedule_file_with_bad_streams_is_a_clear_error(tmp_path):
    from streamplan.errors import FileFormatError

    p = tmp_path / "s.json"
    p.write_text(json.dumps({"launch_order": ["a"], "streams": {"a": -1}, "waits": []}))
    with pytest.raises(FileFormatError, match="stream is an int >= 0"):
        StreamSchedule.load(p)
    p.write_text(
        json.dumps({"launch_order": ["a"], "streams": {"a": 0}, "waits": [{"after": 1, "before": "a"}]})
    )
    with pytest.raises(FileFormatError, match="expected a string"):
        StreamSchedule.load(p)
    assert Wait("a", "b") == Wait("a", "b")


def test_typed_results_cross_boundaries():
    from streamplan.app import compare_policies, make_context

    g = load_model("seed-example2")
    rows = compare_policies(g, ["sequential", "asap"], make_context(device="v100"))
    asap = rows[1]
    assert asap.memory is not None and asap.memory.worst_case.upper_bytes == 4 << 20
    bad = compare_policies(g, ["ios"], make_context(device="v100").replace(options={"nope": 1}))[0]
    assert bad.error and bad.makespan_ms is None and json.dumps(bad.to_dict(), allow_nan=False)
