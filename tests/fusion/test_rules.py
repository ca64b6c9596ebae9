"""The fusion rules on small graphs whose kernels are known, and invariants on random ones."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from helpers.dags import chain, diamond
from helpers.fusion import dags_with_boundaries, with_gemms
from streamplan.fusion import FusionRules, fuse, kernel_count
from streamplan.fusion.branches import merged_branches
from streamplan.ir.fused import fused_parts, is_concat_in_place, is_fused
from streamplan.ir.verify import verify
from streamplan.zoo.seed import concat, example2


def kernels_of(result) -> list[tuple[str, ...]]:
    return [tuple(p.id for p in fused_parts(n)) or (n.id,) for n in result.graph.nodes]


def test_pointwise_chain_is_one_kernel_and_its_intermediates_leave_the_graph():
    g = chain(4)
    r = fuse(g)
    (node,) = r.graph.nodes
    assert is_fused(node) and node.attrs["kind"] == "pointwise"
    assert node.inputs == ("x",) and node.outputs == ("v3",)
    assert set(r.graph.values) == {"x", "v3"}  # v0..v2 are never materialised
    assert node.flops == g.total_flops()
    assert node.bytes_read == g.values["x"].nbytes and node.bytes_written == g.values["v3"].nbytes


def test_gemms_are_boundaries():
    g = with_gemms(chain(5), {"n2"})
    assert kernels_of(fuse(g)) == [("n0", "n1"), ("n2",), ("n3", "n4")]


def test_the_founding_example_collapses_into_one_kernel_that_merges_both_branches():
    r = fuse(concat(), FusionRules(cse=False))
    assert kernel_count(r.graph) == 1
    (m,) = merged_branches(r)
    assert sorted(m.branches) == [("atan1", "atan3"), ("atan2", "atan4")]
    # the concatenation is the kernel's last step: atan3 and atan4 are never materialised
    assert set(r.graph.values) == {"x", "concatenate"}


def test_identical_ops_run_once():
    """Both branches of the founding example compute atan(atan(atan(x))): a compiler keeps one."""
    r = fuse(concat())
    assert dict(r.duplicates) == {"atan2": "atan1", "atan4": "atan3"}
    (kernel,) = [n for n in r.graph.nodes if n.op.startswith("fused.")]
    assert [p.id for p in fused_parts(kernel)] == ["atan0", "atan1", "atan3", "concatenate"]
    assert kernel.inputs == ("x",) and kernel.outputs == ("concatenate",)
    assert r.kernel_of("atan4") == kernel.id


def test_horizontal_fusion_merges_siblings_only_when_allowed():
    no_cse = FusionRules(cse=False)  # n1 and n2 are the same op on the same input
    g = with_gemms(diamond(), {"n3"})  # n1 and n2 both read n0; n3 is a GEMM
    assert kernels_of(fuse(g, no_cse)) == [("n0", "n1", "n2"), ("n3",)]
    g = with_gemms(diamond(), {"n0", "n3"})  # siblings share only a GEMM's output
    assert kernels_of(fuse(g, no_cse)) == [("n0",), ("n1", "n2"), ("n3",)]
    no_horizontal = FusionRules(cse=False, horizontal=False)
    assert kernels_of(fuse(g, no_horizontal)) == [("n0",), ("n1",), ("n2",), ("n3",)]


def test_max_kernel_ops():
    assert [len(k) for k in kernels_of(fuse(chain(10), FusionRules(max_kernel_ops=4)))] == [4, 4, 2]


def test_no_fusion_through_another_kernel():
    # n0 -> n1 (GEMM) -> n2 and n0 -> n2: fusing n0 with n2 would put the GEMM inside a cycle
    from helpers.dags import dag

    g = with_gemms(dag({1: [0], 2: [0, 1]}, 3), {"n1"})
    assert kernels_of(fuse(g)) == [("n0",), ("n1",), ("n2",)]


def test_stream_aware_keeps_the_branches_of_the_founding_example():
    from streamplan.fusion import schedule_with_fusion
    from streamplan.schedule.context import ScheduleContext

    planned = schedule_with_fusion(example2(), "asap", ScheduleContext(fusion="stream-aware"))
    assert planned.schedule.num_streams == 2 and kernel_count(planned.graph) == 3
    assert not merged_branches(planned.fusion) and not planned.fusion.duplicates  # two streams: both run
    first = schedule_with_fusion(example2(), "asap", ScheduleContext(fusion="first"))
    assert first.schedule.num_streams == 1 and kernel_count(first.graph) == 1


def test_concat_written_in_place_by_two_kernels_launches_nothing():
    from streamplan.fusion import schedule_with_fusion
    from streamplan.schedule.context import ScheduleContext

    planned = schedule_with_fusion(concat(), "asap", ScheduleContext(fusion="stream-aware"))
    cat = planned.graph.node("concatenate")
    assert is_concat_in_place(cat) and kernel_count(planned.graph) == 2


@settings(max_examples=60, deadline=None)
@given(dags_with_boundaries(max_nodes=12))
def test_fused_graphs_verify_and_keep_flops_and_outputs(g):
    r = fuse(g)
    verify(r.graph)
    assert (
        r.graph.total_flops()
        == r.base.total_flops()
        == g.total_flops() - sum(g.node(d).flops for d in r.duplicates)
    )
    assert r.graph.outputs == g.outputs and r.graph.inputs == g.inputs
    assert kernel_count(r.graph) <= kernel_count(g)
    parts = [p for ps in r.groups.values() for p in ps]
    assert len(parts) == len(set(parts))
    assert set(parts) | {n.id for n in r.graph.nodes} | set(r.duplicates) >= set(g.node_ids)
    for node in r.graph.nodes:  # a fused node reads and writes only values of the graph
        assert set(node.inputs) | set(node.outputs) <= set(r.graph.values)


@pytest.mark.parametrize("spec", ["seed-example1", "seed-example2", "seed-concat", "random:200"])
def test_fused_zoo_graphs_round_trip_through_json(spec):
    from streamplan.ir.serialize import dumps, loads
    from streamplan.models import load_model

    fused = fuse(load_model(spec)).graph
    assert loads(dumps(fused)) == fused
