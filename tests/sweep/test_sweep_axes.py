"""The axes that decide the graph or the context beyond model and device: training steps and
their optimizer, CUDA-graph mode, fusion and memory budgets; their rows, resume keys and plots.

Jobs run in this process (``InProcessEngine``) except where a test says otherwise: the
workers' code is the same, and the local pool's processes are tested in test_sweep_local.
"""

from __future__ import annotations

import json

import pytest

from streamplan.app.analysis import compare_policies
from streamplan.errors import StreamplanError
from streamplan.ir.training import OPTIMIZERS
from streamplan.report.sweep import pareto_fronts, render, summary_table
from streamplan.schedule.registry import POLICIES, policy_info
from streamplan.sweep import Job, SweepRow, SweepSettings, SweepSpec, load_sweep_file, read_rows, run_sweep
from streamplan.sweep.worker import capture, run_job

FAST = SweepSettings(time_limit_s=2)


class InProcessEngine:
    """Runs each group's capture and jobs here, one after another (the engine contract, no processes)."""

    name = "in-process"

    def __init__(self):
        self.captures = 0

    def run(self, groups, settings, emit, *, share_captures=True):
        for group in groups:
            shared = capture(group.request) if share_captures else None
            self.captures += share_captures
            for job in group.jobs:
                emit(run_job(job, settings, shared))


def test_a_budget_multiplies_only_budget_aware_policies_and_an_optimizer_only_training_steps():
    spec = SweepSpec.of(
        models="random:12:1",
        policies="sequential,asap,budget",
        budgets="1.0x, 1x, 1.2x, none, 12MiB",  # 1.0x and 1x are one budget
        train="false,true",
        optimizers="none,sgd",
    )
    assert spec.values["budget"] == ("1x", "1.2x", None, f"{12 << 20}B")
    jobs = spec.jobs()
    # inference: sequential, asap, budget x 4; training: the same for each of 2 optimizers
    assert len(jobs) == len(spec) == 6 + 2 * 6 and len({j.key() for j in jobs}) == len(jobs)
    assert all(j.budget is None for j in jobs if not policy_info(j.policy).budgeted)
    assert {j.optimizer for j in jobs if not j.train} == {"none"}
    # one capture per model, batch, dtype, training step and optimizer, shared by every policy and budget
    assert len({j.request() for j in jobs}) == 3
    assert Job("random:12:1", train=True, optimizer="adam").request().optimizer == "adam"
    assert [p for p in POLICIES if policy_info(p).budgeted] == ["budget"]


@pytest.mark.parametrize(
    ("axes", "fragment"),
    [
        ({"budgets": "0.8x"}, "only apply to budget-aware policies"),
        ({"budgets": "lots", "policies": "budget"}, "cannot read the memory budget"),
        ({"budgets": "-1x", "policies": "budget"}, "cannot read the memory budget"),
        ({"optimizers": "sgd"}, "only applies to training steps"),
        ({"optimizers": "lbfgs", "train": "true"}, "unknown optimizer 'lbfgs'"),
        ({"train": "maybe"}, "train must be true or false"),
        ({"cuda_graphs": "2"}, "cuda_graphs must be true or false"),
        ({"fusion": "all"}, "unknown fusion mode 'all'"),
    ],
)
def test_bad_values_of_the_new_axes_are_user_errors(axes, fragment):
    with pytest.raises(StreamplanError, match=fragment):
        SweepSpec.of(models="random:12:1", **axes)


@pytest.mark.parametrize(
    "axes",
    [  # deterministic searches only (a time-limited one may differ between two runs)
        {"model": "random:8:1", "train": True, "optimizer": "sgd", "cuda_graphs": True, "policy": "asap"},
        {
            "model": "random:12:1",
            "fusion": "first",
            "cuda_graphs": True,
            "policy": "budget",
            "budget": "1.1x",
        },
    ],
    ids=["training-step", "fusion-budget"],
)
def test_a_row_has_the_fields_of_compare(axes):
    job = Job(**axes)
    row = run_job(job, FAST, capture(job.request()))
    assert row.ok, row.error
    graph = job.request().load()
    seq, mine = compare_policies(graph, ["sequential", job.policy], job.context(FAST))
    expected = json.loads(json.dumps(mine.to_dict()))
    del expected["search_time_s"]
    got = row.to_dict()
    assert {k: got[k] for k in expected} == expected  # every compare field, the same figures
    assert got["bound_ms"] > 0 and got["bound_ratio"] >= 1.0
    assert ("memory_breakdown" in got) == job.train
    assert {k: got[k] for k in axes} == axes
    assert row.speedup == pytest.approx(seq.makespan_ms / mine.makespan_ms)
    if job.budget:
        assert row.worst_case_peak_bytes <= 1.1 * seq.memory.worst_case.upper_bytes


def test_a_rerun_with_a_new_axis_value_runs_only_its_rows(tmp_path):
    out = tmp_path / "r.jsonl"
    first = SweepSpec.of(models="random:12:1", policies="sequential,budget", budgets="1.2x")
    a = run_sweep(first, settings=FAST, output=out, engine=InProcessEngine())
    assert a.ran == 2 and a.failed == 0
    wider = SweepSpec.of(
        models="random:12:1", policies="sequential,budget", budgets="1.2x,none", cuda_graphs="false,true"
    )
    engine = InProcessEngine()
    b = run_sweep(wider, settings=FAST, output=out, engine=engine)
    assert (b.skipped, b.ran, b.total) == (2, 4, 6) and b.complete and engine.captures == 1
    rows = read_rows(out)
    assert len(rows) == 6 == len({r.key for r in rows})
    # a row written before these axes existed reads back with their neutral values (so it resumes)
    old = {k: v for k, v in rows[0].to_dict().items() if k not in ("train", "optimizer", "cuda_graphs")}
    old = {k: v for k, v in old.items() if k not in ("fusion", "budget")}
    assert SweepRow.from_dict(old).key == rows[0].key


def test_a_sweep_file_names_the_new_axes(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(
        'models = ["random:12:1"]\npolicies = ["asap", "budget"]\nbudgets = ["1.0x", "1.5x"]\n'
        'train = [false, true]\noptimizers = ["none", "adam"]\ncuda_graphs = true\n'
        'fusion = ["none", "first"]\n'
    )
    axes, _ = load_sweep_file(path)
    spec = SweepSpec.of(**axes)
    assert spec.values["optimizer"] == ("none", "adam") and spec.values["cuda_graphs"] == (True,)
    # per fusion mode: inference 1 + 2, training (2 optimizers) 2 x (1 + 2)
    assert len(spec) == 2 * (3 + 6)
    assert set(OPTIMIZERS) >= set(spec.values["optimizer"])


def _row(policy, peak, ms, budget=None, batch=1):
    fields = {"makespan_ms": ms, "memory": {"worst_case_peak_bytes": {"upper": peak}}, "speedup": 1.0}
    return SweepRow(Job("random:12:1", batch=batch, policy=policy, budget=budget), FAST, fields)


def test_the_pareto_front_keeps_the_rows_nothing_beats_on_both():
    rows = [
        _row("sequential", 100, 10.0),
        _row("asap", 300, 4.0),
        _row("ios", 320, 5.0),  # beaten by asap on both
        _row("budget", 150, 6.0, "1.5x"),
        _row("budget", 100, 8.0, "1x"),  # beats sequential at the same peak
        _row("asap", 50, 1.0, batch=2),  # another setting: its own front
    ]
    fronts = pareto_fronts(rows)
    assert len(fronts) == 2
    front = next(f for f in fronts.values() if len(f) > 1)
    assert [(p.label, p.peak_bytes, p.makespan_ms) for p in front] == [
        ("budget@1x", 100, 8.0),
        ("budget@1.5x", 150, 6.0),
        ("asap", 300, 4.0),
    ]
    for fmt, magic in (("png", b"\x89PNG"), ("svg", b"<?xml")):
        data = render(rows, "pareto", fmt=fmt)
        assert data.startswith(magic) and len(data) > 1000
    assert summary_table(rows).row_count == 2  # budget rows are compared with the other policies
