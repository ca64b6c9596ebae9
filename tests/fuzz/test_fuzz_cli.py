"""Fuzzed inputs through the command line: mutated graph JSON, schedule JSON and measured tables
(deleted keys, wrong types, huge/negative/NaN numbers, duplicated ids, unicode, cycles, truncated
files). Every outcome is exit 0, 1 or 2 with a message: never an internal error, a traceback
or a hang.

The CLI runs in this process (``helpers.cli.cli``) so hundreds of examples fit in seconds; a
few run as real processes. ``STREAMPLAN_HYPOTHESIS=stress`` runs thousands.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.cli import cli, sp
from streamplan.cost.measured import MeasuredTable, op_signature
from streamplan.ir.serialize import dumps
from streamplan.models import load_model
from streamplan.schedule.registry import make_schedule

STRESS = os.environ.get("STREAMPLAN_HYPOTHESIS") == "stress"
EXAMPLES = 1500 if STRESS else 90
SECONDS_PER_RUN = 30  # far above what any of these inputs needs: more is a hang

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not STRESS,
    suppress_health_check=list(HealthCheck),
)

WEIRD_NUMBERS = [-1, 0, 1, -(2**63), 2**63, 2**64 + 1, 10**30, -(10**30), 1e308, -1e-308, 0.5, 3.7]
WEIRD_TEXT = ["", " ", "ñandú", "\u202eevil", "💥", "\x00", "a" * 300, "../../etc/passwd", "$v", "x:y"]


def weird_values():
    return st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from(WEIRD_NUMBERS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(WEIRD_TEXT),
        st.text(max_size=8),
        st.lists(st.integers(-3, 3), max_size=3),
        st.dictionaries(st.sampled_from(["$v", "id", "a"]), st.integers(-2, 2), max_size=2),
    )


def _paths(doc, prefix=()):
    """Every (container, key) in ``doc``, depth first."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


@st.composite
def mutated(draw, base: dict, special=None) -> str:
    """``base`` with one to three mutations, as JSON text (perhaps NaN, perhaps truncated)."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        if not paths:
            break
        op = draw(st.sampled_from(["delete", "retype", "number", "text", "duplicate", "swap", "special"]))
        path = draw(st.sampled_from(paths))
        parent, key = _get(doc, path[:-1]), path[-1]
        if op == "delete":
            del parent[key]
        elif op == "retype":
            parent[key] = draw(weird_values())
        elif op == "number":
            numeric = [
                p
                for p in paths
                if isinstance(_get(doc, p), (int, float)) and not isinstance(_get(doc, p), bool)
            ]
            if numeric:
                p = draw(st.sampled_from(numeric))
                _get(doc, p[:-1])[p[-1]] = draw(st.sampled_from([*WEIRD_NUMBERS, math.nan, math.inf]))
        elif op == "text":
            texts = [p for p in paths if isinstance(_get(doc, p), str)]
            if texts:
                p = draw(st.sampled_from(texts))
                _get(doc, p[:-1])[p[-1]] = draw(st.sampled_from(WEIRD_TEXT))
        elif op == "duplicate":
            lists = [p for p in paths if isinstance(_get(doc, p), list) and _get(doc, p)]
            if lists:
                lst = _get(doc, draw(st.sampled_from(lists)))
                lst.append(copy.deepcopy(lst[draw(st.integers(0, len(lst) - 1))]))
        elif op == "swap":
            lists = [p for p in paths if isinstance(_get(doc, p), list) and len(_get(doc, p)) > 1]
            if lists:
                lst = _get(doc, draw(st.sampled_from(lists)))
                i, j = draw(st.integers(0, len(lst) - 1)), draw(st.integers(0, len(lst) - 1))
                lst[i], lst[j] = lst[j], lst[i]
        elif op == "special" and special is not None:
            special(draw, doc)
    text = json.dumps(doc, allow_nan=True)
    if draw(st.integers(0, 9)) == 0:  # a file cut short
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    return text


def _cycle(draw, doc):
    """Make an op read what a later op writes (a cycle, or a use before the producer)."""
    nodes = doc.get("nodes")
    if isinstance(nodes, list) and len(nodes) > 2 and all(isinstance(n, dict) for n in nodes):
        i = draw(st.integers(0, len(nodes) - 2))
        j = draw(st.integers(i + 1, len(nodes) - 1))
        outs = nodes[j].get("outputs")
        if isinstance(outs, list) and outs and isinstance(nodes[i].get("inputs"), list):
            nodes[i]["inputs"] = [*nodes[i]["inputs"], outs[0]]


def assert_clean(r, *, allowed=(0, 1, 2)) -> None:
    assert r.returncode in allowed, r
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r
    if r.returncode:
        assert r.stderr.strip() or r.stdout.strip(), r  # a message says why


def run_timed(*args) -> None:
    t0 = time.perf_counter()
    r = cli(*args)
    assert time.perf_counter() - t0 < SECONDS_PER_RUN, f"{args} took too long"
    assert_clean(r)
    if "--json" in args and r.stdout.strip():
        json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))


GRAPH = json.loads(dumps(load_model("seed-example2")))  # plain dicts and lists
RANDOM_GRAPH = json.loads(dumps(load_model("random:12:3")))
SCHEDULE = json.loads(make_schedule(load_model("seed-example2"), "asap").dumps())
_g = load_model("seed-example2")
TABLE = MeasuredTable(
    "v100",
    {op_signature(_g, n): 0.01 * (i + 1) for i, n in enumerate(_g.nodes)},
    {op_signature(_g, _g.nodes[0]): 4096},
    1 << 20,
).to_dict()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(st.data())
def test_mutated_graph_files(workdir, data):
    base = data.draw(st.sampled_from([GRAPH, RANDOM_GRAPH]))
    path = workdir / "graph.json"
    path.write_text(data.draw(mutated(base, _cycle)), encoding="utf-8", errors="surrogatepass")
    command = data.draw(st.sampled_from(["show", "memory", "compare", "explain", "schedule"]))
    extra = {
        "show": ["--json"],
        "memory": ["--policy", "asap", "--json"],
        "compare": ["--policies", "sequential,asap", "--json"],
        "explain": ["--policy", "asap"],
        "schedule": ["--policy", "nimble", "--json"],
    }[command]
    run_timed(command, path, *extra)


@FUZZ
@given(st.data())
def test_mutated_schedule_files(workdir, data):
    path = workdir / "schedule.json"
    path.write_text(data.draw(mutated(SCHEDULE)), encoding="utf-8", errors="surrogatepass")
    command = data.draw(st.sampled_from(["verify", "memory", "simulate", "explain", "compare"]))
    if command == "verify":
        run_timed("verify", "seed-example2", path, "--json")
    else:
        run_timed(command, "seed-example2", "--schedule", path, *(["--json"] if command != "explain" else []))


@FUZZ
@given(st.data())
def test_mutated_measured_tables(workdir, data):
    path = workdir / "measured.json"
    path.write_text(data.draw(mutated(TABLE)), encoding="utf-8", errors="surrogatepass")
    command = data.draw(st.sampled_from(["simulate", "memory"]))
    run_timed(command, "seed-example2", "--measured", path, "--policy", "asap", "--json")


@pytest.mark.parametrize(
    "name,text",
    [
        ("truncated", json.dumps(GRAPH)[:200]),
        (
            "nan",
            json.dumps({**GRAPH, "values": [{**GRAPH["values"][0], "nbytes": math.nan}]}, allow_nan=True),
        ),
        ("binary", None),
        ("empty", ""),
    ],
)
def test_broken_graph_files_in_a_real_process(tmp_path, name, text):
    p = tmp_path / f"{name}.json"
    if text is None:
        p.write_bytes(b"\xff\xfe\x00garbage")
    else:
        p.write_text(text)
    r = sp("memory", str(p), "--json", timeout=120)
    assert_clean(r, allowed=(2,))
    assert json.loads(r.stdout)["error"]["message"]


def test_broken_schedule_and_table_in_a_real_process(tmp_path):
    s = tmp_path / "s.json"
    s.write_text(json.dumps({**SCHEDULE, "waits": [{"after": "f", "before": "a"}]}))
    assert_clean(sp("memory", "seed-example2", "--schedule", str(s), timeout=120), allowed=(2,))
    t = tmp_path / "t.json"
    t.write_text(json.dumps({**TABLE, "ops": {k: "nan" for k in TABLE["ops"]}}))
    assert_clean(sp("simulate", "seed-example2", "--measured", str(t), timeout=120), allowed=(2,))


@pytest.mark.parametrize("recorded", [None, "fast", math.inf, True, [1]])
def test_a_saved_schedule_whose_meta_says_anything(tmp_path, recorded):
    """Found by the fuzz: ``meta`` of a saved schedule is the user's text, not trusted numbers."""
    p = tmp_path / "s.json"
    p.write_text(
        json.dumps({**SCHEDULE, "meta": {**SCHEDULE["meta"], "search_time_s": recorded}}, allow_nan=True)
    )
    r = cli("compare", "seed-example2", "--schedule", p, "--json")
    if recorded is math.inf:
        assert_clean(r, allowed=(2,))  # Infinity is not JSON
    else:
        assert_clean(r, allowed=(0,))
