"""The application layer: requests in, typed results out, for the CLI and for Python users.

Each function does what one command does, without printing: ``compare_policies``
(``streamplan compare``), ``analyze_run_memory`` (``memory``), ``explain_policy``
(``explain``), ``memory_curves`` (``plot``), ``run_model`` (``run``), ``codegen_policy``
(``codegen``), ``report_model`` (``report``); for training steps ``describe_step``
(``show --train``) and ``training_answer`` (``compare --train``); ``plan_remat`` (``remat``),
``plan_checkpointing`` (``remat --checkpointing``); ``calibrate`` (``calibrate``: a device
profile measured on this machine). ``make_context`` builds the ``ScheduleContext`` they take
from a device profile (and a measured table).
Presentation lives in ``streamplan.report``; the command line in ``streamplan.cli``.
"""

from streamplan.app.analysis import (
    MemoryCurve,
    PolicyRow,
    PolicyRun,
    compare_policies,
    memory_curves,
    run_policy,
    run_schedule,
)
from streamplan.app.calibrate import CalibrationResult, calibrate
from streamplan.app.codegen import GeneratedModule, codegen_policy, codegen_run
from streamplan.app.context import MeasuredCoverage, cost_model, make_context
from streamplan.app.explain import ExplainResult, SimulatedNote, explain_policy, explain_run
from streamplan.app.memory import MemoryAnalysis, analyze_run_memory
from streamplan.app.remat import RematPlan, plan_checkpointing, plan_remat
from streamplan.app.report import ModelReport, PolicyReport, report_model
from streamplan.app.run import RunReport, profile_for, run_model
from streamplan.app.training import TrainingAnswer, describe_step, step_breakdown, training_answer

__all__ = [
    "CalibrationResult",
    "ExplainResult",
    "GeneratedModule",
    "MeasuredCoverage",
    "MemoryAnalysis",
    "MemoryCurve",
    "ModelReport",
    "PolicyReport",
    "PolicyRow",
    "PolicyRun",
    "RematPlan",
    "RunReport",
    "SimulatedNote",
    "TrainingAnswer",
    "analyze_run_memory",
    "calibrate",
    "codegen_policy",
    "codegen_run",
    "compare_policies",
    "describe_step",
    "cost_model",
    "explain_policy",
    "explain_run",
    "make_context",
    "memory_curves",
    "plan_checkpointing",
    "plan_remat",
    "profile_for",
    "report_model",
    "run_model",
    "run_policy",
    "run_schedule",
    "step_breakdown",
    "training_answer",
]
