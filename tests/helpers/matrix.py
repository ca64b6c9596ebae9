"""Model x policy matrices that cover every model and every policy without the full product.

Several test files check a property of *one* schedule of *one* graph (a generated module
equals eager, a launch log is sound, a fused run equals eager). The property depends on the
graph's structure (branches, cells, attention, tied weights) and on the kind of schedule the
policy makes (one stream, waves, an ASAP fork, IOS stages, ...), not on which of the two is
paired with which: every model run under a few policies, every policy run on a few models,
finds what the full product finds, at a fraction of the cost on two shared cores.

``pairs`` gives the cyclic "Latin square" pairs: model ``i`` with policies
``i, i + step, i + 2*step, ...`` (mod the number of policies), ``per_model`` of them. With
``per_model * len(models) >= len(policies)`` every policy appears, and each appears about
equally often, each time on other models. ``STREAMPLAN_FULL_MATRIX=1`` gives the whole
product instead (for hunting bugs, as ``make fuzz`` does for random inputs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

FULL = os.environ.get("STREAMPLAN_FULL_MATRIX") == "1"


def pairs(models: Sequence[str], policies: Sequence[str], per_model: int = 2) -> list[tuple[str, str]]:
    """(model, policy) pairs: every model ``per_model`` times and every policy at least once
    (the full product under ``STREAMPLAN_FULL_MATRIX=1``)."""
    if FULL or per_model >= len(policies):
        return [(m, p) for m in models for p in policies]
    step = max(1, len(policies) // per_model)  # spread one model's policies over the list
    out = [
        (m, policies[(i + k * step) % len(policies)]) for i, m in enumerate(models) for k in range(per_model)
    ]
    missing = set(policies) - {p for _, p in out}
    assert not missing, f"{missing} would never run: raise per_model"
    return out
