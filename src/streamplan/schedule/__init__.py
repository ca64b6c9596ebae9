"""Stream schedules: the data type, the verifier, and the policies (by name via ``make_schedule``)."""

from streamplan.schedule.events import derive_waits, prune_waits, with_derived_waits
from streamplan.schedule.live_bytes import LiveTrace, sequential_peak_bytes, sequential_trace
from streamplan.schedule.registry import POLICIES, available_policies, get_policy, make_schedule
from streamplan.schedule.schedule import StreamSchedule, Wait
from streamplan.schedule.verify import check_schedule, verify_schedule

__all__ = [
    "POLICIES",
    "LiveTrace",
    "StreamSchedule",
    "Wait",
    "available_policies",
    "check_schedule",
    "derive_waits",
    "get_policy",
    "make_schedule",
    "prune_waits",
    "sequential_peak_bytes",
    "sequential_trace",
    "verify_schedule",
    "with_derived_waits",
]
