"""Every sentence ``explain`` builds is checked against the figures it prints: counts, sizes,
op names and which ops may overlap, over the zoo and random graphs, for several policies."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings

from helpers.dags import random_dags
from helpers.models import graph_of
from streamplan.app.context import make_context
from streamplan.app.explain import ExplainResult, explain_policy
from streamplan.ir.graph import Graph
from streamplan.memory.conflicts import may_coexist
from streamplan.memory.explain import PeakComparison, PeakExplanation
from streamplan.memory.liveness import Liveness, liveness
from streamplan.memory.worst_case import live_bytes_at
from streamplan.report.views import explain_lines

MIB = 1 << 20
WORDS = {
    w: i
    for i, w in enumerate(
        ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    )
}


def number(word: str) -> int:
    return WORDS[word] if word in WORDS else int(word)


def mib(text: str) -> float:
    return float(text)


def close(figure_bytes: int | None, text: str) -> bool:
    return figure_bytes is not None and abs(figure_bytes / MIB - mib(text)) < 0.0005 + 1e-12


def check_explanation(graph: Graph, e: PeakExplanation, schedule) -> int:
    """Check each note of one schedule's explanation; returns how many sentences were checked."""
    r, wc, arena = e.report, e.report.worst_case, e.report.arena
    live = liveness(graph, schedule, includes=r.includes)
    by = live.by_storage()
    checked = 0
    for note in e.notes:
        if m := re.match(r"(\w+) tensors \((.*?)\) may pairwise be live together", note):
            shown, _, more = m.group(2).partition(" and ")
            names = shown.split(", ")
            hidden = int(more.removesuffix(" more")) if more else 0
            assert number(m.group(1)) == len(names) + hidden == len(arena.bound_storages), note
            assert set(names) <= set(arena.bound_storages), note
            for a, b in itertools.combinations(names, 2):
                assert may_coexist(live, by[a], by[b]), (note, a, b)
            if c := re.search(r"although at most (\w+) ever are at once", note):
                sizes = {s.nbytes for s in live.lives}
                assert len(sizes) == 1 and wc.exact, note
                assert number(c.group(1)) * sizes.pop() == wc.upper_bytes, note
            else:
                c = re.search(r"although at most ([\d.]+) MiB is ever live at once", note)
                assert c and close(wc.upper_bytes, c.group(1)), note
            f = re.search(
                r"no fixed placement fits in ([\d.]+) MiB: the static arena needs at least ([\d.]+) MiB", note
            )
            assert f and close(wc.upper_bytes, f.group(1)) and close(arena.lower_bound_bytes, f.group(2)), (
                note
            )
            assert arena.lower_bound_bytes > wc.upper_bytes
        elif m := re.match(
            r"the host-order estimate \(([\d.]+) MiB\) misses concurrency: "
            r"(?:while (\S+) runs|when (.*) run at once), ([\d.]+) MiB is live",
            note,
        ):
            assert close(r.host_order_peak_bytes, m.group(1)) and close(wc.lower_bytes, m.group(4)), note
            running = [m.group(2)] if m.group(2) else m.group(3).split(", ")
            assert tuple(running) == wc.running, note
            for u, v in itertools.combinations(running, 2):
                assert live.hb.concurrent(u, v), (note, u, v)  # they can run at once
            value, _ = live_bytes_at(live, set(wc.finished), set(wc.finished) | set(wc.running))
            assert value == wc.lower_bytes > r.host_order_peak_bytes, note
        elif m := re.match(r"the worst case is a proven interval \[([\d.]+) MiB, ([\d.]+) MiB\]", note):
            assert not wc.exact and close(wc.lower_bytes, m.group(1)) and close(wc.upper_bytes, m.group(2))
        else:
            raise AssertionError(f"a note the checker does not know: {note}")
        checked += 1
    return checked


def check_comparison(graph: Graph, c: PeakComparison, base, other) -> int:
    lb, lo = liveness(graph, base), liveness(graph, other)
    by = lb.by_storage()
    checked = 0
    for o in c.overlaps:
        assert o.u in by[o.first].users and o.v == by[o.second].creator, o
        assert lb.hb.hb(o.u, o.v), f"{o}: not ordered in the base"
        if o.reordered:
            assert lo.hb.hb(o.v, o.u), f"{o}: not reordered"
        else:
            assert lo.hb.concurrent(o.u, o.v), f"{o}: cannot run alongside"
        assert {o.first, o.second} <= set(c.other.report.worst_case.live)
        checked += 1
    text = "\n".join(c.lines())
    if m := re.search(r"(\d+) op pairs ordered in \S+ may overlap in", text):
        ids = graph.node_ids
        expect = sum(
            1
            for u, v in itertools.combinations(ids, 2)
            if not lb.hb.concurrent(u, v) and lo.hb.concurrent(u, v)
        )
        assert int(m.group(1)) == expect
        checked += 1
    if "does not raise the worst-case peak" in text:
        assert c.other.report.worst_case.upper_bytes <= c.base.report.worst_case.lower_bytes
        checked += 1
    # both sides were simulated: both show a simulated peak (in the table and in JSON)
    assert c.base.report.simulated is not None and c.other.report.simulated is not None
    assert re.search(r"simulated\s+[\d.]+ MiB ->\s+[\d.]+ MiB", text), text
    return checked + check_explanation(graph, c.base, base) + check_explanation(graph, c.other, other)


def check_simulated_note(graph: Graph, result: ExplainResult, live: Liveness) -> None:
    note, run = result.simulated.text, result.run
    report = (
        result.explanation.other.report
        if isinstance(result.explanation, PeakComparison)
        else result.explanation.report
    )
    m = re.match(r"simulated on \S+: peak ([\d.]+) MiB at [\d.]+ ms; (.*?)\. The timeline is", note)
    assert m and close(result.simulated.simulated_peak_bytes, m.group(1)), note
    assert result.simulated.simulated_peak_bytes == report.simulated_peak_bytes
    where, sim = m.group(2), result.simulated.simulated_peak_bytes
    wc, host = report.worst_case, report.host_order_peak_bytes
    if where.startswith("one stream"):
        assert run.schedule.num_streams < 2
        return
    if "reaches the worst case" in where:
        assert sim >= wc.upper_bytes
    elif "equals the host-order figure" in where:
        assert sim == host
    elif "stays below the host-order figure" in where:
        assert sim < host
    else:
        assert where.startswith("between the host-order and worst-case") and host < sim < wc.upper_bytes, note
    if (one := re.search(r"(\S+) runs alone at the peak", where)) is not None:
        assert live.hb.launch_index.get(one.group(1)) is not None
        assert "overlap" not in where
    elif (many := re.search(r"([\w, .]+) overlap at the peak", where)) is not None:
        ops = many.group(1).split(": ")[-1].lstrip("(").split(", ")
        assert len(ops) >= 2, note  # "x overlap" with one op was the grammar slip


def check_serial_note(graph: Graph, result: ExplainResult, live: Liveness) -> None:
    note = result.serial_peak_note
    if note is None:
        return
    m = re.match(r"note: the peak occurs while (.*) runs, and no op may run concurrently", note)
    assert m, note
    for u in m.group(1).split(", "):
        assert not any(live.hb.concurrent(u, v) for v in graph.node_ids if v != u), note


def check_everything(graph: Graph, policy: str, vs: str | None) -> int:
    ctx = make_context(device="v100", max_streams=4, time_limit_s=5)
    result = explain_policy(graph, policy, ctx, vs=vs)
    live = liveness(graph, result.run.schedule)
    explain_lines(result)  # renders
    if isinstance(result.explanation, PeakComparison):
        from streamplan.app.analysis import run_policy

        base = run_policy(graph, vs, ctx).schedule
        n = check_comparison(graph, result.explanation, base, result.run.schedule)
        assert result.to_dict()["base"]["memory"]["simulated_peak_bytes"] is not None
    else:
        n = check_explanation(graph, result.explanation, result.run.schedule)
    check_simulated_note(graph, result, live)
    check_serial_note(graph, result, live)
    return n


@pytest.mark.parametrize(
    "spec", ["seed-example1", "seed-example2", "seed-concat", "random:60", "random:300:7"]
)
@pytest.mark.parametrize("policy,vs", [("asap", "sequential"), ("wavefront", None), ("nimble", "memory")])
def test_explain_sentences_hold_on_the_zoo_graphs(spec, policy, vs):
    check_everything(graph_of(spec), policy, vs)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["squeezenet", "inception_v3"])
def test_explain_sentences_hold_on_captured_models(spec):
    assert check_everything(graph_of(spec), "asap", "sequential") >= 1


def test_seed_concat_counts_bytes_when_tensor_sizes_differ():
    result = explain_policy(graph_of("seed-concat"), "asap", make_context(), vs="sequential")
    text = "\n".join(explain_lines(result))
    assert "at most three ever are at once" not in text
    assert "at most 4.000 MiB is ever live at once" in text


@settings(max_examples=40)
@given(random_dags(min_nodes=2, max_nodes=10, vary_sizes=True))
def test_explain_sentences_hold_on_random_dags(graph):
    check_everything(graph, "asap", "sequential")


@settings(max_examples=25)
@given(random_dags(min_nodes=2, max_nodes=10))
def test_explain_sentences_hold_on_random_dags_of_one_size(graph):
    check_everything(graph, "wavefront", "memory")
