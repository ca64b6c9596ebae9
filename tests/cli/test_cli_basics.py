"""CLI: zoo/show/export and the error contract (exit 2, one or two lines, no traceback)."""

import json
import subprocess
import sys

import pytest

from helpers.cli import assert_user_error, cli
from streamplan.ir.serialize import dumps, graph_to_dict
from streamplan.models import load_model


def test_show_seed_example2_json():
    r = cli("show", "seed-example2", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["ops"] == 6 and info["max_parallelism"] == 2
    for key in (
        "ops",
        "param_count",
        "param_bytes",
        "activation_bytes",
        "max_parallelism",
        "critical_path_ops",
    ):
        assert key in info
    assert info["activation_bytes"] == 6 << 20


def test_show_random_does_not_import_torch():
    code = (
        "import sys; from streamplan.cli import main; sys.argv=['streamplan','show','random:20000','--json'];\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ops"] == 20000


def test_zoo_lists_models():
    r = cli("zoo", "--json")
    names = [m["name"] for m in json.loads(r.stdout)]
    assert {
        "seed-example1",
        "seed-example2",
        "inception_v3",
        "squeezenet",
        "randwire",
        "nasnet_a",
        "resnet50",
        "bert_base",
        "gpt2",
    } <= set(names)


def test_unknown_model():
    assert_user_error(cli("show", "inceptoin_v3"), "unknown model", "inception_v3")


def test_bad_random_spec():
    assert_user_error(cli("show", "random:abc"), "random")


def test_malformed_and_missing_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert_user_error(cli("show", str(bad)), "not valid JSON")
    assert_user_error(cli("show", str(tmp_path / "none.json")), "does not exist")


def test_cyclic_graph_json(tmp_path):
    d = graph_to_dict(load_model("seed-example2"))
    d["nodes"][1], d["nodes"][4] = d["nodes"][4], d["nodes"][1]  # e now comes before c and b
    p = tmp_path / "cyclic.json"
    p.write_text(json.dumps(d))
    assert_user_error(cli("show", str(p)), "before its producer")


def test_dangling_graph_json(tmp_path):
    d = graph_to_dict(load_model("seed-example2"))
    d["nodes"][2]["inputs"] = ["ghost"]
    p = tmp_path / "dangling.json"
    p.write_text(json.dumps(d))
    assert_user_error(cli("show", str(p)), "ghost")


def test_python_spec_that_raises(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def build():\n    raise RuntimeError('boom')\n")
    assert_user_error(cli("show", f"{f}:build"), "boom")
    assert_user_error(cli("show", f"{f}:missing"), "no function")
    g = tmp_path / "syntax.py"
    g.write_text("def build(:\n")
    assert_user_error(cli("show", f"{g}:build"), "SyntaxError")


def test_export_round_trip_and_no_overwrite(tmp_path):
    out = tmp_path / "g.json"
    r = cli("export", "seed-example2", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text() == dumps(load_model("seed-example2"))
    r = cli("show", str(out), "--json")
    assert json.loads(r.stdout)["ops"] == 6
    before = out.read_text()
    assert_user_error(cli("export", "seed-example1", "-o", str(out)), "already exists")
    assert out.read_text() == before  # nothing the user had is lost
    assert_user_error(cli("export", str(out), "-o", str(out), "--force"), "input file")
    assert out.read_text() == before


def test_bad_option_is_usage_error():
    r = cli("show", "seed-example2", "--batch", "zero")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize("spec", ["seed-example1", "seed-concat"])
def test_show_text(spec):
    r = cli("show", spec, "--graph")
    assert r.returncode == 0 and "aten.atan.default" in r.stdout


@pytest.mark.parametrize(
    "model,count", [("inception_v3", 23_834_568), ("resnet50", 25_557_032), ("squeezenet", 1_248_424)]
)
@pytest.mark.slow
def test_show_param_bytes_are_the_published_count_in_float32(model, count):
    r = cli("show", model, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["param_count"] == count and info["param_bytes"] == 4 * count
