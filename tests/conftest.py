"""Shared test setup: torch at one thread (the other core may be busy), offline HF hub."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the IR-only tests do not need torch
    pass

# A loaded 2-core CI machine must not turn slow example generation into failures.
from hypothesis import HealthCheck, settings  # noqa: E402

# Derandomized: CI runs the same examples every time, so a red run is reproducible, never luck.
settings.register_profile(
    "streamplan",
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("streamplan")
# STREAMPLAN_HYPOTHESIS=stress: many random examples, for hunting bugs rather than for CI.
settings.register_profile("stress", deadline=None, max_examples=300, suppress_health_check=list(HealthCheck))
if os.environ.get("STREAMPLAN_HYPOTHESIS") == "stress":
    settings.load_profile("stress")
