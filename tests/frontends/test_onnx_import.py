"""ONNX models in: shapes, batch binding, views, every problem at once, parity with the torch
capture of the same model, and runs checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from helpers.cli import assert_user_error, cli  # noqa: E402
from helpers.models import small_model  # noqa: E402
from helpers.onnx_models import CNNS, as_exported, exported  # noqa: E402
from streamplan.errors import FileFormatError, ModelSpecError, UnsupportedError  # noqa: E402
from streamplan.memory.host_order import host_order_peak_bytes  # noqa: E402
from streamplan.models import load_model  # noqa: E402
from streamplan.runtime import run_and_compare  # noqa: E402
from streamplan.schedule import make_schedule  # noqa: E402
from streamplan.schedule.context import ScheduleContext  # noqa: E402


def _save(tmp_path, nodes, inputs, outputs, initializers=(), name="m.onnx", opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / name
    onnx.save(model, str(path))
    return str(path)


def _views_model(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = numpy_helper.from_array(np.array([0, 24], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["flat"]),
        helper.make_node("Unsqueeze", ["flat", "axes"], ["u"]),
        helper.make_node(
            "Constant", [], ["axes"], value=numpy_helper.from_array(np.array([1], dtype=np.int64))
        ),
        helper.make_node("Squeeze", ["u", "axes"], ["s"]),
        helper.make_node("Identity", ["s"], ["i"]),
        helper.make_node("Flatten", ["i"], ["f"], axis=1),
        helper.make_node("Sigmoid", ["f"], ["y"]),
    ]
    nodes.insert(2, nodes.pop(3))  # the Constant first: ONNX lists nodes in topological order
    return _save(tmp_path, nodes, [x], [y], [shape])


def test_views_alias_their_base_and_identity_adds_nothing(tmp_path) -> None:
    g = load_model(_views_model(tmp_path))
    assert [n.op for n in g.nodes] == [
        "aten.relu.default",
        "aten.reshape.default",
        "aten.unsqueeze.default",
        "aten.squeeze.dims",
        "aten.flatten.using_ints",
        "aten.sigmoid.default",
    ]
    relu = g.nodes[0].outputs[0]
    views = [n.outputs[0] for n in g.nodes[1:5]]
    assert all(g.values[v].storage == relu for v in views)  # no new bytes
    assert g.activation_bytes() == 2 * 4 * 24  # relu and sigmoid outputs, batch 1, float32
    assert g.values["x"].shape == (1, 4, 6) and g.meta["batch"] == 1


def test_batch_rebinds_a_symbolic_batch_dimension(tmp_path) -> None:
    path = _views_model(tmp_path)
    one, four = load_model(path), load_model(path, batch=4)
    assert four.values["x"].shape == (4, 4, 6)
    assert four.activation_bytes() == 4 * one.activation_bytes()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    fixed = _save(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"])],
        [x],
        [helper.make_tensor_value_info("y", 1, None)],
        name="fixed.onnx",
    )
    assert load_model(fixed).values["x"].shape == (2, 3)
    with pytest.raises(UnsupportedError, match="fixed batch size 2"):
        load_model(fixed, batch=8)


def test_every_unsupported_construct_in_one_error(tmp_path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["b"])], "b", [], [helper.make_tensor_value_info("b", 1, None)]
    )
    nodes = [
        helper.make_node("If", ["c"], ["i"], then_branch=branch, else_branch=branch),
        helper.make_node("Custom", ["x"], ["k"], domain="com.example"),
        helper.make_node("Det", ["x"], ["d"]),
        helper.make_node("Add", ["d", "d"], ["y"]),
    ]
    path = _save(tmp_path, nodes, [x, cond], [y], name="bad.onnx")
    with pytest.raises(UnsupportedError) as info:
        load_model(path)
    text = str(info.value)
    for fragment in ("symbolic dimension 'seq'", "control flow (If)", "com.example.Custom", "4 unsupported"):
        assert fragment in text, text
    x2 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8])
    path = _save(tmp_path, nodes[2:], [x2], [y], name="ops.onnx")
    with pytest.raises(UnsupportedError, match="op Det"):
        load_model(path)


def test_missing_onnx_package_names_the_extra(monkeypatch, tmp_path) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ModelSpecError, match=r"streamplan\[onnx\]"):
        load_model(str(tmp_path / "any.onnx"))


def _seq_peak(g) -> int:
    return host_order_peak_bytes(g, make_schedule(g, "sequential"))


@pytest.mark.slow
@pytest.mark.parametrize("fold", [False, True], ids=["bn-kept", "bn-folded"])
@pytest.mark.parametrize("name", CNNS)
def test_exported_zoo_cnn_agrees_with_the_torch_capture(name: str, fold: bool) -> None:
    """Same parameters and activation figures as the torch capture, once the exporter's own
    rewrites are applied to it: dropout removed, equal computations merged, nested concats
    merged, and (default export) batch norms folded into the convolutions before them."""
    path, _, _ = exported(name, fold=fold)
    onnx_graph = load_model(str(path))
    torch_graph, added_bias = as_exported(small_model(name)[2], fold_bn=fold)
    assert onnx_graph.param_count() == torch_graph.param_count() + added_bias
    assert onnx_graph.activation_bytes() == torch_graph.activation_bytes()
    assert onnx_graph.total_flops() == pytest.approx(torch_graph.total_flops(), rel=0.02 if fold else 1e-9)
    assert _seq_peak(onnx_graph) == _seq_peak(torch_graph)


@pytest.mark.slow
@pytest.mark.parametrize("name", CNNS)
def test_run_matches_onnxruntime(name: str) -> None:
    path, _, _ = exported(name, fold=True)
    cmp = run_and_compare(str(path), "nimble", ctx=ScheduleContext(max_streams=4), chaos=True)
    assert cmp.reference == "onnxruntime"
    assert cmp.matches_eager, f"max abs error {cmp.max_abs_error}"


def test_cli_on_an_onnx_model(tmp_path) -> None:
    path, _, _ = exported("squeezenet", fold=True, dynamic_batch=True)
    r = cli("run", str(path), "--policy", "asap", "--batch", "2", "--repeat", "1", "--json")
    assert r.returncode == 0, r.stderr
    import json

    result = json.loads(r.stdout)
    assert result["reference"] == "onnxruntime" and result["matches_eager"]
    r = cli("show", str(path), "--batch", "3")
    assert r.returncode == 0 and "144.0 KiB" in r.stdout, r.stdout  # inputs: 3 x 3 x 64 x 64 float32
    assert_user_error(cli("show", str(tmp_path / "nothing.onnx")), "does not exist")


# -- a model file is data: attributes of the wrong kind are problems, not crashes --------------


def _one_op(tmp_path, name: str, node, shape=(1, 3, 8, 8), initializers=()) -> str:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return _save(tmp_path, [node], [x], [y], initializers, name=f"{name}.onnx")


W = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
MALFORMED = {
    "conv_group_is_code": (
        helper.make_node("Conv", ["x", "w"], ["y"], name="c1", group="__import__('os')"),
        [W],
    ),
    "conv_pads_is_text": (helper.make_node("Conv", ["x", "w"], ["y"], name="c1", pads="1111"), [W]),
    "gelu_mode_is_code": (
        helper.make_node("Gelu", ["x"], ["y"], name="c1", approximate='tanh"); import os #'),
        [],
    ),
    "gelu_mode_not_utf8": (helper.make_node("Gelu", ["x"], ["y"], name="c1", approximate=b"\xff\xfe"), []),
    "cast_to_is_text": (helper.make_node("Cast", ["x"], ["y"], name="c1", to="float"), []),
    "cast_to_is_huge": (helper.make_node("Cast", ["x"], ["y"], name="c1", to=10**12), []),
    "softmax_axis_is_a_graph": (
        helper.make_node("Softmax", ["x"], ["y"], name="c1", axis=helper.make_graph([], "g", [], [])),
        [],
    ),
    "transpose_perm_out_of_range": (
        helper.make_node("Transpose", ["x"], ["y"], name="c1", perm=[5, 9, 0, 1]),
        [],
    ),
    "constant_without_value": (helper.make_node("Constant", [], ["y"], name="c1"), []),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_attribute_is_a_problem_named_with_its_node(tmp_path, case: str) -> None:
    node, inits = MALFORMED[case]
    path = _one_op(tmp_path, case, node, initializers=inits)
    with pytest.raises(UnsupportedError, match=r"\(at c1\)"):
        load_model(path)


def test_a_malformed_model_is_one_message_in_the_cli(tmp_path, caplog) -> None:
    from helpers.cli import cli

    node, inits = MALFORMED["gelu_mode_is_code"]
    r = cli("show", _one_op(tmp_path, "gelu", node, initializers=inits))
    assert_user_error(r, "Gelu", "(at c1)")
    # torch's fake tensors log a failed op with its traceback (on the terminal, outside pytest)
    assert not [rec for rec in caplog.records if rec.name.startswith("torch._subclasses")]


def test_run_of_a_graph_json_never_opens_the_onnx_file_its_meta_names(tmp_path) -> None:
    """An exported ONNX graph's JSON records the .onnx path it came from; a shared file could point
    it anywhere. Only a .onnx named on the command line is opened (its weights, onnxruntime)."""
    import json

    from helpers.cli import cli

    onnx_path = _views_model(tmp_path)
    r = cli("export", onnx_path, "-o", tmp_path / "g.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "g.json").read_text())
    doc["meta"]["onnx_path"] = str(tmp_path / "elsewhere.onnx")  # missing: opening it would fail the run
    (tmp_path / "g.json").write_text(json.dumps(doc))
    r = cli("run", tmp_path / "g.json", "--policy", "asap", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reference"] != "onnxruntime"
    r = cli("run", onnx_path, "--policy", "asap", "--json")
    assert json.loads(r.stdout)["reference"] == "onnxruntime"


def test_external_data_outside_the_models_folder_is_refused(tmp_path) -> None:
    """An initializer stored as external data is read only from the model's own folder (onnx
    checks the location; streamplan needs onnx >= 1.16 for it)."""
    (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
    (tmp_path / "sub").mkdir()
    w = numpy_helper.from_array(np.zeros(2, np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    for key, value in (("location", "../secret.bin"), ("length", "8")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    path = _save(tmp_path, [helper.make_node("Add", ["x", "w"], ["y"])], [x],
                 [helper.make_tensor_value_info("y", 1, None)], [w], name="sub/m.onnx")  # fmt: skip
    with pytest.raises(FileFormatError, match="outside"):
        load_model(path)
