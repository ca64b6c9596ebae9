"""The runtime resolves a graph's op names to ``torch.ops`` overloads only: an op name in a file
cannot reach ``torch.ops.import_module`` or ``load_library`` (which load code), nor any other
callable, and a dtype, layout or memory format is decoded only from torch's own names."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from helpers.cli import assert_user_error, cli
from streamplan.errors import UnsupportedError
from streamplan.frontends.argcodec import decode
from streamplan.ir.serialize import dumps
from streamplan.models import load_model
from streamplan.runtime.interpret import resolve_op

LOADERS = [
    "load_library.__self__.import_module",
    "import_module.__call__.__call__",
    "load_library.__call__.__call__",
    "higher_order.cond.__call__",
    "aten.__class__.__call__",
    "aten.add.__call__",
    "aten.add._op",
    "_dir.copy.default",
    "aten.add.Tensor.x",
    "aten",
]


@pytest.fixture
def sentinel_module(tmp_path, monkeypatch):
    """A module that, if anything imports it, creates a file."""
    flag = tmp_path / "imported"
    (tmp_path / "sp_hostile_mod.py").write_text(f"open({str(flag)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sp_hostile_mod", raising=False)
    return flag


@pytest.mark.parametrize("op", LOADERS)
def test_op_names_reach_only_op_overloads(op: str) -> None:
    with pytest.raises(UnsupportedError):
        resolve_op(op)


def test_real_ops_still_resolve() -> None:
    assert resolve_op("aten.add.Tensor") is torch.ops.aten.add.Tensor
    assert resolve_op("aten.relu") is torch.ops.aten.relu.default
    assert resolve_op("aten.__and__.Tensor") is torch.ops.aten.__and__.Tensor
    assert resolve_op("prims.add.default") is torch.ops.prims.add.default


@pytest.mark.parametrize("op", LOADERS[:3])
def test_run_refuses_a_graph_that_names_a_loader(tmp_path, sentinel_module, op: str) -> None:
    doc = json.loads(dumps(load_model("seed-example2")))
    doc["nodes"][0]["op"] = op
    doc["nodes"][0]["attrs"]["args"] = ["sp_hostile_mod"]
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    assert_user_error(cli("run", path, "--policy", "sequential"), "cannot resolve op")
    assert not sentinel_module.exists()


@pytest.mark.parametrize("tag", ["$dtype", "$layout", "$memory_format"])
@pytest.mark.parametrize("name", ["load", "__class__", "float32 if 1 else 0", "nn", ["float32"]])
def test_decoding_names_only_torchs_constants(tag: str, name) -> None:
    with pytest.raises(ValueError, match="is not a torch"):
        decode({tag: name}, {})
    good = {"$dtype": "float16", "$layout": "strided", "$memory_format": "channels_last"}[tag]
    assert decode({tag: good}, {}) is getattr(torch, good)
