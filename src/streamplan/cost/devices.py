"""The built-in device profiles, and ``get_device``: a profile by name or from a profile file.

The spec figures of each GPU are the vendor's (``cost.profile`` explains the precision
classes). The constants shared by every GPU profile (per-launch host overhead,
per-kernel fixed time, efficiencies, contention) are fitted once, on the fitting half
of the published multi-stream measurements in ``bench/published.py`` (never on its
holdout half), and are the same for every model; each profile's ``calibration``
records where every constant came from. The ``cpu`` profile describes streamplan's own
CPU runtime on the project's development machine; ``streamplan calibrate --on cpu``
measures the user's machine instead and writes a profile file, which every command
takes as ``--device FILE.json``.

Device memory (what ``fit`` checks a step against) is a group of its own: ``memory_bytes``
is the card's total as the driver reports it (``torch.cuda.get_device_properties().total_memory``,
nvidia-smi's MiB), ``usable_fraction`` what is left of it once the CUDA context (driver,
kernels, cuBLAS handles) has taken its share, and ``blas_workspace_bytes`` the cuBLAS
workspace PyTorch keeps per stream that runs a matmul (its default: 32 MiB on Hopper,
4 MiB x 2 + 16 KiB x 8 before). Sources are in ``docs/fit.md``. ``interconnect`` is the
links between devices a collective crosses (``cost.links``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from streamplan.cost.calibration import Calibration, GemmCurve
from streamplan.cost.contention import Supply
from streamplan.cost.links import interconnect
from streamplan.cost.profile import GIGA, TERA, DeviceProfile, load_profile
from streamplan.errors import ModelSpecError

__all__ = ["DEVICES", "DeviceProfile", "device_names", "get_device", "is_profile_path"]


@dataclass(frozen=True, slots=True)
class GpuConstants:
    """The constants every GPU profile shares (the same for every model and every GPU).

    Fitted by ``bench/published.py --fit`` on the *fit* rows of the published
    measurements (IOS's V100 Inception V3 and SqueezeNet at batch 1, Inception V3 at
    batch 16); ``latency_error`` and ``speedup_error`` are the mean errors on its
    *holdout* rows (other models, batches and GPUs, never used to fit).

    - ``launch_overhead_ms``: host time to issue one kernel (a C++ launcher);
    - ``kernel_fixed_ms``: device time every kernel launched on a stream pays;
    - ``kernel_min_ms``: the shortest body any kernel has on the device (thread blocks
      scheduled, a round trip to DRAM, the drain), launched on a stream or from a CUDA
      graph alike;
    - GEMM and convolution efficiency as a function of size: a fraction
      ``gemm_peak_fraction`` of the peak, times how the output's tiles fill the GPU's
      SMs (``cost.calibration.tiled_fraction``: ``gemm_tiles_per_sm`` resident tiles
      to hide an SM's memory latency, wave quantisation, split-K for small GEMMs,
      per-tile efficiency by ``gemm_tile_half`` and ``gemm_half_k``), symmetric in M
      and N. ``gemm_peak_fraction`` is at most 1 (``--fit`` bounds it): a GEMM counted in
      direct multiply-adds cannot beat the peak;
    - ``winograd_speedup``: how much faster than that a convolution runs that cuDNN can
      run with a Winograd algorithm (a dense 3 x 3 at stride 1, dilation 1:
      ``cost.kinds.winograd_eligible``), which does fewer multiplications than its
      direct count (2.25x fewer for F(2x2, 3x3), 4x for F(4x4, 3x3), less the
      transforms' cost); only the ``conv`` curve carries it, never 1 x 1 convolutions,
      matmuls, strided, grouped or other kernel sizes;
    - ``memory_efficiency``: the achievable share of DRAM bandwidth;
    - ``interference``: how much co-runners' bandwidth slows an op, and
      ``sm_interference`` how much co-runners' share of the SMs does (``cost.contention``).

    Events: ``cudaEventRecord`` / ``cudaStreamWaitEvent`` cost the host about a
    microsecond or two each, and a stream released by another stream's event starts
    its next kernel a few microseconds later. CUDA-graph replay (sources in
    ``docs/simulator.md``): one ``cudaGraphLaunch`` costs the host a few microseconds
    whatever the graph's size (3.5 us of CPU time for an 80-kernel graph in CUDA.jl's
    measurements); inside the graph a kernel node's fixed device time is about 1 us
    instead of the stream launch's ``kernel_fixed_ms`` (CUDA.jl: 80 small kernels
    replayed in 70 us; NVIDIA's "Getting Started with CUDA Graphs": 0.5 us per node
    beyond the kernel's own 2.9 us); an edge between nodes on different streams is
    resolved on the device (assumed 1 us: no published figure found).
    """

    launch_overhead_ms: float = 0.00200
    kernel_fixed_ms: float = 0.00920
    kernel_min_ms: float = 0.00357
    gemm_peak_fraction: float = 1.0
    gemm_tile_half: float = 1.94
    gemm_half_k: float = 62.7
    gemm_tiles_per_sm: float = 4.85
    winograd_speedup: float = 2.25
    memory_efficiency: float = 0.75
    interference: float = 0.0112
    sm_interference: float = 0.0010
    event_record_ms: float = 0.0015
    event_wait_ms: float = 0.0015
    event_resume_ms: float = 0.003
    graph_launch_ms: float = 0.0035
    graph_node_ms: float = 0.001
    graph_edge_ms: float = 0.001
    latency_error: float | None = 0.17
    speedup_error: float | None = 0.22

    def apply(self, spec: DeviceProfile) -> DeviceProfile:
        """``spec`` (a GPU's spec-sheet figures) with these constants."""
        peak = spec.peak("fp32")
        curves = tuple(
            GemmCurve(
                kind,
                self.gemm_peak_fraction * peak,
                0.0,
                0.0,
                self.gemm_half_k,
                sms=spec.sms,
                tile_half=self.gemm_tile_half,
                tiles_per_sm=self.gemm_tiles_per_sm,
                winograd_speedup=self.winograd_speedup if kind == "conv" else 1.0,
            )
            for kind in ("conv", "conv1x1", "gemm")
        )
        calibration = Calibration(
            gemm_curves=curves,
            contention=Supply(interference=self.interference, sm_interference=self.sm_interference),
            latency_error=self.latency_error,
            speedup_error=self.speedup_error,
            sources=_GPU_SOURCES,
        )
        return spec.replace(
            launch_overhead_ms=self.launch_overhead_ms,
            kernel_fixed_ms=self.kernel_fixed_ms,
            kernel_min_ms=self.kernel_min_ms,
            gemm_efficiency=self.gemm_peak_fraction,
            memory_efficiency=self.memory_efficiency,
            event_record_ms=self.event_record_ms,
            event_wait_ms=self.event_wait_ms,
            event_resume_ms=self.event_resume_ms,
            graph_launch_ms=self.graph_launch_ms,
            graph_node_ms=self.graph_node_ms,
            graph_edge_ms=self.graph_edge_ms,
            calibration=calibration,
        )


_GPU_SOURCES = (
    ("launch_overhead_ms, kernel_fixed_ms, kernel_min_ms, gemm curve, winograd_speedup, memory_efficiency, "
     "interference, sm_interference",
     "fitted on the fit rows of bench/published.py (IOS V100: Inception V3 and SqueezeNet at batch 1, "
     "Inception V3 at batch 16); the same for every GPU"),
    ("latency_error, speedup_error", "mean error on the holdout rows of bench/published.py"),
    ("events", "cudaEventRecord / cudaStreamWaitEvent host costs of a microsecond or two; a few us to resume"),
    ("graph_launch_ms, graph_node_ms", "CUDA.jl's graph measurements and NVIDIA's CUDA Graphs post"),
    ("graph_edge_ms", "assumed (no published figure found)"),
    ("spec", "the vendor's dense peak FLOP/s and DRAM bandwidth"),
)  # fmt: skip

GPU_CONSTANTS = GpuConstants()


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


def _gpu(
    name: str,
    summary: str,
    *,
    sms: int,
    tflops: dict[str, float],
    bandwidth_gb_s: float,
    links: tuple[str, str],
    memory_mib: int,
    hopper: bool = False,
) -> DeviceProfile:
    """A GPU from its spec sheet (dense peak TFLOP/s by precision class, DRAM GB/s, the links
    between devices within and across nodes, the driver's memory total), with the shared
    constants applied. TF32 tensor cores (Ampere and later) also run fp32 convolutions."""
    return GPU_CONSTANTS.apply(
        DeviceProfile(
            name,
            summary,
            sms=sms,
            peak_flops={k: v * TERA for k, v in tflops.items()},
            mem_bw_bytes_per_s=bandwidth_gb_s * GIGA,
            launch_overhead_ms=0.0,
            kernel_fixed_ms=0.0,
            conv_tf32="tf32" in tflops,
            interconnect=interconnect(*links),
            **_memory(memory_mib, hopper=hopper),
        )
    )


_HOPPER = {"fp32": 67, "tf32": 494.7, "fp16": 989, "bf16": 989, "fp64": 67}  # H100 and H200 compute
_A100 = {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "fp64": 19.5}

_BUILTIN: dict[str, DeviceProfile] = {
    "v100": _gpu(
        "v100",
        "NVIDIA V100 SXM2 16GB (80 SMs, 15.7 TFLOP/s fp32, 125 fp16 tensor, 900 GB/s)",
        sms=80,
        tflops={"fp32": 15.7, "fp16": 125, "fp64": 7.8},
        bandwidth_gb_s=900,
        links=("nvlink2", "ib-hdr"),
        memory_mib=16_160,
    ),
    "a100": _gpu(
        "a100",
        "NVIDIA A100 SXM4 40GB (108 SMs, 19.5 fp32, 156 tf32, 312 fp16/bf16, 1.555 TB/s)",
        sms=108,
        tflops=_A100,
        bandwidth_gb_s=1555,
        links=("nvlink3", "ib-hdr"),
        memory_mib=40_960,
    ),
    "h100": _gpu(
        "h100",
        "NVIDIA H100 SXM5 80GB (132 SMs, 67 fp32, 495 tf32, 989 fp16/bf16, 3.35 TB/s)",
        sms=132,
        tflops=_HOPPER,
        bandwidth_gb_s=3350,
        links=("nvlink4", "ib-ndr"),
        memory_mib=81_559,
        hopper=True,
    ),
    "h200": _gpu(
        "h200",
        "NVIDIA H200 SXM 141GB (132 SMs, H100 compute, 4.8 TB/s HBM3e)",
        sms=132,
        tflops=_HOPPER,
        bandwidth_gb_s=4800,
        links=("nvlink4", "ib-ndr"),
        memory_mib=143_771,
        hopper=True,
    ),
    "a100-80gb": _gpu(
        "a100-80gb",
        "NVIDIA A100 SXM4 80GB (108 SMs, 19.5 fp32, 156 tf32, 312 fp16/bf16, 2.039 TB/s)",
        sms=108,
        tflops=_A100,
        bandwidth_gb_s=2039,
        links=("nvlink3", "ib-hdr"),
        memory_mib=81_920,
    ),
    # Ada Lovelace / Ampere cards users fit models on: dense tensor rates with fp32 accumulation
    # (what PyTorch's bf16/fp16 matmuls use), from NVIDIA's L4 datasheet and Ada/Ampere whitepapers.
    "l4": _gpu(
        "l4",
        "NVIDIA L4 24GB (58 SMs, 30.3 fp32, 60 tf32, 121 fp16/bf16, 300 GB/s)",
        sms=58,
        tflops={"fp32": 30.3, "tf32": 60, "fp16": 121, "bf16": 121, "fp64": 0.47},
        bandwidth_gb_s=300,
        links=("pcie4", "roce-200"),
        memory_mib=23_034,
    ),
    "rtx4090": _gpu(
        "rtx4090",
        "NVIDIA GeForce RTX 4090 24GB (128 SMs, 82.6 fp32, 82.6 tf32, 165 fp16/bf16, 1.008 TB/s)",
        sms=128,
        tflops={"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2, "fp64": 1.29},
        bandwidth_gb_s=1008,
        links=("pcie4", "roce-200"),
        memory_mib=24_564,
    ),
    "rtx3090": _gpu(
        "rtx3090",
        "NVIDIA GeForce RTX 3090 24GB (82 SMs, 35.6 fp32, 35.6 tf32, 71 fp16/bf16, 936 GB/s)",
        sms=82,
        tflops={"fp32": 35.6, "tf32": 35.6, "fp16": 71, "bf16": 71, "fp64": 0.56},
        bandwidth_gb_s=936,
        links=("pcie4", "roce-200"),
        memory_mib=24_576,
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


DEVICES = MappingProxyType(_BUILTIN)  # read-only: nothing can swap a built-in profile


def device_names() -> list[str]:
    """Names ``get_device`` accepts (besides a profile file's path)."""
    return list(DEVICES)


def is_profile_path(name: str) -> bool:
    """True when ``name`` names a profile file rather than a built-in profile."""
    return name.lower().endswith(".json") or "/" in name or "\\" in name


def get_device(name: str | DeviceProfile) -> DeviceProfile:
    """The profile called ``name`` (case-insensitive), or read from a profile file (a ``.json``
    path, as ``streamplan calibrate`` writes); a profile passes through unchanged.

    Profiles are immutable values, so the registry's own entries can be handed out.
    """
    if isinstance(name, DeviceProfile):
        return name
    if isinstance(name, str) and is_profile_path(name):
        return _profile_file(name)
    try:
        return DEVICES[name.lower()]
    except (KeyError, AttributeError):
        raise ModelSpecError(
            f"unknown device {name!r}",
            hint=f"use one of {', '.join(DEVICES)}, or a profile file from `streamplan calibrate` (FILE.json)",
        ) from None


_LOADED: dict[tuple[str, int, int], DeviceProfile] = {}


def _profile_file(name: str) -> DeviceProfile:
    """A profile file, read once per version of the file (sweeps resolve the same name many times)."""
    path = Path(name).expanduser()
    try:
        st = path.stat()
    except OSError:
        raise ModelSpecError(
            f"no device profile file {name!r}",
            where=name,
            hint="write one with `streamplan calibrate --on cpu -o FILE.json`, or name a built-in profile "
            f"({', '.join(DEVICES)})",
        ) from None
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        if len(_LOADED) > 32:
            _LOADED.clear()
        _LOADED[key] = load_profile(path)
    return _LOADED[key]
