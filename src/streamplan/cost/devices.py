"""Device profiles: published spec figures plus shared calibration constants.

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

The efficiency factors, per-launch host overhead, per-kernel fixed time and the
resident blocks per SM are calibration constants shared by every model (never
tuned per model); ``bench/calibrate_ios.py`` checks them against IOS's V100 figures.

The CUDA-graph constants (``graph_launch_ms``, ``graph_node_ms``, ``graph_edge_ms``) say
what changes when the whole schedule is captured into one CUDA graph and replayed:
the host pays one graph launch instead of one launch per kernel (and no event calls),
each kernel node pays a small device-side overhead instead of the stream launch's
fixed time, and a dependency between nodes on
different streams costs device latency instead of host calls. Their sources are in
``docs/simulator.md``. The CPU profile has none (``graph_launch_ms`` is None).

Device memory (what ``fit`` checks a step against) is a group of its own: ``memory_bytes``
is the card's total as the driver reports it (``torch.cuda.get_device_properties().total_memory``,
nvidia-smi's MiB), ``usable_fraction`` what is left of it once the CUDA context (driver,
kernels, cuBLAS handles) has taken its share, and ``blas_workspace_bytes`` the cuBLAS
workspace PyTorch keeps per stream that runs a matmul (its default: 32 MiB on Hopper,
4 MiB x 2 + 16 KiB x 8 before). Sources are in ``docs/fit.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from streamplan.cost.links import Interconnect, interconnect
from streamplan.errors import ModelSpecError

TERA = 1e12
GIGA = 1e9


@dataclass(frozen=True, slots=True)
class DeviceProfile:
    """One accelerator (or the CPU) as the cost model sees it."""

    name: str
    summary: str
    sms: int  # streaming multiprocessors (CPU: cores)
    peak_flops: dict[str, float] = field(compare=False)  # precision class -> FLOP/s
    mem_bw_bytes_per_s: float
    launch_overhead_ms: float  # host time to issue one kernel (the host never blocks)
    kernel_fixed_ms: float  # device time every kernel pays (launch latency, ramp, tail)
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


# Calibration constants shared by every GPU profile, chosen by a coarse grid search
# (bench/calibrate_ios.py) against IOS's V100 sequential latencies and wavefront speedups
# of Inception V3, RandWire and SqueezeNet; the same values for every model.
_GPU_LAUNCH_MS = 0.004
_GPU_KERNEL_FIXED_MS = 0.003

# cudaEventRecord / cudaStreamWaitEvent cost the host about a microsecond or two each, and a
# stream released by another stream's event starts its next kernel a few microseconds later.
_GPU_EVENTS = {"event_record_ms": 0.0015, "event_wait_ms": 0.0015, "event_resume_ms": 0.003}

# CUDA-graph replay (sources in docs/simulator.md): one cudaGraphLaunch costs the host a few
# microseconds whatever the graph's size (3.5 us of CPU time for an 80-kernel graph in CUDA.jl's
# measurements); inside the graph a kernel node's fixed device time is about 1 us instead of the
# stream launch's kernel_fixed_ms (CUDA.jl: 80 small kernels replayed in 70 us; NVIDIA's "Getting
# Started with CUDA Graphs": 0.5 us per node beyond the kernel's own 2.9 us); an edge between nodes
# on different streams is resolved on the device (assumed 1 us: no published figure found).
_GPU_GRAPHS = {"graph_launch_ms": 0.0035, "graph_node_ms": 0.001, "graph_edge_ms": 0.001}

# Device memory. Totals are what the driver reports (nvidia-smi's MiB = torch's total_memory /
# 2**20), not the marketing GB: an "80 GB" H100 reports 81,559 MiB. The CUDA context (driver state,
# the kernels of torch, cuBLAS and cuDNN loaded lazily) takes about 0.5 GiB before the first tensor;
# usable_fraction is what is left. cuBLAS's default workspace per (handle, stream): 32 MiB on Hopper
# (sm_90), 4 MiB x 2 + 16 KiB x 8 on older GPUs (PyTorch's CUBLAS_WORKSPACE_CONFIG default).
MIB = 1 << 20
CUDA_CONTEXT_BYTES = 512 * MIB
HOPPER_BLAS_WORKSPACE_BYTES = 32 * MIB
BLAS_WORKSPACE_BYTES = 2 * 4 * MIB + 8 * 16 * 1024


def _memory(total_mib: int, *, hopper: bool = False) -> dict[str, float | int]:
    """The memory group of a GPU profile with ``total_mib`` MiB reported by the driver."""
    total = total_mib * MIB
    return {
        "memory_bytes": total,
        "usable_fraction": 1 - CUDA_CONTEXT_BYTES / total,
        "blas_workspace_bytes": HOPPER_BLAS_WORKSPACE_BYTES if hopper else BLAS_WORKSPACE_BYTES,
    }


DEVICES: dict[str, DeviceProfile] = {
    "v100": DeviceProfile(
        "v100",
        "NVIDIA V100 SXM2 16GB (80 SMs, 15.7 TFLOP/s fp32, 125 fp16 tensor, 900 GB/s)",
        sms=80,
        peak_flops={"fp32": 15.7 * TERA, "fp16": 125 * TERA, "fp64": 7.8 * TERA},
        mem_bw_bytes_per_s=900 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        interconnect=interconnect("nvlink2", "ib-hdr"),
        **_memory(16_160),
    ),
    "a100": DeviceProfile(
        "a100",
        "NVIDIA A100 SXM4 40GB (108 SMs, 19.5 fp32, 156 tf32, 312 fp16/bf16, 1.555 TB/s)",
        sms=108,
        peak_flops={
            "fp32": 19.5 * TERA,
            "tf32": 156 * TERA,
            "fp16": 312 * TERA,
            "bf16": 312 * TERA,
            "fp64": 19.5 * TERA,
        },
        mem_bw_bytes_per_s=1555 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        conv_tf32=True,
        interconnect=interconnect("nvlink3", "ib-hdr"),
        **_memory(40_960),
    ),
    "h100": DeviceProfile(
        "h100",
        "NVIDIA H100 SXM5 80GB (132 SMs, 67 fp32, 495 tf32, 989 fp16/bf16, 3.35 TB/s)",
        sms=132,
        peak_flops={
            "fp32": 67 * TERA,
            "tf32": 494.7 * TERA,
            "fp16": 989 * TERA,
            "bf16": 989 * TERA,
            "fp64": 67 * TERA,
        },
        mem_bw_bytes_per_s=3350 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        conv_tf32=True,
        interconnect=interconnect("nvlink4", "ib-ndr"),
        **_memory(81_559, hopper=True),
    ),
    "h200": DeviceProfile(
        "h200",
        "NVIDIA H200 SXM 141GB (132 SMs, H100 compute, 4.8 TB/s HBM3e)",
        sms=132,
        peak_flops={
            "fp32": 67 * TERA,
            "tf32": 494.7 * TERA,
            "fp16": 989 * TERA,
            "bf16": 989 * TERA,
            "fp64": 67 * TERA,
        },
        mem_bw_bytes_per_s=4800 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        conv_tf32=True,
        interconnect=interconnect("nvlink4", "ib-ndr"),
        **_memory(143_771, hopper=True),
    ),
    "a100-80gb": DeviceProfile(
        "a100-80gb",
        "NVIDIA A100 SXM4 80GB (108 SMs, 19.5 fp32, 156 tf32, 312 fp16/bf16, 2.039 TB/s)",
        sms=108,
        peak_flops={
            "fp32": 19.5 * TERA,
            "tf32": 156 * TERA,
            "fp16": 312 * TERA,
            "bf16": 312 * TERA,
            "fp64": 19.5 * TERA,
        },
        mem_bw_bytes_per_s=2039 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        conv_tf32=True,
        **_memory(81_920),
        interconnect=interconnect("nvlink3", "ib-hdr"),
    ),
    # Ada Lovelace / Ampere cards users fit models on: dense tensor rates with fp32 accumulation
    # (what PyTorch's bf16/fp16 matmuls use), from NVIDIA's L4 datasheet and Ada/Ampere whitepapers.
    "l4": DeviceProfile(
        "l4",
        "NVIDIA L4 24GB (58 SMs, 30.3 fp32, 60 tf32, 121 fp16/bf16, 300 GB/s)",
        sms=58,
        peak_flops={
            "fp32": 30.3 * TERA,
            "tf32": 60 * TERA,
            "fp16": 121 * TERA,
            "bf16": 121 * TERA,
            "fp64": 0.47 * TERA,
        },
        mem_bw_bytes_per_s=300 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        conv_tf32=True,
        **_memory(23_034),
        interconnect=interconnect("pcie4", "roce-200"),
    ),
    "rtx4090": DeviceProfile(
        "rtx4090",
        "NVIDIA GeForce RTX 4090 24GB (128 SMs, 82.6 fp32, 82.6 tf32, 165 fp16/bf16, 1.008 TB/s)",
        sms=128,
        peak_flops={
            "fp32": 82.6 * TERA,
            "tf32": 82.6 * TERA,
            "fp16": 165.2 * TERA,
            "bf16": 165.2 * TERA,
            "fp64": 1.29 * TERA,
        },
        mem_bw_bytes_per_s=1008 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        conv_tf32=True,
        **_memory(24_564),
        interconnect=interconnect("pcie4", "roce-200"),
    ),
    "rtx3090": DeviceProfile(
        "rtx3090",
        "NVIDIA GeForce RTX 3090 24GB (82 SMs, 35.6 fp32, 35.6 tf32, 71 fp16/bf16, 936 GB/s)",
        sms=82,
        peak_flops={
            "fp32": 35.6 * TERA,
            "tf32": 35.6 * TERA,
            "fp16": 71 * TERA,
            "bf16": 71 * TERA,
            "fp64": 0.56 * TERA,
        },
        mem_bw_bytes_per_s=936 * GIGA,
        launch_overhead_ms=_GPU_LAUNCH_MS,
        kernel_fixed_ms=_GPU_KERNEL_FIXED_MS,
        **_GPU_EVENTS,
        **_GPU_GRAPHS,
        conv_tf32=True,
        **_memory(24_576),
        interconnect=interconnect("pcie4", "roce-200"),
    ),
    # A generic 16-core AVX2 server CPU; "streams" are threads, a core is one "SM".
    # Calibrated on streamplan's own CPU runtime (one worker thread per stream, torch at one
    # intra-op thread, so one op uses one core) on this project's 2-core machine: measured
    # sequential squeezenet 42 ms, inception_v3 193 ms, resnet50 119 ms at batch 1.
    "cpu": DeviceProfile(
        "cpu",
        "streamplan's CPU runtime on 2 cores (one op per core, ~55 GFLOP/s per core achieved)",
        sms=2,
        peak_flops={"fp32": 2 * 150 * GIGA, "fp64": 2 * 75 * GIGA},
        mem_bw_bytes_per_s=2 * 20 * GIGA,
        launch_overhead_ms=0.03,
        kernel_fixed_ms=0.01,
        max_queues=64,
        gemm_efficiency=0.45,
        vector_efficiency=0.2,
        memory_efficiency=0.7,
        gemm_blocks_per_sm=1,
        vector_blocks_per_sm=1,
        max_op_fraction=0.5,
        event_record_ms=0.005,
        event_wait_ms=0.005,
        event_resume_ms=0.02,  # a worker thread woken by threading.Event
        # ranks are processes of one host, talking through gloo (one "node" holds them all)
        interconnect=interconnect("loopback", "loopback", devices_per_node=64, base_ms=0.1),
    ),
}


def device_names() -> list[str]:
    """Names ``get_device`` accepts."""
    return list(DEVICES)


def get_device(name: str | DeviceProfile) -> DeviceProfile:
    """The profile called ``name`` (case-insensitive); a profile passes through unchanged."""
    if isinstance(name, DeviceProfile):
        return name
    try:
        return DEVICES[name.lower()]
    except (KeyError, AttributeError):
        raise ModelSpecError(f"unknown device {name!r}", hint=f"use one of {', '.join(DEVICES)}") from None
