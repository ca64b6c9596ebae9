"""Hand-made schedules of the seed examples (what the golden cases and oracles compare against)."""

from __future__ import annotations

from streamplan.schedule.events import with_derived_waits


def sequential(g):
    """Every op on stream 0 in graph order."""
    return with_derived_waits(g, g.node_ids, {op: 0 for op in g.node_ids}, "sequential")


def asap(g):
    """RAF's asap for the seed examples: the second branch (c, e) on stream 1."""
    streams = {op: (1 if op in ("c", "e") else 0) for op in g.node_ids}
    return with_derived_waits(g, g.node_ids, streams, "asap")
