"""Bad input found by new users, case by case through the command line: each gives its exit status
with one to three lines on stderr and no traceback, and under ``--json`` stdout is exactly one
JSON document (an ``{"error": ...}`` object for a user error). Files are left as they were."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from helpers.cli import cli
from helpers.outside_models import SPECS

MODELS = textwrap.dedent(
    """
    import sys

    import torch
    from torch import nn


    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            return self.a(x) + self.b(x)


    def tiny():
        torch.manual_seed(0)
        return Tiny(), (torch.randn(2, 4),)


    def fire():  # rich would print the spec ...:fire: as an emoji
        return tiny()


    def exits():
        sys.exit(3)


    def interrupts():
        raise KeyboardInterrupt


    class ExitsInForward(Tiny):
        def forward(self, x):
            sys.exit(3)


    def exits_in_forward():
        return ExitsInForward(), (torch.randn(2, 4),)


    class Chatty(Tiny):
        def forward(self, x):
            print("chatty forward")
            return super().forward(x)


    def chatty():
        print("chatty function")
        return Chatty(), (torch.randn(2, 4),)
    """
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """A folder of inputs: model files, a package whose model imports its sibling, a graph, a schedule."""
    from streamplan.ir.serialize import dumps
    from streamplan.models import load_model
    from streamplan.schedule import make_schedule

    d = tmp_path_factory.mktemp("bad_input")
    (d / "m.py").write_text(MODELS)
    (d / "loud.py").write_text(MODELS + '\nprint("loud import")\n')
    (d / "quits.py").write_text("import sys\n\nsys.exit(3)\n\n\ndef f():\n    pass\n")
    pkg = d / "pkg"
    pkg.mkdir()
    (pkg / "helper.py").write_text("WIDTH = 4\n")
    (pkg / "main_model.py").write_text(
        "import torch\nfrom helper import WIDTH\n\n\ndef build():\n"
        "    return torch.nn.Linear(WIDTH, WIDTH), (torch.randn(2, WIDTH),)\n"
    )
    g = load_model("seed-example2")
    (d / "g.json").write_text(dumps(g))
    (d / "s.json").write_text(make_schedule(g, "asap").dumps())
    other = json.loads(make_schedule(g, "asap").dumps())
    other["schema"] = "streamplan.other"
    (d / "other_schema.json").write_text(json.dumps(other))
    weird = g.replace(name="[red]x[/red] \x1b[31m :fire:")
    (d / "weird.json").write_text(dumps(weird))
    (d / "adir").mkdir()
    return d


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def contract(args: list, rc: int, fragment: str = "", *, json_too: bool = True):
    """Run ``args``, then again with ``--json``: the exit status, the lines, and stdout as JSON."""
    r = cli(*args)
    assert r.returncode == rc, r
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r
    if rc == 2:
        assert 1 <= len(r.stderr.strip().splitlines()) <= 3, r.stderr
        assert fragment in r.stderr, r
    if json_too:
        j = cli(*args, "--json")
        assert j.returncode == rc, j
        doc = strict_json(j.stdout)  # the whole of stdout is one document
        if rc == 2:
            err = doc["error"]
            assert set(err) == {"kind", "message", "where", "hint"}
            assert fragment in f"{err['message']} {err['where']} {err['hint']}", err
    return r


# -- a table of refusals: (case, arguments, text the error must hold, whether the command has --json)
REFUSED = [
    # an input file is never overwritten, --force or not: the model file, the module it imports,
    # a saved schedule, a measured table
    (
        "schedule onto its model file",
        ["schedule", "{d}/m.py:tiny", "-o", "{d}/m.py", "--force"],
        "input file",
        True,
    ),
    (
        "codegen onto its model file",
        ["codegen", "{d}/m.py:tiny", "-o", "{d}/m.py", "--force"],
        "input file",
        True,
    ),
    (
        "export onto its model file",
        ["export", "{d}/m.py:tiny", "-o", "{d}/m.py", "--force"],
        "input file",
        False,
    ),
    (
        "report onto its model file",
        ["report", "{d}/m.py:tiny", "-o", "{d}/m.py", "--force"],
        "input file",
        True,
    ),
    (
        "simulate --trace onto its model file",
        ["simulate", "{d}/m.py:tiny", "--trace", "{d}/m.py", "--force"],
        "input file",
        True,
    ),
    (
        "run --trace onto its model file",
        ["run", "{d}/m.py:tiny", "--trace", "{d}/m.py", "--force"],
        "input file",
        True,
    ),
    (
        "schedule onto the module its model imports",
        ["schedule", "{d}/pkg/main_model.py:build", "-o", "{d}/pkg/helper.py", "--force"],
        "input file",
        True,
    ),
    (
        "simulate --trace onto its --schedule",
        ["simulate", "seed-example2", "--schedule", "{d}/s.json", "--trace", "{d}/s.json", "--force"],
        "input file",
        True,
    ),
    (
        "run --trace onto its --schedule",
        ["run", "seed-example2", "--schedule", "{d}/s.json", "--trace", "{d}/s.json", "--force"],
        "input file",
        True,
    ),
    (
        "simulate --trace onto its --measured",
        ["simulate", "seed-example2", "--measured", "{d}/s.json", "--trace", "{d}/s.json", "--force"],
        "input file",
        True,
    ),
    # a model's own sys.exit and KeyboardInterrupt are its errors, not exit 3 or an interruption
    ("sys.exit at import", ["show", "{d}/quits.py:f"], "called sys.exit(3)", True),
    ("sys.exit in the function", ["show", "{d}/m.py:exits", "--no-cache"], "called sys.exit(3)", True),
    ("sys.exit in forward", ["show", "{d}/m.py:exits_in_forward", "--no-cache"], "called sys.exit(3)", True),
    (
        "KeyboardInterrupt raised by the function",
        ["show", "{d}/m.py:interrupts", "--no-cache"],
        "raised KeyboardInterrupt",
        True,
    ),
    # sizes
    (
        "a batch no device holds",
        ["show", "{d}/m.py:tiny", "--batch", "100000000000000", "--no-cache"],
        "larger than any device",
        True,
    ),
    ("random:N past the cap", ["show", "random:1000000000"], "at most 200000", True),
    ("random-train:N past the cap", ["show", "random-train:1000000000"], "at most 80000", True),
    # what each file is
    ("--dtype on a graph file", ["show", "{d}/g.json", "--dtype", "float16"], "element types", True),
    (
        "a graph given as a schedule",
        ["verify", "seed-example2", "{d}/g.json"],
        "graph file, not a schedule",
        True,
    ),
    (
        "a graph given as --schedule",
        ["memory", "seed-example2", "--schedule", "{d}/g.json"],
        "graph file, not a schedule",
        True,
    ),
    (
        "a schedule of another schema",
        ["verify", "seed-example2", "{d}/other_schema.json"],
        "streamplan.other",
        True,
    ),
    ("a directory as the model", ["show", "{d}/adir"], "is a directory, not a model", True),
    ("a near zoo name", ["show", "squeezenet1"], "did you mean squeezenet?", True),
    # outputs checked before the work, with one kind of error
    (
        "a sweep's rows file as its CSV",
        [
            "sweep",
            "--models",
            "seed-example2",
            "--policies",
            "sequential",
            "-o",
            "{d}/x.jsonl",
            "--csv",
            "{d}/x.jsonl",
        ],
        "two outputs",
        True,
    ),
    ("plot to a directory", ["plot", "seed-example2", "-o", "{d}/adir"], "is a directory", False),
    ("pareto to a directory", ["pareto", "seed-example2", "-o", "{d}/adir"], "is a directory", True),
    ("a budget of 1e300x", ["remat", "random-train:20", "--budget", "1e300x"], "not a usable factor", True),
]


@pytest.mark.parametrize("case,args,fragment,has_json", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_with_a_user_error(ws, case, args, fragment, has_json):
    before = {p: p.read_bytes() for p in ws.rglob("*") if p.is_file()}
    contract([a.format(d=ws) for a in args], 2, fragment, json_too=has_json)
    after = {p: p.read_bytes() for p in ws.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert after == {p: b for p, b in before.items() if "__pycache__" not in p.parts}  # nothing written


def test_what_a_model_prints_goes_to_stderr_never_into_json(ws):
    for spec in (f"{ws}/m.py:chatty", f"{ws}/loud.py:tiny"):
        r = cli("show", spec, "--no-cache", "--json")  # a cache miss: the model's code runs
        assert r.returncode == 0, r
        assert strict_json(r.stdout)["ops"] > 0
        assert "chatty" in r.stderr or "loud import" in r.stderr
    r = cli("run", f"{ws}/m.py:chatty", "--json")  # the eager reference runs forward too
    assert r.returncode == 0 and strict_json(r.stdout)["matches_eager"], r
    assert "chatty forward" in r.stderr


def test_a_model_file_imports_the_module_beside_it_and_the_cache_follows_it(ws, monkeypatch):
    monkeypatch.chdir(ws / "pkg")
    r = cli("show", "main_model.py:build", "--json")
    assert r.returncode == 0, r
    before = strict_json(r.stdout)["param_bytes"]
    (ws / "pkg" / "helper.py").write_text("WIDTH = 64\n")
    try:
        r = cli("show", "main_model.py:build", "--json")  # the sibling changed: captured again
        assert r.returncode == 0, r
        assert strict_json(r.stdout)["param_bytes"] != before
    finally:
        (ws / "pkg" / "helper.py").write_text("WIDTH = 4\n")


def test_user_strings_are_printed_not_interpreted(ws):
    r = contract(["show", f"{ws}/weird.json"], 0)
    assert "[red]x[/red]" in r.stdout and ":fire:" in r.stdout and "\\x1b" in r.stdout
    assert "\x1b" not in r.stdout
    r = contract(["show", f"{ws}/m.py:fire"], 0)
    assert "🔥" not in r.stdout + r.stderr and "fire" in r.stdout


def test_graphs_from_python_files_are_named_after_the_function(ws, tmp_path):
    s = tmp_path / "s.json"
    assert cli("schedule", f"{SPECS}:bicubic", "-o", s).returncode == 0
    r = contract(["verify", f"{SPECS}:autocast_off", str(s)], 1)  # 1: not valid for this model
    assert "made for bicubic, not autocast_off" in r.stderr and "outside_models" not in r.stderr


def test_no_batch_and_the_default_batch_are_one_cache_entry():
    from streamplan.cache import CaptureCache
    from streamplan.models import ModelRequest

    cache = CaptureCache()
    key = cache.key_of
    assert key(ModelRequest("squeezenet")) == key(ModelRequest("squeezenet", batch=1))
    assert key(ModelRequest("squeezenet")) != key(ModelRequest("squeezenet", batch=2))
    assert key(ModelRequest("squeezenet", train=True)) == key(ModelRequest("squeezenet", batch=1, train=True))


def test_random_n_states_its_cap_in_help():
    assert "random:N[:seed] (N <= 200000)" in " ".join(cli("show", "--help").stdout.split())


def test_the_memory_trace_of_a_large_graph_is_cut_around_its_peak():
    r = contract(["memory", "random:120"], 0, json_too=False)
    assert len(r.stdout.splitlines()) < 80 and "--full-trace shows every one" in r.stdout
    assert "<- peak" in r.stdout
    full = cli("memory", "random:120", "--full-trace")
    assert len(full.stdout.splitlines()) > 120


def test_one_stream_is_not_said_to_run_branches_side_by_side():
    r = contract(["explain", "seed-concat", "--policy", "asap", "--fusion", "first"], 0)
    assert "one stream: nothing overlaps" in r.stdout
    assert "side by side" not in r.stdout


def test_a_closed_pipe_ends_the_command_quietly_with_status_0():
    p = subprocess.Popen(
        [sys.executable, "-m", "streamplan.cli", "show", "random:2000", "--graph"],  # more than a pipe holds
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout.readline()  # read one line, then hang up as `| head -1` does
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and err == "", err


def test_a_zoo_capture_is_given_fake_inputs_of_the_batch_asked_for(monkeypatch):
    """``--batch 1024`` built 1.5 GB of real example inputs for a capture that computes nothing."""
    from torch._subclasses.fake_tensor import FakeTensor

    import streamplan.models as models

    class Captured(Exception):
        pass

    seen = {}

    def capture(module, inputs, *, name, dtype):
        seen["inputs"] = inputs
        raise Captured

    monkeypatch.setattr(models, "_capture", capture)
    with pytest.raises(Captured):
        models.load_model("squeezenet", batch=4096)
    (x,) = seen["inputs"]
    assert isinstance(x, FakeTensor) and tuple(x.shape) == (4096, 3, 224, 224)
