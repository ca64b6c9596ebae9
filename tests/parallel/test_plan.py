"""The parallel plan's grammar and FSDP's wrapping units."""

from __future__ import annotations

import pytest

from streamplan.errors import BudgetError, ModelSpecError
from streamplan.parallel.plan import DEFAULT_BUCKET_BYTES, ParallelPlan
from streamplan.parallel.units import ROOT, wrapping_units


def test_defaults_and_knobs():
    p = ParallelPlan.parse("fsdp=8")
    assert (p.strategy, p.ranks, p.forward_prefetch, p.backward_prefetch, p.in_flight) == ("fsdp", 8, 1, 1, 2)
    assert p.reshard_after_forward and p.record_stream and p.bucket_bytes == DEFAULT_BUCKET_BYTES
    q = ParallelPlan.parse(
        "fsdp=4, prefetch=2, in_flight=none, reshard=false, record_stream=no, units=children"
    )
    assert (q.forward_prefetch, q.backward_prefetch, q.in_flight) == (2, 2, None)
    assert not q.reshard_after_forward and not q.record_stream and q.units == "children"
    assert ParallelPlan.parse("fsdp=2,fwd_prefetch=0,bwd_prefetch=3").backward_prefetch == 3
    d = ParallelPlan.parse("ddp=8,bucket=4MiB")
    assert (d.strategy, d.bucket_bytes) == ("ddp", 4 << 20)


@pytest.mark.parametrize(
    "text", ["fsdp=8", "fsdp=4,prefetch=0,in_flight=none,reshard=false", "ddp=2,bucket=1MB"]
)
def test_describe_parses_back_to_the_same_plan(text):
    p = ParallelPlan.parse(text)
    assert ParallelPlan.parse(p.describe()) == p
    assert ParallelPlan.from_dict(p.to_dict()) == p and hash(p) == hash(ParallelPlan.parse(text))


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("tp=2", "tensor parallelism"),
        ("fsdp=8,tp=2", "tensor parallelism"),
        ("zero=8", "starts with fsdp=N or ddp=N"),
        ("fsdp=eight", "whole number"),
        ("fsdp=0", ">= 1"),
        ("fsdp=8,ddp=8", "one strategy"),
        ("fsdp=8,prefetch", "not key=value"),
        ("fsdp=8,in_flight=0", ">= 1 or none"),
        ("fsdp=8,reshard=maybe", "true or false"),
        ("fsdp=8,speed=11", "unknown parallel plan knob"),
        ("fsdp=8,units=leaves", "wrapping rule"),
    ],
)
def test_mistakes_are_named(text, message):
    with pytest.raises(ModelSpecError, match=message):
        ParallelPlan.parse(text)


def test_a_bad_bucket_size_is_a_size_error():
    with pytest.raises(BudgetError):
        ParallelPlan.parse("ddp=8,bucket=lots")


def llama_like(layers: int = 4) -> dict[str, int]:
    sizes = {"model.embed_tokens.weight": 1000, "lm_head.weight": 1000, "model.norm.weight": 10}
    for i in range(layers):
        sizes[f"model.layers.{i}.attn.weight"] = 400
        sizes[f"model.layers.{i}.mlp.weight"] = 800
        sizes[f"model.layers.{i}.norm.weight"] = 10
    return sizes


def test_auto_units_are_the_layers_of_a_decoder():
    units = wrapping_units(llama_like())
    assert units["model.layers.2.mlp.weight"] == units["model.layers.2.attn.weight"] == "model.layers.2"
    assert units["model.embed_tokens.weight"] == "model.embed_tokens"
    assert units["lm_head.weight"] == "lm_head"
    assert units["model.norm.weight"] == ROOT  # too small for a unit of its own


def test_children_units_are_a_cnns_stages():
    sizes = {"conv1.weight": 100, "bn1.weight": 2, "fc.weight": 2000}
    for stage, n in (("layer1", 2), ("layer2", 2), ("layer3", 2), ("layer4", 3)):
        for b in range(n):
            sizes[f"{stage}.{b}.conv.weight"] = {
                "layer1": 100,
                "layer2": 400,
                "layer3": 1600,
                "layer4": 6400,
            }[stage]
    children = wrapping_units(sizes, "children")
    assert {children[f"layer4.{b}.conv.weight"] for b in range(3)} == {"layer4"}
    auto = wrapping_units(sizes, "auto")  # layer4 holds most bytes: one unit per block
    assert auto["layer4.0.conv.weight"] == "layer4.0" and auto["layer2.0.conv.weight"] == "layer2"
    assert auto["layer1.0.conv.weight"] == ROOT  # under 1% of the bytes
    assert children["bn1.weight"] == ROOT
