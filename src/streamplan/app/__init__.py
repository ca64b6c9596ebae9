"""The application layer: requests in, typed results out, for the CLI and for Python users.

Each function does what one command does, without printing: ``compare_policies``
(``streamplan compare``), ``analyze_run_memory`` (``memory``), ``explain_policy``
(``explain``), ``memory_curves`` (``plot``), ``run_model`` (``run``), ``plan_remat``
(``remat``). ``make_context`` builds the ``ScheduleContext`` they take from a device
profile (and a measured table).
Presentation lives in ``streamplan.report``; the command line in ``streamplan.cli``.
"""

from streamplan.app.analysis import (
    MemoryCurve,
    MemoryOptions,
    PolicyRow,
    PolicyRun,
    compare_policies,
    memory_curves,
    run_policy,
    run_schedule,
)
from streamplan.app.context import MeasuredCoverage, cost_model, make_context
from streamplan.app.explain import ExplainResult, SimulatedNote, explain_policy, explain_run
from streamplan.app.memory import MemoryAnalysis, analyze_run_memory
from streamplan.app.remat import RematPlan, plan_remat
from streamplan.app.run import RunReport, profile_for, run_model

__all__ = [
    "ExplainResult",
    "MeasuredCoverage",
    "MemoryAnalysis",
    "MemoryCurve",
    "MemoryOptions",
    "PolicyRow",
    "PolicyRun",
    "RematPlan",
    "RunReport",
    "SimulatedNote",
    "analyze_run_memory",
    "compare_policies",
    "cost_model",
    "explain_policy",
    "explain_run",
    "make_context",
    "memory_curves",
    "plan_remat",
    "profile_for",
    "run_model",
    "run_policy",
    "run_schedule",
]
