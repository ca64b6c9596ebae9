"""The capture cache: a model captured once is read back without torch; every field of the
request, the model file's content and the versions are in the key; --no-cache, cache info/clear.

Every test points the cache at its own directory (``STREAMPLAN_CACHE_DIR``); the session's
default is a temporary directory too (tests/conftest.py), never the user's home.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from helpers.cli import cli
from streamplan.cache import CaptureCache, default_cache_dir
from streamplan.models import ModelRequest

TINY = """
import torch

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.a(x).relu() + self.b(x).{act}()

def build():
    return Tiny(), (torch.randn(2, 8),)
"""


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("STREAMPLAN_CACHE_DIR", str(d))
    return {"STREAMPLAN_CACHE_DIR": str(d)}


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.py"
    p.write_text(TINY.format(act="sigmoid"))
    return p


def entries(env) -> int:
    return json.loads(cli("cache", "info", "--json", env=env).stdout)["entries"]


def test_a_capture_is_cached_and_read_back_identically(cache_env, tiny):
    spec = f"{tiny}:build"
    first = cli("show", spec, "--json", "--graph", env=cache_env)
    assert first.returncode == 0, first
    assert entries(cache_env) == 1
    again = cli("show", spec, "--json", "--graph", env=cache_env)
    fresh = cli("show", spec, "--json", "--graph", "--no-cache", env=cache_env)
    assert first.stdout == again.stdout == fresh.stdout
    assert entries(cache_env) == 1


def test_the_key_covers_the_file_content_batch_and_dtype(cache_env, tiny):
    spec = f"{tiny}:build"
    cli("show", spec, env=cache_env)
    cli("show", spec, "--batch", "3", env=cache_env)
    cli("show", spec, "--dtype", "float64", env=cache_env)
    assert entries(cache_env) == 3
    tiny.write_text(TINY.format(act="tanh"))  # an edited model is captured again
    r = cli("show", spec, "--graph", env=cache_env)
    assert "tanh" in r.stdout and "sigmoid" not in r.stdout
    assert entries(cache_env) == 4


def test_every_request_field_is_in_the_key(tmp_path):
    """A field added to ModelRequest later (say ``train``) changes the key with no cache change."""

    @dataclasses.dataclass(frozen=True)
    class TrainingRequest(ModelRequest):
        train: bool = False

    cache = CaptureCache(tmp_path)
    keys = {json.dumps(cache.key_of(TrainingRequest("squeezenet", train=t)), sort_keys=True) for t in (0, 1)}
    assert len(keys) == 2
    assert cache.key_of(ModelRequest("squeezenet", batch=2)) != cache.key_of(ModelRequest("squeezenet"))


def test_versions_are_in_the_key(tmp_path, monkeypatch):
    import streamplan.cache as cache_mod

    cache = CaptureCache(tmp_path)
    before = cache.path_of(cache.key_of(ModelRequest("squeezenet")))
    real = cache_mod._dist_version
    monkeypatch.setattr(cache_mod, "_dist_version", lambda n: "9.9" if n == "torch" else real(n))
    assert cache.path_of(cache.key_of(ModelRequest("squeezenet"))) != before


def test_a_cached_command_does_not_import_torch(cache_env, tiny):
    spec = f"{tiny}:build"
    assert cli("show", spec, env=cache_env).returncode == 0
    for args in (["show", spec, "--json"], ["memory", spec, "--policy", "asap", "--json"]):
        code = (
            "import sys\nfrom streamplan.cli import main\n"
            f"sys.argv = ['streamplan', *{args!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n"
        )
        env = {**__import__("os").environ, **cache_env}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)


def test_a_damaged_entry_is_a_miss_and_is_rewritten(cache_env, tiny):
    spec = f"{tiny}:build"
    cli("show", spec, env=cache_env)
    (entry,) = (CaptureCache().graphs_dir).glob("*.json")
    entry.write_text('{"schema": "streamplan.capture-cache", "version": 1, "key": {}, "graph"')
    r = cli("show", spec, "--json", env=cache_env)
    assert r.returncode == 0 and json.loads(r.stdout)["ops"] > 0
    assert json.loads(entry.read_text())["graph"]["nodes"]


def test_an_unwritable_cache_does_not_stop_a_command(tmp_path, tiny):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = cli("show", f"{tiny}:build", "--json", env={"STREAMPLAN_CACHE_DIR": str(blocker / "cache")})
    assert r.returncode == 0, r


def test_cache_info_and_clear(cache_env, tiny):
    cli("show", f"{tiny}:build", env=cache_env)
    r = cli("cache", "info", env=cache_env)
    assert (
        r.returncode == 0 and "1 captured graph" in r.stdout and cache_env["STREAMPLAN_CACHE_DIR"] in r.stdout
    )
    r = cli("cache", "clear", "--json", env=cache_env)
    assert json.loads(r.stdout)["removed"] == 1
    assert entries(cache_env) == 0
    assert cli("cache", "clear", env=cache_env).returncode == 0  # clearing an empty cache is fine


def test_graphs_built_without_torch_are_not_cached(cache_env):
    for spec in ("seed-example2", "random:50"):
        cli("show", spec, env=cache_env)
    assert entries(cache_env) == 0


def test_where_the_cache_lives(monkeypatch, tmp_path):
    monkeypatch.delenv("STREAMPLAN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "streamplan"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "streamplan"
    monkeypatch.setenv("STREAMPLAN_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
