"""Collectives in the IR: built, verified, printed and round-tripped through JSON; schedules with
host waits and without record_stream: JSON, printing, structure and the verifier."""

from __future__ import annotations

import pytest

from streamplan.errors import FileFormatError, GraphError, ScheduleError
from streamplan.ir import Graph, Node, StreamSchedule, Value, Wait, dumps, loads, structure_problems, verify
from streamplan.ir.collectives import collective_node, collective_of, collectives, is_collective
from streamplan.ir.printer import format_graph
from streamplan.schedule.verify import schedule_problems, verify_schedule

MIB = 1 << 20


def sharded(ranks: int = 4, all_reduce: bool = False) -> Graph:
    """shard (param) -> all-gather -> full; full * x -> y; y -> reduce-scatter -> g (or all-reduce)."""
    vals = {
        "shard": Value("shard", (256,), "float32", 1024, "param"),
        "x": Value("x", (256 * ranks,), "float32", 1024 * ranks, "input"),
        "full": Value("full", (256 * ranks,), "float32", 1024 * ranks),
        "y": Value("y", (256 * ranks,), "float32", 1024 * ranks),
        "g": Value("g", (256,), "float32", 1024),
    }
    nodes = [
        collective_node(
            "ag",
            "all_gather",
            "shard",
            "full",
            group="dp",
            group_size=ranks,
            source_bytes=1024,
            output_bytes=1024 * ranks,
        ),
        Node(
            "mul",
            "aten.mul.Tensor",
            ("full", "x"),
            ("y",),
            bytes_read=2048 * ranks,
            bytes_written=1024 * ranks,
        ),
    ]
    if all_reduce:
        vals["g"] = Value("g", (256 * ranks,), "float32", 1024 * ranks, storage="y")
        nodes.append(
            collective_node(
                "ar",
                "all_reduce",
                "y",
                "g",
                group="dp",
                group_size=ranks,
                source_bytes=1024 * ranks,
                output_bytes=1024 * ranks,
            )
        )
    else:
        nodes.append(
            collective_node(
                "rs",
                "reduce_scatter",
                "y",
                "g",
                group="dp",
                group_size=ranks,
                source_bytes=1024 * ranks,
                output_bytes=1024,
            )
        )
    return Graph("sharded", tuple(nodes), vals, ("x",), ("shard",), ("g",))


@pytest.mark.parametrize("all_reduce", [False, True])
def test_collectives_verify_and_round_trip(all_reduce):
    g = verify(sharded(all_reduce=all_reduce))
    assert loads(dumps(g)) == g
    kinds = [collective_of(g, n).kind for n in collectives(g)]
    assert kinds == ["all_gather", "all_reduce" if all_reduce else "reduce_scatter"]
    ag = collective_of(g, g.node("ag"))
    assert (ag.group, ag.group_size, ag.full_bytes, ag.shard_bytes) == ("dp", 4, 4096, 1024)
    assert not is_collective(g.node("mul"))


def test_printer_names_the_group():
    text = format_graph(sharded())
    assert "comm.all_gather(%shard)  # ag [group dp of 4]" in text


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda n: Node(n.id, n.op, n.inputs, n.outputs, {**n.attrs, "group_size": 3}), "shard over 3"),
        (lambda n: Node(n.id, n.op, n.inputs, n.outputs, {**n.attrs, "group_size": 0}), "group_size 0"),
        (lambda n: Node(n.id, "comm.broadcast", n.inputs, n.outputs, n.attrs), "unknown collective"),
        (lambda n: Node(n.id, n.op, n.inputs, n.outputs, {"group_size": 4}), "names no process group"),
    ],
)
def test_the_verifier_names_a_broken_collective(change, message):
    g = sharded()
    broken = g.replace(nodes=(change(g.nodes[0]), *g.nodes[1:]))
    with pytest.raises(GraphError, match=message):
        verify(broken)


def test_an_all_reduce_must_be_in_place():
    g = sharded(all_reduce=True)
    ar = g.node("ar")
    values = {**g.values, "g": Value("g", (1024,), "float32", 4096)}
    broken = g.replace(
        values=values, nodes=(*g.nodes[:2], Node(ar.id, ar.op, ar.inputs, ar.outputs, ar.attrs))
    )
    with pytest.raises(GraphError, match="in place"):
        verify(broken)


# -- schedules: host waits and record_stream ------------------------------------------------
def three_streams() -> StreamSchedule:
    return StreamSchedule(
        ("ag", "mul", "rs"),
        {"ag": 1, "mul": 0, "rs": 2},
        (Wait("ag", "mul"), Wait("mul", "rs")),
        "custom",
        host_waits=(Wait("ag", "rs"),),
    )


def test_host_waits_round_trip_and_print():
    s = three_streams()
    back = StreamSchedule.from_dict(s.to_dict())
    assert back == s and back.host_waits == s.host_waits and hash(back) == hash(s)
    assert back != s.replace(host_waits=())
    text = str(s)
    assert "1 host waits" in text and "host-wait(e0) @s2 wait(e1) rs" in text
    plain = s.replace(record_stream=False)
    assert StreamSchedule.from_dict(plain.to_dict()).record_stream is False
    assert "record_stream" not in s.to_dict() and "host_waits" not in s.replace(host_waits=()).to_dict()


def test_older_files_without_host_waits_still_load():
    data = three_streams().replace(host_waits=()).to_dict()
    assert StreamSchedule.from_dict(data).host_waits == ()
    with pytest.raises(FileFormatError, match="record_stream"):
        StreamSchedule.from_dict({**data, "record_stream": "yes"})


def test_a_host_wait_on_a_later_launch_is_a_deadlock():
    s = three_streams().replace(host_waits=(Wait("rs", "mul"),))
    assert any("wait forever" in p for p in structure_problems(sharded(), s))
    with pytest.raises(ScheduleError, match="deadlock"):
        verify_schedule(sharded(), s)


def test_a_host_wait_orders_what_is_launched_after_it():
    g = sharded()
    # rs reads y from mul on another stream: no device wait, but the host waited for mul
    s = StreamSchedule(("ag", "mul", "rs"), {"ag": 1, "mul": 0, "rs": 2}, (Wait("ag", "mul"),))
    assert any("not ordered" in p for p in schedule_problems(g, s))
    assert schedule_problems(g, s.replace(host_waits=(Wait("mul", "rs"),))) == []
    # the equivalent device waits say the same order
    ordered = s.replace(host_waits=(Wait("mul", "rs"),))
    assert Wait("mul", "rs") in ordered.ordering_waits()


def test_freeing_without_record_stream_needs_the_reuse_ordered():
    # full is made on stream 1 and read on stream 0; the next op on stream 1 may reuse its block
    g = sharded()
    s = StreamSchedule(
        ("ag", "mul", "rs"), {"ag": 1, "mul": 0, "rs": 1}, (Wait("ag", "mul"), Wait("mul", "rs"))
    )
    assert schedule_problems(g, s.replace(record_stream=False)) == []  # rs waits for mul: safe
    g2 = g.replace(
        nodes=(
            *g.nodes,
            Node("other", "aten.neg.default", ("shard",), ("o",), bytes_read=1024, bytes_written=1024),
        ),
        values={**g.values, "o": Value("o", (256,), "float32", 1024)},
        outputs=("g", "o"),
    )
    s2 = StreamSchedule(
        ("ag", "mul", "other", "rs"),
        {"ag": 1, "mul": 0, "other": 1, "rs": 2},
        (Wait("ag", "mul"), Wait("mul", "rs")),
    )
    problems = schedule_problems(g2, s2.replace(record_stream=False))
    assert any("without record_stream" in p and "other" in p for p in problems)
    assert schedule_problems(g2, s2) == []
