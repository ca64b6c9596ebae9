"""Sweeps: the same analysis as ``compare`` over every combination of models, batches,
dtypes, inference or training steps (and optimizers), devices, CUDA-graph mode, stream
caps, fusion modes, policies and memory budgets, on a local process pool or a Ray cluster.

.. code-block:: python

    from streamplan.sweep import SweepSpec, run_sweep

    spec = SweepSpec.of(models="inception_v3,randwire", batches=[1, 8, 32], devices="v100,h100")
    result = run_sweep(spec, output="results.jsonl")  # resumable: rerun to finish or skip
    df = result.to_dataframe()                      # with pandas installed

Rows are ``SweepRow``: the job's axes plus the fields of a ``compare --json`` row.
``docs/sweep.md`` describes the engines, the output format and resuming.
"""

from streamplan.sweep.engine import CaptureGroup, Engine, group_jobs
from streamplan.sweep.journal import Journal, SweepMismatchError, read_rows
from streamplan.sweep.local import LocalEngine
from streamplan.sweep.ray_engine import RayConnectError, RayEngine, import_ray
from streamplan.sweep.rows import TIMING_FIELDS, SweepRow
from streamplan.sweep.run import SweepInterrupted, SweepResult, run_sweep
from streamplan.sweep.spec import AXES, AXIS_NAMES, Axis, Job, SweepSettings, SweepSpec
from streamplan.sweep.sweep_file import load_sweep_file

__all__ = [
    "AXES",
    "AXIS_NAMES",
    "TIMING_FIELDS",
    "Axis",
    "CaptureGroup",
    "Engine",
    "Job",
    "Journal",
    "LocalEngine",
    "RayConnectError",
    "RayEngine",
    "SweepInterrupted",
    "SweepMismatchError",
    "SweepResult",
    "SweepRow",
    "SweepSettings",
    "SweepSpec",
    "group_jobs",
    "import_ray",
    "load_sweep_file",
    "read_rows",
    "run_sweep",
]
