"""Cost model and simulator: device profiles, op costs, measured tables, the event simulator."""

from streamplan.cost.bound import LatencyBound, latency_bound
from streamplan.cost.calibration import Calibration, GemmCurve, TimeCurve
from streamplan.cost.contention import Demand, Supply, corun_rates
from streamplan.cost.devices import DEVICES, DeviceProfile, device_names, get_device
from streamplan.cost.measured import MeasuredCostModel, MeasuredTable, op_signature
from streamplan.cost.op_classes import is_view_op
from streamplan.cost.opcost import (
    AnalyticCostModel,
    CostModel,
    DeviceFacts,
    FakeCostModel,
    resolve_cost,
)
from streamplan.cost.profile import load_profile, profile_to_json
from streamplan.cost.simulate import critical_path_ms, op_costs, simulate
from streamplan.cost.timeline import OpSpan, Timeline

__all__ = [
    "DEVICES",
    "AnalyticCostModel",
    "Calibration",
    "Demand",
    "GemmCurve",
    "Supply",
    "TimeCurve",
    "corun_rates",
    "load_profile",
    "profile_to_json",
    "CostModel",
    "DeviceFacts",
    "DeviceProfile",
    "FakeCostModel",
    "LatencyBound",
    "MeasuredCostModel",
    "MeasuredTable",
    "OpSpan",
    "Timeline",
    "critical_path_ms",
    "device_names",
    "get_device",
    "is_view_op",
    "latency_bound",
    "op_costs",
    "op_signature",
    "resolve_cost",
    "simulate",
]
