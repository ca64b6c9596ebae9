"""FSDP and DDP rank programs of a captured training step, scheduled by ``overlap``: structure,
sizes, the knobs' effect on the schedule, and what they do to memory at host launch."""

from __future__ import annotations

import pytest

from helpers.memory_oracles import brute_force_held_peak  # noqa: F401  (the oracle the figures rest on)
from helpers.parallel_models import stack_problem
from streamplan.errors import ModelSpecError
from streamplan.frontends.training import capture_training
from streamplan.ir.collectives import collective_of, collectives
from streamplan.ir.frozen import FrozenDict
from streamplan.ir.training import training_step
from streamplan.memory import host_order_peak_bytes, liveness
from streamplan.memory.comm_explain import comm_peak_note
from streamplan.memory.launch_time import held_peak
from streamplan.parallel import plan_of, rank_program
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.registry import make_schedule
from streamplan.schedule.verify import schedule_problems

RANKS = 4


@pytest.fixture(scope="module")
def step():
    return capture_training(stack_problem(8), optimizer="adam", name="stack")


def overlap(graph, **options):
    return make_schedule(graph, "overlap", ScheduleContext(options=FrozenDict(options)))


def test_fsdp_shards_every_unit_and_gathers_before_use(step):
    g = rank_program(step, f"fsdp={RANKS}")
    assert plan_of(g).ranks == RANKS and g.name == "stack.fsdp4"
    units = g.meta["parallel"]["units"]
    assert [u["unit"] for u in units] == ["embed", "blocks.0", "blocks.1", "blocks.2", "head"]
    for u in units:
        shard = g.values[u["shard"]]
        assert u["padded_numel"] % RANKS == 0 and u["padded_numel"] - u["numel"] < RANKS
        assert shard.kind == "param" and shard.shape == (u["padded_numel"] // RANKS,)
    kinds = [(collective_of(g, n).kind, n.attrs.get("phase")) for n in collectives(g)]
    assert kinds.count(("all_gather", "forward")) == 5
    # the embedding's weight is not read by the backward: four units are gathered again
    assert kinds.count(("all_gather", "backward")) == 4
    assert [k for k, _ in kinds].count("reduce_scatter") == 5
    ts = training_step(g)
    assert set(ts.gradients) == {u["shard"] for u in units}  # the optimizer updates the shards
    assert all(p in {u["shard"] for u in units} for p, _ in ts.optimizer_state.values())
    assert not any(p in g.values for p in training_step(step).gradients)  # no whole parameter is left


def test_without_reshard_the_forward_buffers_feed_the_backward(step):
    g = rank_program(step, f"fsdp={RANKS},reshard=false")
    assert not [n for n in collectives(g) if n.attrs.get("phase") == "backward"]
    s = overlap(g)
    kept = rank_program(step, f"fsdp={RANKS}")
    assert host_order_peak_bytes(g, s) > host_order_peak_bytes(kept, overlap(kept))


def test_ddp_buckets_follow_the_backward_and_are_reduced_in_place(step):
    g = rank_program(step, "ddp=2,bucket=4KiB")
    buckets = g.meta["parallel"]["buckets"]
    assert len(buckets) > 2 and sum(len(b["gradients"]) for b in buckets) == len(
        training_step(step).gradients
    )
    for n in collectives(g):
        assert collective_of(g, n).kind == "all_reduce" and n.mutates == n.inputs
    one = rank_program(step, "ddp=2,bucket=1GiB")
    assert len(one.meta["parallel"]["buckets"]) == 1


def test_a_plan_needs_a_training_step(step):
    from streamplan.frontends.torch_capture import capture

    problem = stack_problem(8)
    with pytest.raises(ModelSpecError, match="not a training step"):
        rank_program(capture(problem.module, problem.inputs), "fsdp=2")
    with pytest.raises(ModelSpecError, match="already one rank"):
        rank_program(rank_program(step, "fsdp=2"), "fsdp=2")


def test_overlap_puts_collectives_on_their_streams_with_the_knobs(step):
    g = rank_program(step, f"fsdp={RANKS}")
    s = overlap(g)
    assert schedule_problems(g, s) == []
    for n in collectives(g):
        assert s.streams[n.id] == (1 if n.op == "comm.all_gather" else 2)
    assert s.host_waits and s.record_stream  # in_flight=2 by default
    assert not overlap(g, in_flight=None).host_waits
    at = {op: i for i, op in enumerate(s.launch_order)}
    fwd = [n.id for n in collectives(g) if n.attrs.get("phase") == "forward"]
    deep = overlap(g, forward_prefetch=3, in_flight=None)
    at3 = {op: i for i, op in enumerate(deep.launch_order)}
    assert at3[fwd[3]] < at[fwd[3]]  # launched further ahead


def test_run_ahead_is_what_the_in_flight_limit_and_record_stream_bound(step):
    g = rank_program(step, f"fsdp={RANKS},prefetch=2")
    held = {}
    for name, opts in {
        "unbounded": {"in_flight": None},
        "limited": {"in_flight": 1},
        "event_waits": {"record_stream": False, "in_flight": None},
    }.items():
        s = overlap(g, **opts)
        held[name] = held_peak(liveness(g, s), s).peak_bytes
        assert held[name] >= host_order_peak_bytes(g, s)
    assert held["unbounded"] > held["limited"] >= held["event_waits"]
    s = overlap(g, record_stream=False, in_flight=None)
    assert held["event_waits"] == host_order_peak_bytes(g, s)  # nothing is held back


def test_the_peak_note_names_the_held_buffers_and_the_knob(step):
    g = rank_program(step, f"fsdp={RANKS},in_flight=none")
    s = overlap(g)
    note = comm_peak_note(g, s, held_peak(liveness(g, s), s))
    held = [b for b in note.buffers if b.held]
    assert held and all(b.role in ("gathered", "gradients", "shard") for b in held)
    assert any("in_flight=none" in r and "record_stream=false" in r for r in note.reasons)
