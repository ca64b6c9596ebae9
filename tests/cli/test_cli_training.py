"""``--train`` through every command, the errors of a bad training model, and the founding experiment."""

from __future__ import annotations

import json
import textwrap

import pytest

from helpers.cli import assert_user_error, cli

MODEL = "random:24"
USER_MODELS = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    def mlp():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

    def with_loss():
        labels = torch.tensor([0, 2, 1, 1])
        return mlp(), (torch.randn(4, 6),), lambda out: F.cross_entropy(out, labels)

    def without_loss():
        return mlp(), (torch.randn(4, 6),)

    def vector_loss():
        return mlp(), (torch.randn(4, 6),), lambda out: out.sum(dim=1)

    """
)


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "models.py"
    path.write_text(USER_MODELS)
    return str(path)


def _json(*args):
    r = cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_show_reports_the_training_step_and_its_memory_by_category():
    d = _json("show", MODEL, "--train", "--optimizer", "adam")
    assert d["train"] is True and d["optimizer"] == "adam"
    b = d["memory_breakdown"]
    for key in ("parameters_bytes", "gradients_bytes", "optimizer_state_bytes", "saved_activations_bytes"):
        assert b[key] > 0, key
    assert b["optimizer_state_bytes"] <= 2 * b["parameters_bytes"]  # two moments per trained weight
    peak = b["peaks"]["host-order"]
    assert peak["phases"] and peak["total_bytes"] >= peak["saved_activations_bytes"] > 0
    assert _json("show", MODEL)["train"] is False


def test_export_verify_schedule_simulate_and_plot_take_train(tmp_path):
    graph, sched, image = tmp_path / "g.json", tmp_path / "s.json", tmp_path / "m.png"
    assert cli("export", MODEL, "--train", "--optimizer", "sgd", "-o", str(graph)).returncode == 0
    r = cli("schedule", MODEL, "--train", "--optimizer", "sgd", "--policy", "asap", "-o", str(sched))
    assert r.returncode == 0, r.stderr
    assert cli("verify", str(graph), str(sched)).returncode == 0  # the saved step is the same graph
    assert cli("verify", MODEL, str(sched), "--train", "--optimizer", "sgd").returncode == 0
    assert cli("verify", MODEL, str(sched), "--train").returncode == 1  # another step: no update ops
    assert (
        _json("simulate", str(graph), "--train", "--optimizer", "sgd", "--policy", "asap")["makespan_ms"] > 0
    )
    r = cli("plot", MODEL, "--train", "--policies", "sequential,asap", "-o", str(image))
    assert r.returncode == 0 and image.stat().st_size > 1000, r.stderr


def test_compare_memory_and_explain_break_the_peaks_down():
    d = _json("compare", MODEL, "--train", "--policies", "sequential,asap")
    assert d["train"] is True and d["training_peak"]["baseline"] == "sequential"
    assert all("memory_breakdown" in row for row in d["rows"])
    d = _json("memory", MODEL, "--train", "--optimizer", "momentum", "--policy", "asap")
    assert d["train"] is True and set(d["memory_breakdown"]["peaks"]) == {
        "host-order",
        "worst-case",
        "simulated",
    }
    r = cli("explain", MODEL, "--train", "--policy", "asap")
    assert r.returncode == 0 and "saved activation" in r.stdout and "composition of each peak" in r.stdout


def test_run_train_json_compares_with_eager_and_predicts_the_peak():
    d = _json("run", MODEL, "--train", "--optimizer", "adam", "--policy", "sequential", "--repeat", "1")
    assert d["train"] is True and d["matches_eager"] is True and d["max_abs_error"] == 0
    assert d["compared"] == ["loss", "updated parameters"]
    assert d["measured_peak_bytes"] == d["predicted_peak_bytes"]
    assert d["tracked_peak_bytes"] == d["predicted_tracked_peak_bytes"]


def test_a_user_model_with_its_loss_runs_and_without_one_is_warned_about(user_file):
    d = _json(
        "run",
        f"{user_file}:with_loss",
        "--train",
        "--optimizer",
        "sgd",
        "--policy",
        "asap",
        "--chaos",
        "--repeat",
        "1",
    )
    assert d["matches_eager"] is True
    r = cli("show", f"{user_file}:without_loss", "--train")
    assert r.returncode == 0 and "warning: " in r.stderr and "sum of the outputs" in r.stderr


def test_bad_training_input_is_one_clear_line(user_file):
    """The rest of the bad models (frozen weights, data-dependent backward) are tested on the API."""
    assert_user_error(cli("show", MODEL, "--train", "--optimizer", "lamb"), "unknown optimizer 'lamb'")
    assert_user_error(cli("show", MODEL, "--optimizer", "adam"), "needs --train")
    assert_user_error(cli("show", "seed-example2", "--train"), "nothing to train")
    assert_user_error(cli("show", f"{user_file}:vector_loss", "--train"), "the loss must be a scalar")


@pytest.mark.slow
def test_the_founding_experiment_answer_has_its_shape():
    """Inception V3 training (small batch here; batch 32 in BENCHMARKS.md): the peak is in the
    backward and mostly saved activations; multi-stream moves it by little, and the answer says
    where and why."""
    d = _json("compare", "inception_v3", "--train", "--batch", "2", "--policies", "sequential,wavefront,asap")
    rows = {r["policy"]: r for r in d["rows"]}
    seq = rows["sequential"]["memory_breakdown"]["peaks"]["worst-case"]
    assert seq["phases"] == ["backward"]
    categories = ("parameters", "gradients", "optimizer_state", "saved_activations", "temporaries", "inputs")
    assert max(categories, key=lambda c: seq[f"{c}_bytes"]) == "saved_activations"
    transient = seq["saved_activations_bytes"] + seq["gradients_bytes"] + seq["temporaries_bytes"]
    assert seq["saved_activations_bytes"] > 0.6 * transient  # 94% at batch 32 (BENCHMARKS.md)
    for policy in ("wavefront", "asap"):
        wc = rows[policy]["memory"]["worst_case_peak_bytes"]["upper"]
        base = rows["sequential"]["memory"]["worst_case_peak_bytes"]["upper"]
        assert abs(wc - base) < 0.1 * base  # streams move the training peak by under a tenth
    answer = d["training_peak"]["answer"]
    assert "saved activations" in answer[0] and len(answer) >= 3
