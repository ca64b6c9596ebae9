"""``streamplan fit``: the answer as text and JSON, exit 3 when the step does not fit, several
devices at once, and its user errors in one or two lines."""

from __future__ import annotations

import json

from helpers.cli import assert_user_error, cli
from streamplan.cli.errors import EXIT_OUT_OF_MEMORY

STEP = ("random:30", "--train", "--optimizer", "adam", "--batch", "4")


def test_fits_as_json_and_as_text():
    r = cli("fit", *STEP, "--device", "h100", "--json")
    assert r.returncode == 0, r
    d = json.loads(r.stdout)
    assert d["fits"] is True and d["device"] == "h100" and d["changes"] == []
    assert sum(d["peak"]["by_role_bytes"].values()) == d["peak"]["reserved_peak_bytes"]
    assert d["training"]["optimizer"] == "adam"
    text = cli("fit", *STEP, "--device", "h100,l4")
    assert text.returncode == 0, text
    assert "on h100: fits" in text.stdout and "on l4: fits" in text.stdout and "peak by role" in text.stdout


def test_does_not_fit_exits_3_with_the_changes():
    r = cli("fit", *STEP, "--device", "a100", "--device-memory-gib", "0.02", "--time-limit", "5", "--json")
    assert r.returncode == EXIT_OUT_OF_MEMORY, r
    d = json.loads(r.stdout)
    assert d["fits"] is False and d["oom"] is not None
    assert {c["kind"] for c in d["changes"]} == {"memory-order", "remat", "budget", "micro-batch"}
    assert d["usable_bytes"] == int(0.02 * (1 << 30))


def test_user_errors():
    assert_user_error(cli("fit", *STEP, "--device", "tpu"), "unknown device")
    assert_user_error(cli("fit", "random:30", "--precision", "mixed-bf16"), "--train")
    assert_user_error(cli("fit", "random:30", "--optimizer", "adam"), "--train")
    assert_user_error(cli("fit", *STEP, "--device", "cpu"), "no device memory")
    assert_user_error(cli("fit", "hf:no-such-model", "--train"), "curated")
    r = cli("fit", "hf:no-such-model", "--json")
    assert r.returncode == 2 and "error" in json.loads(r.stdout)
