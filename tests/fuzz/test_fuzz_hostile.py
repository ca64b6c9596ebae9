"""Hostile files through the command line: injection payloads (quotes, newlines, ``__import__``,
``**{}``, backslashes, unicode separators and bidi controls, HTML and terminal markup, ``../``) in
the string fields of graph, schedule, measured-table and sweep files.

What must hold for every example: no payload runs (``SENTINEL``, which the code payloads would
create, never appears); a generated module holds only what codegen writes (checked without
codegen's own checker) and runs on the CPU like the graph; the HTML report has no tag or
handler of the file's; a trace gives the names back exactly; and a file that is refused exits
2 with one message naming the field. Names (graph, node, value, weight, policy) are data and
are accepted; payloads in fields codegen cannot write (keyword names, dtypes, ops, output
indices) are refused, or reach the module as plain string literals.

The CLI runs in this process (``helpers.cli.cli``); each test keeps to a few dozen examples
(seconds); ``make fuzz`` (``STREAMPLAN_HYPOTHESIS=stress``) runs twenty times as many.
"""

from __future__ import annotations

import html.parser
import json
import os

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from helpers.cli import cli
from helpers.codegen import generated_class, graph_leaves, import_source
from helpers.hostile import (
    FIELD_WORDS,
    FIELDS,
    PAYLOADS,
    SENTINEL,
    SPEC,
    inject,
    module_violations,
    rename_node,
    rename_value,
)
from streamplan.codegen import generate_module
from streamplan.cost.measured import MeasuredTable, op_signature
from streamplan.ir.serialize import dumps, graph_from_dict
from streamplan.models import load_model
from streamplan.runtime import compare_outputs
from streamplan.runtime.compare import _flat_tensors, _graph_order_reference
from streamplan.schedule import make_schedule
from streamplan.sweep import SweepSpec
from streamplan.sweep.sweep_file import load_sweep_file

STRESS = os.environ.get("STREAMPLAN_HYPOTHESIS") == "stress"


def examples(n: int):
    return settings(
        max_examples=n * (20 if STRESS else 1),
        deadline=None,
        derandomize=not STRESS,
        suppress_health_check=list(HealthCheck),
    )


GRAPH = load_model(SPEC)
BASE = json.loads(dumps(GRAPH))
REFERENCE = generate_module(GRAPH, make_schedule(GRAPH, "asap"))
_UNDERSCORED = graph_from_dict({**BASE, "param_names": {**BASE["param_names"], "p_fc_bias": "_fc.bias"}})
# a weight whose name cannot name a module's child: load_weights translates names (RENAMED)
REFERENCES = (REFERENCE, generate_module(_UNDERSCORED, make_schedule(_UNDERSCORED, "asap")))
SCHEDULE = json.loads(make_schedule(GRAPH, "nimble").dumps())
TABLE = MeasuredTable("v100", {op_signature(GRAPH, n): 0.01 for n in GRAPH.nodes}, {}, 1 << 20).to_dict()
VALUES = [v["id"] for v in BASE["values"]]
NODES = [n["id"] for n in BASE["nodes"]]

payloads = st.sampled_from(PAYLOADS) | st.builds(
    lambda p, t: p + t, st.sampled_from(PAYLOADS), st.text(min_size=1, max_size=4)
)


@st.composite
def hostile_graphs(draw, field: str | None = None) -> tuple[dict, str | None]:
    """The hostile model's JSON with one to three names replaced by payloads (consistently: the
    graph stays valid) and, given a ``field``, a payload put into that field of a node's call;
    returns the JSON and the word a refusal must name (None: the file must be accepted)."""
    doc = BASE
    for k in range(draw(st.integers(1, 3))):
        p = draw(payloads) + f"~{k}"  # unique: two names never collide
        what = draw(st.sampled_from(["graph", "node", "value", "weight"]))
        if what == "graph":
            doc = {**doc, "name": p}
        elif what == "node":
            doc = rename_node(doc, draw(st.sampled_from([n["id"] for n in doc["nodes"]])), p)
        elif what == "value":
            doc = rename_value(doc, draw(st.sampled_from([v["id"] for v in doc["values"]])), p)
        else:
            key = draw(st.sampled_from(sorted(doc["param_names"])))
            doc = {**doc, "param_names": {**doc["param_names"], key: p.replace(".", "_")}}
    if field is None:
        return doc, None
    return inject(doc, field, draw(payloads), draw(st.integers(0, len(NODES) - 1))), FIELD_WORDS[field]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(autouse=True)
def no_sentinel():
    SENTINEL.unlink(missing_ok=True)
    yield
    assert not SENTINEL.exists(), "a payload ran"


def _refused(r, word: str | None) -> None:
    """Exit 2 and one message naming ``word``: one ``error:``, at most one hint, no traceback.
    (Lines are not counted: a name printed with its newlines or control characters raw is the
    terminal test's, ``test_terminal_output_...``.)"""
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r
    assert r.stderr.startswith("error: ") and r.stderr.count("\nerror: ") == 0, r
    assert r.stderr.count("\n  hint: ") <= 1, r
    if word is not None:
        assert word in r.stderr, (word, r)


def _write(workdir, name: str, doc: dict) -> str:
    path = workdir / name
    path.write_text(json.dumps(doc), encoding="utf-8", errors="surrogatepass")
    return str(path)


def _check_module(workdir, source: str, doc: dict, *, must_run: bool) -> None:
    """The module holds only what codegen writes, imports, and runs like the graph (or, when a
    payload reached an op's call as a literal, fails in that op)."""
    assert module_violations(source, *REFERENCES) == []
    graph = graph_from_dict(doc)
    model = generated_class(import_source(source, workdir))()
    inputs, weights = graph_leaves(graph)
    model.load_weights(weights)
    try:
        with torch.no_grad():
            outputs = model(*inputs)
    except (RuntimeError, TypeError, ValueError, IndexError):
        assert not must_run
        return
    ok, _, _ = compare_outputs(_flat_tensors(outputs), _graph_order_reference(graph, 0))
    assert ok or not must_run


@pytest.mark.parametrize("field", [None, *FIELDS])
@examples(4)
@given(data=st.data())
def test_codegen_of_hostile_graphs(workdir, field, data) -> None:
    doc, word = data.draw(hostile_graphs(field))
    out = workdir / "m.py"
    policy = data.draw(st.sampled_from(["asap", "sequential", "nimble"]))
    r = cli("codegen", _write(workdir, "g.json", doc), "--policy", policy, "-o", out, "--force")
    event(f"{word or 'names only'}: exit {r.returncode}")
    if r.returncode == 0:
        assert r.stderr.startswith("wrote "), r
        _check_module(workdir, out.read_text(), doc, must_run=word is None)
    else:
        assert word is not None, f"a file with hostile names only was refused: {r}"
        _refused(r, word)


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        self.handlers += [k for k, _ in attrs if k.startswith("on") or k in ("src", "href")]


PAGE_TAGS = {
    "html", "head", "meta", "title", "style", "script", "body", "header", "h1", "h2", "p", "b", "section",
    "table", "thead", "tbody", "tr", "th", "td", "div", "details", "summary", "pre", "footer", "code", "sup",
}  # fmt: skip


@examples(6)
@given(drawn=hostile_graphs())
def test_report_of_hostile_graphs(workdir, drawn) -> None:
    doc, _ = drawn
    out = workdir / "r.html"
    r = cli("report", _write(workdir, "g.json", doc), "--policies", "sequential,asap", "--pareto-points", "0",
            "-o", out, "--force")  # fmt: skip
    assert r.returncode == 0, r
    page = _Tags()
    page.feed(out.read_text())
    assert set(page.tags) <= PAGE_TAGS and page.tags.count("script") == 2, set(page.tags) - PAGE_TAGS
    assert page.handlers == []


@pytest.mark.parametrize("field", [None, "string arg", "op", "kind"])
@examples(3)
@given(data=st.data(), policy=st.sampled_from(["asap", "nimble"]))
def test_simulate_trace_and_run_of_hostile_graphs(workdir, field, data, policy) -> None:
    doc, word = data.draw(hostile_graphs(field))
    path, trace = _write(workdir, "g.json", doc), workdir / "t.json"
    r = cli("simulate", path, "--policy", policy, "--trace", trace, "--force")
    if word is None or r.returncode == 0:
        assert r.returncode == 0, r
        events = json.loads(trace.read_text(), parse_constant=pytest.fail)["traceEvents"]
        ops = {e["name"] for e in events if e["ph"] == "X"}
        assert ops == {n["id"] for n in doc["nodes"]}  # every name back exactly as written
    else:
        _refused(r, word)
    r = cli("run", path, "--policy", policy, "--json")
    if word is None:
        assert r.returncode == 0 and json.loads(r.stdout)["matches_eager"], r
    elif r.returncode:
        _refused(r, None)


@pytest.mark.parametrize("where", ["policy", "meta", "fusion", "launch_order", "streams", "wait"])
@examples(3)
@given(p=payloads, data=st.data())
def test_hostile_schedule_files(workdir, where, p, data) -> None:
    doc = json.loads(json.dumps(SCHEDULE))
    if where == "policy":
        doc["policy"] = p
    elif where == "meta":
        doc["meta"] = {**doc["meta"], p: p}
    elif where == "fusion":
        doc["meta"] = {**doc["meta"], "fusion": {"mode": p}}
    elif where == "launch_order":
        doc["launch_order"][data.draw(st.integers(0, len(NODES) - 1))] = p
    elif where == "streams":
        doc["streams"] = {**doc["streams"], p: 0}
    else:
        doc["waits"] = [*doc["waits"], {"after": NODES[0], "before": p}]
    path, out = _write(workdir, "s.json", doc), workdir / "m.py"
    graph_path = _write(workdir, "g.json", BASE)
    r = cli("codegen", graph_path, "--schedule", path, "-o", out, "--force")
    event(f"{where}: exit {r.returncode}")
    if r.returncode == 0:
        _check_module(workdir, out.read_text(), BASE, must_run=True)
    else:
        _refused(r, "schedule" if where in ("launch_order", "streams", "wait") else None)
    for command in (("simulate", "--trace", workdir / "t.json", "--force"), ("run",)):
        r = cli(command[0], graph_path, "--schedule", path, *command[1:])
        if r.returncode:
            _refused(r, None)


@examples(10)
@given(st.data())
def test_hostile_measured_tables(workdir, data) -> None:
    doc = json.loads(json.dumps(TABLE))
    p = data.draw(payloads)
    if data.draw(st.booleans()):
        doc["device"] = p
    else:
        key = data.draw(st.sampled_from(sorted(doc["ops"])))
        doc["ops"] = {**doc["ops"], p: doc["ops"].pop(key)}
    path = _write(workdir, "t.json", doc)
    graph_path = _write(workdir, "g.json", BASE)
    for command in (("simulate", "--trace", workdir / "tr.json", "--force"), ("memory", "--json")):
        r = cli(command[0], graph_path, "--measured", path, "--policy", "asap", *command[1:])
        if r.returncode:
            _refused(r, None)
        elif command[0] == "simulate":
            json.loads((workdir / "tr.json").read_text(), parse_constant=pytest.fail)


AXES = ["models", "batches", "dtypes", "optimizers", "devices", "fusion", "policies", "budgets"]


@pytest.mark.parametrize("where", [*AXES, "settings", "key"])
@examples(2)
@given(p=payloads)
def test_hostile_sweep_files(workdir, where, p) -> None:
    """Reading a sweep file: a payload in an axis, a setting or a key is refused naming it, or
    accepted as the value it is (a sweep file's ``file.py:function`` models do run code: that is
    the model's code, by design)."""
    text = 'models = ["seed-example2"]\n'
    if where == "settings":
        text += f"[settings]\nseed = {json.dumps(p)}\n"
    elif where == "key":
        text += f"{json.dumps(p)} = [1]\n"
    else:
        text = f"{where} = [{json.dumps(p)}]\n" + ("" if where == "models" else text)
    path = workdir / "s.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        axes, _ = load_sweep_file(path)
        SweepSpec.of(**axes).jobs()
    except (ValueError, NotImplementedError) as e:  # streamplan's user errors subclass these
        assert type(e).__module__.startswith("streamplan"), e
    r = cli("sweep", "--file", path, "--json")
    if r.returncode != 0:
        _refused(r, None)


def test_terminal_output_shows_names_as_text() -> None:
    """Names from a file print as text: no rich markup, emoji codes or terminal control bytes."""
    doc = {**BASE, "name": "[red]x[/red] \x1b[31m :fire: \x1e\u2028"}
    doc = rename_node(doc, NODES[0], "[bold]n[/bold]:fire:")
    path = _write(SENTINEL.parent, f"{SENTINEL.name}-term.json", doc)
    try:
        for command in (("show",), ("simulate", "--policy", "asap")):
            r = cli(command[0], path, *command[1:])
            printed = r.stdout + r.stderr
            assert r.returncode == 0 and not {"\x1b", "\x1e", "\u2028", "🔥"} & set(printed)
            assert "[red]x[/red]" in printed
    finally:
        os.unlink(path)


def test_no_file_is_written_where_a_name_points(tmp_path, monkeypatch) -> None:
    """Output paths come from the command line only: a graph, node or policy name with ``../``
    never becomes a file (the capture cache names its files by a digest)."""
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    doc = rename_node({**BASE, "name": "../../escaped"}, NODES[0], "../escaped-node")
    schedule = {
        **json.loads(make_schedule(graph_from_dict(doc), "nimble").dumps()),
        "policy": "../../escaped-p",
    }
    (here / "g.json").write_text(json.dumps(doc))
    (here / "s.json").write_text(json.dumps(schedule))
    outputs = {"m.py", "r.html", "t.json", "s2.json", "g2.json", "rt.json"}
    for command in (
        ("codegen", "g.json", "--policy", "asap", "-o", "m.py"),
        ("report", "g.json", "--policies", "asap", "--pareto-points", "0", "-o", "r.html"),
        ("simulate", "g.json", "--schedule", "s.json", "--trace", "t.json"),
        ("schedule", "g.json", "--policy", "asap", "-o", "s2.json"),
        ("export", "g.json", "-o", "g2.json"),
        ("run", "g.json", "--schedule", "s.json", "--trace", "rt.json"),
    ):
        r = cli(*command)
        assert r.returncode == 0, (command, r)
    written = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {f"a/b/{name}" for name in outputs | {"g.json", "s.json"}}
