"""A graph file is data: codegen writes only the code it builds, whatever the file's strings say.

Names from the graph (graph, nodes, values, weights) are renamed or shown as plain text and the
module still runs; a field that cannot be written (a keyword name, a dtype, an op, an
output index, a constant) is a user error naming the node and the field; the module's text is
proved to be the tree codegen built, and codegen's own check of the result is not vacuous.
"""

from __future__ import annotations

import ast
import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import streamplan.codegen.pysource as ps
import streamplan.codegen.render as render
from helpers.cli import assert_user_error, cli
from helpers.codegen import generated_class, graph_leaves, import_source
from helpers.hostile import PAYLOADS, SENTINEL, SPEC, inject, module_violations, rename_node, rename_value
from streamplan.codegen import generate_module
from streamplan.codegen.check import module_problems
from streamplan.codegen.module import MODULE_ATTRS
from streamplan.codegen.pyast import Unwritable, op_function
from streamplan.errors import GraphError
from streamplan.frontends.argcodec import DTYPE_NAMES, LAYOUT_NAMES, MEMORY_FORMAT_NAMES
from streamplan.ir.opname import DUNDER_OPS, NOT_NAMESPACES
from streamplan.ir.serialize import dumps, graph_from_dict
from streamplan.models import load_model
from streamplan.runtime import compare_outputs
from streamplan.runtime.compare import _flat_tensors, _graph_order_reference
from streamplan.schedule import make_schedule

ISSUE_PAYLOAD = "out_dtype=None, **{str(__import__('os').system('touch PWNED')): 0}, zz"


@pytest.fixture(scope="module")
def hostile():
    """The hostile test model's graph, its JSON form and the module of the untouched graph."""
    graph = load_model(SPEC)
    return graph, json.loads(dumps(graph)), generate_module(graph, make_schedule(graph, "asap"))


@pytest.fixture(autouse=True)
def no_sentinel():
    SENTINEL.unlink(missing_ok=True)
    yield
    assert not SENTINEL.exists(), "a payload ran"


def _runs_like_the_graph(tmp_path, graph, source: str) -> None:
    model = generated_class(import_source(source, tmp_path))()
    inputs, weights = graph_leaves(graph)
    model.load_weights(weights)
    with torch.no_grad():
        ok, _, _ = compare_outputs(_flat_tensors(model(*inputs)), _graph_order_reference(graph, 0))
    assert ok


def test_the_reported_keyword_name_is_refused(tmp_path) -> None:
    doc = json.loads(dumps(load_model("seed-example2")))
    doc["nodes"][0]["attrs"]["kwargs"] = {ISSUE_PAYLOAD: 0}
    path, out = tmp_path / "evil.json", tmp_path / "m.py"
    path.write_text(json.dumps(doc))
    r = cli("codegen", path, "--policy", "asap", "-o", out)
    assert_user_error(r, "node 'a'", "kwargs", "is not a Python identifier")
    assert not out.exists() and not (tmp_path / "PWNED").exists()
    r = cli("codegen", path, "--policy", "asap", "-o", out, "--json")
    assert json.loads(r.stdout)["error"]["kind"] == "GraphError"


@pytest.mark.parametrize(
    "field,word",
    [
        ("kwargs key", "kwargs"),
        ("$dtype", "is not a torch dtype"),
        ("$layout", "is not a torch layout"),
        ("$memory_format", "is not a torch memory format"),
        ("output_index", "output_index"),
        ("op", "op"),
    ],
)
@pytest.mark.parametrize("payload", [PAYLOADS[0], PAYLOADS[2], "**{}"])
def test_a_field_that_cannot_be_written_is_named(hostile, field: str, word: str, payload: str) -> None:
    graph, doc, _ = hostile
    node = 2  # max_1: two outputs, an output_index
    bad = graph_from_dict(inject(doc, field, payload, node))
    with pytest.raises(GraphError) as info:
        generate_module(bad, make_schedule(bad, "asap"))
    assert word in str(info.value) and "node 'max_1'" in str(info.value)


def test_names_from_the_graph_become_plain_names_and_the_module_runs(hostile, tmp_path) -> None:
    graph, doc, reference = hostile
    doc = {**doc, "name": PAYLOADS[2]}
    for i, (v, payload) in enumerate(zip(["x", "relu", "getitem", "p_fc_bias"], PAYLOADS, strict=False)):
        doc = rename_value(doc, v, f"{payload}{i}")
    doc = rename_node(doc, "max_1", PAYLOADS[1])
    doc["param_names"] = {k: f"{PAYLOADS[5]}{i}.w" for i, k in enumerate(doc["param_names"])}
    renamed = graph_from_dict(doc)
    source = generate_module(renamed, make_schedule(renamed, "asap"), model=PAYLOADS[3])
    assert module_problems(source) == [] and module_violations(source, reference) == []
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    assert "\\" not in docstring and '"' not in docstring and "import os" in docstring  # shown, as text
    _runs_like_the_graph(tmp_path, renamed, source)


@pytest.mark.parametrize(
    "op",
    [
        "load_library.__call__.__call__",  # torch.ops.load_library(path) loads a shared library
        "import_module.__call__.__call__",  # torch.ops.import_module(name) imports a module
        "load_library.__self__.import_module",
        "aten.__class__.__call__",
        "aten.add.__call__",
        "aten.add.Tensor; import os",
        "aten.1x.default",
        "higher_order.cond._dispatch",
        "aten.add",  # two parts: the default overload
        "aten.__and__.Tensor",
    ],
)
def test_only_torch_ops_overloads_can_be_called(op: str) -> None:
    if op in ("aten.add", "aten.__and__.Tensor"):
        assert ast.unparse(op_function(op)) == (
            "aten.add.default" if op == "aten.add" else "aten.__and__.Tensor"
        )
        return
    with pytest.raises(Unwritable):
        op_function(op)


def test_an_unknown_op_is_refused_with_its_node(tmp_path) -> None:
    """Not a module that fails when it is imported or run."""
    doc = json.loads(dumps(load_model("seed-example2")))
    doc["nodes"][2]["op"] = "aten.no_such_op.default"
    path, out = tmp_path / "unknown.json", tmp_path / "m.py"
    path.write_text(json.dumps(doc))
    assert_user_error(
        cli("codegen", path, "-o", out), "node 'c'", "aten.no_such_op.default", "torch does not have"
    )
    assert not out.exists()


def test_constant_data_must_be_numbers(tmp_path) -> None:
    doc = json.loads(dumps(load_model("seed-example2")))
    doc["values"].append({"id": "k", "shape": [1], "dtype": "float32", "nbytes": 4, "kind": "constant"})
    doc["params"].append("k")
    node = next(n for n in doc["nodes"] if n["id"] == "f")
    node["inputs"], node["attrs"]["args"] = ["d", "k"], [{"$v": "d"}, {"$v": "k"}]
    doc["outputs"] = ["f", "e"]
    doc["meta"]["constant_values"] = {"k": [-1.5]}
    good = graph_from_dict(doc)
    _runs_like_the_graph(tmp_path, good, generate_module(good, make_schedule(good, "asap")))
    for data in ({"a": 1}, PAYLOADS[0], [[PAYLOADS[0]]]):
        doc["meta"]["constant_values"] = {"k": data}
        bad = graph_from_dict(doc)
        with pytest.raises(GraphError, match="value 'k': constant_values"):
            generate_module(bad, make_schedule(bad, "asap"))


def test_a_fused_kernel_that_takes_the_device_defines_it(hostile, tmp_path) -> None:
    """Found by the module check: forward read `device` without setting it when only a fused
    kernel's part (arange) took one."""
    from streamplan.fusion.plan import schedule_with_fusion
    from streamplan.schedule.context import ScheduleContext

    graph, _, _ = hostile
    planned = schedule_with_fusion(graph, "asap", ScheduleContext(fusion="first"))
    source = generate_module(planned.graph, planned.schedule)
    assert "device = x.device" in source
    _runs_like_the_graph(tmp_path, graph, source)


@given(st.text() | st.sampled_from([*PAYLOADS, "\ud800", "\udfff x", "\U0010ffff", '\'"\'"""']))
def test_string_literals_read_back_and_stay_one_plain_line(text: str) -> None:
    literal = ps.py_str(text)
    assert ast.literal_eval(literal) == text
    assert literal.isprintable() and literal.encode("utf-8")  # no raw control, separator or surrogate


@given(st.text() | st.sampled_from(PAYLOADS))
def test_plain_text_cannot_leave_a_docstring_or_comment(text: str) -> None:
    shown = ps.plain(text)
    assert render.docstring(shown) == shown and render.comment(shown) == shown
    assert ast.literal_eval(f'"""{shown}"""') == shown


def test_the_module_check_is_not_vacuous(hostile) -> None:
    _, _, source = hostile
    assert module_problems(source) == []
    forward = source.index("        w = _weights(self.tensors)")
    edits = {
        "an import": source.replace("import torch\n", "import torch\nimport os\n", 1),
        "a call of eval": source[:forward] + '        eval("1")\n' + source[forward:],
        "a dunder attribute": source[:forward] + "        k = x.__class__\n" + source[forward:],
        "a lambda": source[:forward] + "        k = (lambda: 0)()\n" + source[forward:],
        "another module call": source.replace("aten.relu.default(", "torch.relu(", 1),
        "a changed helper": source.replace("return contextlib.nullcontext()", "return open('x')", 1),
        "a name never set": source[:forward] + "        k = os\n" + source[forward:],
        "code in a data table": source.replace('"float32", "param"),', 'open("x"), "param"),', 1),
    }
    for what, edited in edits.items():
        assert module_problems(edited), what


def test_text_that_differs_from_the_tree_is_never_returned(hostile, monkeypatch) -> None:
    _, doc, _ = hostile
    with pytest.raises(ValueError):
        render.docstring('ends the docstring: """')
    with pytest.raises(ValueError):
        render.comment("two\nlines")
    monkeypatch.setattr(ps, "py_str", lambda text: '"' + text + '"')  # a literal writer that forgets escapes
    for name in ('x" + "y', 'x"\nopen("z")\n"'):  # text that still parses, and text that does not
        graph = graph_from_dict({**doc, "param_names": {**doc["param_names"], "p_fc_bias": name}})
        with pytest.raises(RuntimeError, match="differs from its tree"):
            generate_module(graph, make_schedule(graph, "asap"))


def test_the_fixed_name_lists_cover_this_torch() -> None:
    dtypes = {str(v).removeprefix("torch.") for v in vars(torch).values() if isinstance(v, torch.dtype)}
    layouts = {str(v).removeprefix("torch.") for v in vars(torch).values() if isinstance(v, torch.layout)}
    formats = {
        str(v).removeprefix("torch.") for v in vars(torch).values() if isinstance(v, torch.memory_format)
    }
    assert dtypes <= DTYPE_NAMES and all(isinstance(getattr(torch, d, None), torch.dtype) for d in dtypes)
    assert {x for x in layouts if not x.startswith("_")} <= LAYOUT_NAMES and formats <= MEMORY_FORMAT_NAMES
    ops = torch.ops
    not_namespaces = {
        n
        for n in set(dir(type(ops))) | set(vars(ops))
        if not n.startswith("__") and not isinstance(getattr(ops, n), torch._ops._OpNamespace)
    }
    assert not_namespaces <= NOT_NAMESPACES
    names = torch._C._dispatch_get_all_op_names()
    assert {n.split("::")[1].split(".")[0] for n in names if n.startswith("aten::__")} <= DUNDER_OPS
    module = torch.nn.Module()

    # torch's own attributes (libraries may add theirs: transformers adds smart_apply)
    def from_torch(n: str) -> bool:
        return (getattr(getattr(torch.nn.Module, n), "__module__", None) or "torch").startswith("torch")

    own = {n for n in dir(torch.nn.Module) if from_torch(n)}
    assert {n for n in own | set(vars(module)) if not n.startswith("_")} <= MODULE_ATTRS
