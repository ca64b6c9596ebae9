"""``DeviceProfile``: one device as the cost model sees it, and its JSON form (a profile file).

Peak figures are the vendors' dense numbers (no sparsity). ``peak_flops`` maps a
precision class to FLOP/s:

- ``"fp32"``  CUDA-core float32 (what elementwise ops and fp32 matmuls use: PyTorch
  keeps ``torch.backends.cuda.matmul.allow_tf32 = False`` by default);
- ``"tf32"``  tensor-core TF32 (Ampere and later). PyTorch's default
  ``torch.backends.cudnn.allow_tf32 = True`` lets cuDNN run fp32 *convolutions* on it,
  so the cost model uses it for fp32 convs (``conv_tf32``) but not for fp32 matmuls;
- ``"fp16"``, ``"bf16"``  tensor-core dense rates for GEMM-like ops (V100 has no bf16
  tensor cores: bf16 falls back to the fp32 rate there);
- ``"fp64"``.

The CUDA-graph constants (``graph_launch_ms``, ``graph_node_ms``, ``graph_edge_ms``) say
what changes when the whole schedule is captured into one CUDA graph and replayed:
the host pays one graph launch instead of one launch per kernel (and no event calls),
each kernel node pays a small device-side overhead instead of the stream launch's
fixed time, and a dependency between nodes on different streams costs device latency
instead of host calls. The CPU profile has none (``graph_launch_ms`` is None).

A profile file (what ``streamplan calibrate`` writes, and what ``--device
profile.json`` reads) is ``{"schema": "streamplan.device", "version": 1, "profile":
{every field}}``; ``calibration`` holds the measured curves, the contention
constants and where each constant came from (``cost.calibration``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamplan.cost.calibration import Calibration
from streamplan.cost.links import Interconnect
from streamplan.errors import FileFormatError
from streamplan.ir.frozen import FrozenDict

SCHEMA = "streamplan.device"
TERA = 1e12
GIGA = 1e9


class PeakRates(FrozenDict[str, float]):
    """Peak FLOP/s by precision class: read-only and hashable, so a profile is a value."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))


def _rates(mapping: Mapping[str, float]) -> PeakRates:
    if isinstance(mapping, PeakRates):
        return mapping
    return PeakRates({str(k): float(v) for k, v in mapping.items()})


@dataclass(frozen=True, slots=True)
class DeviceProfile:
    """One accelerator (or the CPU) as the cost model sees it: an immutable, hashable value.

    The spec-sheet figures and the constants shared by every model come first;
    ``calibration`` groups what a calibration measured or a fit to published
    measurements set (time curves per op kind, contention, error estimates, and the
    source of every constant).
    """

    name: str
    summary: str
    sms: int  # streaming multiprocessors (CPU: cores)
    peak_flops: Mapping[str, float]  # precision class -> FLOP/s (a read-only PeakRates)
    mem_bw_bytes_per_s: float
    launch_overhead_ms: float  # host time to issue one kernel (the host never blocks)
    kernel_fixed_ms: float  # device time every kernel pays (launch latency, ramp, tail)
    kernel_min_ms: float = 0.0  # shortest body a kernel has on the device, stream or CUDA graph
    max_queues: int = 8  # hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS default)
    gemm_efficiency: float = 0.4  # achievable fraction of tensor/FMA peak for GEMM and conv
    vector_efficiency: float = 0.5  # achievable fraction of peak for non-GEMM math
    memory_efficiency: float = 0.75  # achievable fraction of DRAM bandwidth
    gemm_blocks_per_sm: int = 1  # resident GEMM/conv tiles per SM
    vector_blocks_per_sm: int = 8  # resident elementwise blocks per SM
    conv_tf32: bool = False  # fp32 convs use TF32 tensor cores (cudnn.allow_tf32 default)
    max_op_fraction: float = 1.0  # most of the device one op can use (CPU runtime: one core per op)
    event_record_ms: float = 0.0  # host time to record an event after an op others wait for
    event_wait_ms: float = 0.0  # host time per cross-stream wait issued before an op
    event_resume_ms: float = 0.0  # device latency before a stream resumes after a cross-stream wait
    graph_launch_ms: float | None = None  # host time of one CUDA graph launch (None: no CUDA graphs)
    graph_node_ms: float = 0.0  # fixed device time of a kernel node in a CUDA graph (for kernel_fixed_ms)
    graph_edge_ms: float = 0.0  # device latency of a graph edge between nodes on different streams
    # -- communication: the links between devices (cost/links.py); None: no collectives modelled
    interconnect: Interconnect | None = None
    # -- device memory (fit): total, the share left after the CUDA context, cuBLAS's per-stream workspace
    memory_bytes: int | None = None  # None: unknown (the CPU profile)
    usable_fraction: float = 1.0
    blas_workspace_bytes: int = 0
    # -- measured or fitted beyond the spec sheet (calibrate, or a fit to published measurements)
    calibration: Calibration = field(default_factory=Calibration)

    def __post_init__(self) -> None:
        object.__setattr__(self, "peak_flops", _rates(self.peak_flops))

    @property
    def has_cuda_graphs(self) -> bool:
        """True when the profile describes CUDA-graph replay (GPUs; not the CPU runtime)."""
        return self.graph_launch_ms is not None

    @property
    def usable_memory_bytes(self) -> int | None:
        """What a program can allocate: the total less the CUDA context's share (None: unknown)."""
        if self.memory_bytes is None:
            return None
        return int(self.memory_bytes * self.usable_fraction)

    def peak(self, precision: str) -> float:
        """Peak FLOP/s for a precision class, falling back to fp32 when the class is absent."""
        return self.peak_flops.get(precision, self.peak_flops["fp32"])

    def replace(self, **changes: object) -> DeviceProfile:
        """A copy with some constants changed (what calibration experiments use)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready data (``from_dict`` reads it back to an equal profile)."""
        d: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            d[f.name] = (
                v.to_dict()
                if isinstance(v, (Calibration, Interconnect))
                else dict(v)
                if isinstance(v, Mapping)
                else v
            )
        return d

    @staticmethod
    def from_dict(data: Any, *, source: str = "<dict>") -> DeviceProfile:
        """A profile from ``to_dict``'s form; anything malformed raises ``FileFormatError``."""
        try:
            if not isinstance(data, dict):
                raise ValueError("a profile is a JSON object")
            known = {f.name: f for f in dataclasses.fields(DeviceProfile)}
            unknown = sorted(set(data) - set(known))
            if unknown:
                raise ValueError(f"unknown field(s) {', '.join(unknown)}")
            kwargs: dict[str, Any] = dict(data)
            kwargs["calibration"] = Calibration.from_dict(data.get("calibration") or {})
            kwargs["peak_flops"] = {str(k): float(v) for k, v in data["peak_flops"].items()}
            if data.get("interconnect") is not None:
                kwargs["interconnect"] = Interconnect.from_dict(data["interconnect"])
            profile = DeviceProfile(**kwargs)
            _check(profile)
            return profile
        except FileFormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            missing = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise FileFormatError(
                f"malformed device profile ({missing})",
                where=source,
                hint="write profiles with `streamplan calibrate -o FILE` (or DeviceProfile.to_dict)",
            ) from None


def _check(p: DeviceProfile) -> None:
    """Plausibility of the numbers a simulation divides by or adds up."""
    if not p.name or not isinstance(p.name, str):
        raise ValueError("name must be a non-empty string")
    if "fp32" not in p.peak_flops:
        raise ValueError('peak_flops needs an "fp32" rate')
    positive = {"sms": p.sms, "mem_bw_bytes_per_s": p.mem_bw_bytes_per_s, "max_queues": p.max_queues}
    positive.update({f"peak_flops.{k}": v for k, v in p.peak_flops.items()})
    for key in ("gemm_efficiency", "vector_efficiency", "memory_efficiency", "max_op_fraction"):
        positive[key] = getattr(p, key)
    for key, v in positive.items():
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{key} must be a number > 0 (got {v!r})")
    for key in ("launch_overhead_ms", "kernel_fixed_ms", "kernel_min_ms", "event_record_ms", "event_wait_ms",
                "event_resume_ms", "graph_node_ms", "graph_edge_ms"):  # fmt: skip
        v = getattr(p, key)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"{key} must be a number >= 0 (got {v!r})")
    if p.memory_bytes is not None and (
        isinstance(p.memory_bytes, bool) or not isinstance(p.memory_bytes, int) or p.memory_bytes <= 0
    ):
        raise ValueError(f"memory_bytes must be null or a whole number of bytes > 0 (got {p.memory_bytes!r})")
    if not (isinstance(p.usable_fraction, (int, float)) and 0 < p.usable_fraction <= 1):
        raise ValueError(f"usable_fraction must be a number in (0, 1] (got {p.usable_fraction!r})")
    if (
        isinstance(p.blas_workspace_bytes, bool)
        or not isinstance(p.blas_workspace_bytes, int)
        or p.blas_workspace_bytes < 0
    ):
        raise ValueError(f"blas_workspace_bytes must be a whole number >= 0 (got {p.blas_workspace_bytes!r})")
    if p.graph_launch_ms is not None and not (math.isfinite(p.graph_launch_ms) and p.graph_launch_ms >= 0):
        raise ValueError("graph_launch_ms must be null or a number >= 0")


def profile_to_json(profile: DeviceProfile) -> str:
    """The text of a profile file for ``profile``."""
    return json.dumps({"schema": SCHEMA, "version": 1, "profile": profile.to_dict()}, indent=1) + "\n"


def load_profile(path: str | Path) -> DeviceProfile:
    """Read a profile file (``FileFormatError`` naming the file when it is not one)."""
    from streamplan.files import read_json

    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise FileFormatError(
            f'not a device profile (schema is not "{SCHEMA}")',
            where=str(path),
            hint="write one with `streamplan calibrate --on cpu -o FILE`",
        )
    return DeviceProfile.from_dict(data.get("profile"), source=str(path))
