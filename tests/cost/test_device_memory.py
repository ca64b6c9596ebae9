"""Device profiles carry their memory: the driver's total, the share usable after the CUDA
context, and cuBLAS's per-stream workspace (32 MiB on Hopper)."""

from __future__ import annotations

from streamplan.cost.devices import CUDA_CONTEXT_BYTES, DEVICES, get_device

MIB = 1 << 20


def test_every_gpu_profile_has_its_memory_and_a_usable_share():
    for name, d in DEVICES.items():
        if name == "cpu":
            assert d.memory_bytes is None and d.usable_memory_bytes is None
            continue
        assert d.memory_bytes and 0 < d.usable_fraction < 1, name
        assert abs(d.memory_bytes - d.usable_memory_bytes - CUDA_CONTEXT_BYTES) <= 1, name
        assert d.blas_workspace_bytes > 0


def test_reported_totals_not_marketing_gigabytes():
    assert get_device("h100").memory_bytes == 81_559 * MIB  # an "80 GB" H100 reports 79.65 GiB
    assert get_device("h200").memory_bytes == 143_771 * MIB
    assert get_device("a100").memory_bytes == 40 * 1024 * MIB
    assert get_device("a100-80gb").memory_bytes == 80 * 1024 * MIB
    assert get_device("l4").memory_bytes == 23_034 * MIB
    assert get_device("h100").blas_workspace_bytes == 32 * MIB
    assert get_device("a100").blas_workspace_bytes == 8 * MIB + 128 * 1024
