"""Stream scheduling: the context, the policies (by name via ``make_schedule``), the verifier.

The schedule data type itself (``StreamSchedule``, ``Wait``) lives in ``streamplan.ir``;
it is re-exported here for convenience.
"""

from streamplan.ir.schedule import StreamSchedule, Wait
from streamplan.schedule.context import DEFAULT_CONTEXT, MemoryBudget, ScheduleContext
from streamplan.schedule.events import derive_waits, prune_waits, with_derived_waits
from streamplan.schedule.live_bytes import LiveTrace, sequential_peak_bytes, sequential_trace
from streamplan.schedule.registry import (
    POLICIES,
    PolicyInfo,
    available_policies,
    get_policy,
    make_schedule,
    policy_info,
)
from streamplan.schedule.verify import schedule_problems, verify_schedule

__all__ = [
    "DEFAULT_CONTEXT",
    "POLICIES",
    "LiveTrace",
    "MemoryBudget",
    "PolicyInfo",
    "ScheduleContext",
    "StreamSchedule",
    "Wait",
    "available_policies",
    "schedule_problems",
    "derive_waits",
    "get_policy",
    "make_schedule",
    "policy_info",
    "prune_waits",
    "sequential_peak_bytes",
    "sequential_trace",
    "verify_schedule",
    "with_derived_waits",
]
