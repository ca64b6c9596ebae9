"""IOS's operator merge: which convolutions may merge, what the merged kernel costs, and the
search and IOS's executor with merge stages."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import streamplan
from streamplan.cost import AnalyticCostModel
from streamplan.cost.simulate import op_costs
from streamplan.errors import ScheduleError
from streamplan.fusion import FusionRules, fuse
from streamplan.schedule import make_schedule
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.ios import IosOptions, schedule_ios, synchronized_ms
from streamplan.schedule.ios_merge import conv_facts, mergeable, merged_facts, merged_node
from streamplan.schedule.verify import verify_schedule

IOS_KERNELS = FusionRules(gemm_epilogue=True, horizontal=False)


class Branches(nn.Module):
    """One input read by: a 1x1 and a 3x3 conv (mergeable), a strided 3x3, a depthwise 3x3 and a
    dilated 3x3 (none of which may merge with the first two)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(8, 16, 1)
        self.b = nn.Conv2d(8, 24, 3, padding=1)
        self.strided = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.dilated = nn.Conv2d(8, 8, 3, padding=2, dilation=2)

    def forward(self, x):
        x = torch.relu(x)
        a, b = torch.relu(self.a(x)), torch.relu(self.b(x))
        d, e = torch.relu(self.depthwise(x)), torch.relu(self.dilated(x))
        s = torch.relu(self.strided(x))
        return torch.cat([a, b, d, e], 1).mean() + s.mean()


class Pair(nn.Module):
    """Two small convolutions of one input (an Inception block's 1x1 and 3x3 at batch 1)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(8, 16, 1)
        self.b = nn.Conv2d(8, 24, 3, padding=1)

    def forward(self, x):
        x = torch.relu(x)
        return torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], 1)


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    g = streamplan.capture(Pair().eval(), (torch.randn(1, 8, 20, 20),))
    return fuse(g, IOS_KERNELS).graph


@pytest.fixture(scope="module")
def graph():
    torch.manual_seed(0)
    g = streamplan.capture(Branches().eval(), (torch.randn(1, 8, 20, 20),))
    return fuse(g, IOS_KERNELS).graph


def _conv(graph, weight_suffix):
    return next(p for p, n in enumerate(graph.nodes) if any(i.endswith(weight_suffix) for i in n.inputs))


def test_only_dense_unstrided_convolutions_of_one_input_merge(graph):
    a, b = _conv(graph, "a_weight"), _conv(graph, "b_weight")
    keys = mergeable(graph)
    assert set(keys) == {a, b} and keys[a] == keys[b]
    fa, fb = conv_facts(graph, graph.nodes[a]), conv_facts(graph, graph.nodes[b])
    assert fa.kernel == (1, 1) and fb.kernel == (3, 3) and fa.epilogue == fb.epilogue == ("relu",)
    assert conv_facts(graph, graph.nodes[_conv(graph, "depthwise_weight")]) is None  # grouped
    assert conv_facts(graph, graph.nodes[_conv(graph, "dilated_weight")]) is None  # dilated
    strided = conv_facts(graph, graph.nodes[_conv(graph, "strided_weight")])
    assert strided is not None and strided.stride == (2, 2) and strided.key != fa.key  # its own key, alone


def test_a_merged_convolution_is_one_conv_of_the_largest_kernel(graph):
    model = AnalyticCostModel("v100")
    a, b = _conv(graph, "a_weight"), _conv(graph, "b_weight")
    for p in (a, b):  # merging one convolution changes nothing
        assert merged_facts(graph, [p], model) == op_costs(graph, (graph.nodes[p].id,), model)
    mini, node = merged_node(graph, [a, b])
    assert mini.values["merged_weight"].shape == (40, 8, 3, 3)
    assert mini.values["merged_output"].shape == (1, 40, 20, 20)
    # the 1x1 padded to 3x3: 2 FLOPs x 400 pixels x 40 channels x 8 inputs x 9 taps, plus the two relus
    assert node.flops == 2 * 400 * 40 * 8 * 9 + 400 * 40
    merged = merged_facts(graph, [a, b], model).time_ms[0]
    apart = sum(op_costs(graph, (graph.nodes[a].id, graph.nodes[b].id), model).time_ms)
    assert merged < apart  # one small kernel instead of two: the fixed time once
    with pytest.raises(ValueError, match="cannot merge|can merge"):
        merged_node(graph, [a, _conv(graph, "strided_weight")])


def test_the_search_merges_when_one_kernel_beats_two_streams(pair):
    graph = pair
    model = AnalyticCostModel("v100")
    opts = IosOptions(executor="synchronized", sync_ms=0.005, merge=True)
    sched = schedule_ios(graph, ScheduleContext(cost=model, options=opts))
    verify_schedule(graph, sched)
    a, b = _conv(graph, "a_weight"), _conv(graph, "b_weight")
    ids = graph.node_ids
    assert sched.meta["merged"] == [[ids[a], ids[b]]]
    # the merged stage is one group; the schedule runs its convolutions on one stream
    assert [[ids[a], ids[b]]] in sched.meta["stages"]
    assert sched.streams[ids[a]] == sched.streams[ids[b]]
    # predicted_ms is IOS's executor running the stages with the merged kernel
    index = {op: i for i, op in enumerate(ids)}
    stages = [[[index[o] for o in g] for g in st] for st in sched.meta["stages"]]
    costs = op_costs(graph, ids, model)
    kernel = {frozenset((a, b)): merged_facts(graph, [a, b], model)}
    supply = model.device_facts.supply
    assert sched.meta["predicted_ms"] == pytest.approx(
        synchronized_ms(graph, stages, costs, supply, 0.005, kernel)
    )
    unmerged = synchronized_ms(graph, stages, costs, supply, 0.005)
    assert sched.meta["predicted_ms"] < unmerged
    plain = IosOptions(executor="synchronized", sync_ms=0.005)
    without = schedule_ios(graph, ScheduleContext(cost=model, options=plain))
    assert without.meta["merged"] == [] and sched.meta["predicted_ms"] < without.meta["predicted_ms"]


def test_a_stage_of_many_groups_can_beat_a_merge(graph):
    """A merge stage is one kernel alone; five branches side by side beat merging two of them."""
    model = AnalyticCostModel("v100")
    opts = IosOptions(executor="synchronized", sync_ms=0.005, merge=True)
    sched = schedule_ios(graph, ScheduleContext(cost=model, options=opts))
    verify_schedule(graph, sched)
    assert sched.meta["merged"] == [] and max(len(st) for st in sched.meta["stages"]) == 5


def test_synchronized_ms_costs_a_merged_stage_as_one_kernel():
    from streamplan.cost import FakeCostModel
    from streamplan.cost.simulate import OpCosts
    from streamplan.models import load_model

    g = load_model("seed-example2")  # a, {b -> d | c -> e}, f
    cost = FakeCostModel(1.0, occupancy=0.5, launch_ms=0.25)
    costs = op_costs(g, g.node_ids, cost)
    pos = {op: i for i, op in enumerate(g.node_ids)}
    a, b, c, d, e, f = (pos[x] for x in "abcdef")
    kernel = {frozenset((b, c)): OpCosts((1.5,), (0.5,), (0.25,))}
    stages = [[[a]], [[b, c]], [[d]], [[e]], [[f]]]
    # one stream, the host ahead: 0.25 + a 1.0 + the merged b+c 1.5 + d, e, f 3 x 1.0
    assert synchronized_ms(g, stages, costs, cost.device_facts.supply, 0.1, kernel) == pytest.approx(5.75)
    assert synchronized_ms(g, stages, costs, cost.device_facts.supply, 0.1) == pytest.approx(6.25)


def test_merge_needs_ios_executor():
    with pytest.raises(ValueError, match="synchronized"):
        IosOptions(merge=True)
    from streamplan.models import load_model

    with pytest.raises(ScheduleError, match="synchronized"):
        make_schedule(load_model("seed-example2"), "ios", ScheduleContext(options={"merge": True}))
    with pytest.raises(ScheduleError):
        make_schedule(
            load_model("seed-example2"),
            "ios",
            ScheduleContext(options={"merge": "yes", "executor": "synchronized"}),
        )


def test_merging_is_never_slower_than_the_parallel_only_search():
    """A merge search has more units (each mergeable convolution alone), so a small budget halves
    its blocks sooner; the parallel-only schedule is kept when it is faster."""
    from helpers.models import graph_of

    graph = fuse(graph_of("squeezenet", 1), IOS_KERNELS).graph
    model = AnalyticCostModel("v100")
    for budget in (20, 60_000):
        times = {}
        for merge in (False, True):
            opts = IosOptions(executor="synchronized", sync_ms=0.005, merge=merge, block_budget=budget)
            sched = schedule_ios(graph, ScheduleContext(cost=model, options=opts))
            verify_schedule(graph, sched)
            times[merge] = sched.meta["predicted_ms"]
        assert times[True] <= times[False] + 1e-12
    assert times[True] < times[False]  # searched whole, SqueezeNet's expand pairs merge
