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

settings.register_profile(
    "streamplan", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile("streamplan")
