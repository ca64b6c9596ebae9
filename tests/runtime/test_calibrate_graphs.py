"""The op micro-benchmarks: each kind's sizes run back to back after an untimed warm-up run, so
that every sample finds its kind's code warm, as ops in a model do."""

from __future__ import annotations

from collections import Counter

import pytest

from streamplan.cost.kinds import UNALIGNED, op_features
from streamplan.cost.op_classes import is_view_op
from streamplan.runtime.calibrate_graphs import is_prep, op_bench_graph


@pytest.fixture(scope="module")
def bench():
    return op_bench_graph("cpu")


def _kernels(bench):
    g = bench.graph
    return [(n, op_features(g, n).kind) for n in g.nodes if not is_prep(n) and not is_view_op(g, n)]


def test_every_sample_follows_an_op_of_its_own_kind(bench):
    kernels = _kernels(bench)
    assert not bench.is_sample(kernels[0][0])  # the very first op is a warm-up
    for (_, before), (node, kind) in zip(kernels, kernels[1:]):
        if bench.is_sample(node):
            assert before == kind, (node.id, before, kind)


def test_each_kind_has_one_warm_up_and_samples_at_several_sizes(bench):
    kernels = _kernels(bench)
    warm = Counter(kind for n, kind in kernels if not bench.is_sample(n))
    samples = Counter(kind for n, kind in kernels if bench.is_sample(n))
    assert set(warm) == set(samples)
    assert warm["gemm"] == 2 and all(c == 1 for k, c in warm.items() if k != "gemm")  # linear and bmm
    assert samples["conv_grouped"] >= 10 and samples[UNALIGNED] >= 10
    assert all(c >= 2 for c in samples.values())
