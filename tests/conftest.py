"""Shared test setup: torch at one thread (the other core may be busy), offline HF hub, and a
capture cache of the session's own (never the user's ``~/.cache``)."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Every CLI run in the tests (in process or not) caches captures here, and helpers.shared keeps
# the captures and schedules every test process of the run shares. The first process makes the
# folder and removes it at exit; pytest-xdist's workers, started by it, inherit the folder.
_SHARED = "STREAMPLAN_TEST_SHARED_DIR"
if os.environ.get(_SHARED) and os.path.isdir(os.environ[_SHARED]):
    _CACHE_DIR = os.environ[_SHARED]
else:
    _CACHE_DIR = tempfile.mkdtemp(prefix="streamplan-test-cache-")
    os.environ[_SHARED] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["STREAMPLAN_CACHE_DIR"] = _CACHE_DIR

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
