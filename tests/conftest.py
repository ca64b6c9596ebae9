"""Shared test setup: torch at one thread (the other core may be busy), offline HF hub."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the IR-only tests do not need torch
    pass
