"""The Pareto plot's labels never overlap: policies at one point share a label, the front is
labelled where its stream count changes, and a label that would cover another moves."""

from __future__ import annotations

import itertools

from streamplan.budget.pareto import FixedPoint, FrontPoint, ParetoFront
from streamplan.ir.schedule import StreamSchedule
from streamplan.report.pareto import front_figure

MIB = 1 << 20


def _front() -> ParetoFront:
    empty = StreamSchedule(launch_order=(), streams={}, waits=())
    points = tuple(
        FrontPoint(
            budget_bytes=(10 + k) * MIB,
            makespan_ms=5.0 - 0.01 * k,  # a dense staircase: neighbours almost on top of each other
            worst_case_peak_bytes=(10 + k) * MIB,
            worst_case_exact=True,
            streams=1 + k // 4,
            source="search",
            schedule=empty,
        )
        for k in range(12)
    )

    def fixed(policy: str, mib: float, ms: float, dominated: bool = False) -> FixedPoint:
        n = int(mib * MIB)
        return FixedPoint(policy, ms, n, n, True, 2, dominated)

    fixed_points = (
        fixed("sequential", 10, 5.0),
        fixed("memory", 10, 5.0),  # the same point as sequential
        fixed("wavefront", 10.2, 4.99, dominated=True),
        fixed("asap", 21, 4.88),
        fixed("nimble", 21.1, 4.885),
        fixed("ios", 20.9, 4.882),
    )
    return ParetoFront("net", "v100", False, "worst_case", points, fixed_points, 9 * MIB, 10 * MIB, 5.0, 1.0)


def test_no_two_labels_of_the_pareto_plot_overlap():
    import matplotlib.pyplot as plt

    fig = front_figure(_front())
    try:
        renderer = fig.canvas.get_renderer()
        texts = [t for ax in fig.axes for t in ax.texts]
        words = [t.get_text() for t in texts]
        assert "sequential, memory" in words  # one label for the two policies at one point
        assert sum(w.endswith(" str") for w in words) < len(_front().points)
        boxes = [t.get_window_extent(renderer) for t in texts]
        overlapping = [
            (words[i], words[j])
            for i, j in itertools.combinations(range(len(boxes)), 2)
            if boxes[i].overlaps(boxes[j])
        ]
        assert not overlapping, overlapping
    finally:
        plt.close(fig)
