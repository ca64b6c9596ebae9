"""The link model: what a collective costs on the links between devices.

A ``Link`` is one kind of connection (NVLink, PCIe, InfiniBand, RoCE, the loopback gloo
uses between CPU processes) with the bandwidth one device gets in one direction and the
latency of one hop. An ``Interconnect`` says which link joins the devices of one node
and which joins nodes, and how many devices a node has: a group of ranks that fits in
one node talks over the fast link, a group that spans nodes is held back by the slower.

Collectives run the algorithms NCCL runs (``docs/distributed.md``), with ``n`` ranks and
``S`` the bytes of the whole tensor (the all-gather's output, the reduce-scatter's
input, the all-reduce's tensor):

- ring all-gather and ring reduce-scatter: ``n - 1`` steps, each moving ``S / n`` over
  the slowest link of the ring: ``(n - 1) / n * S / bw + (n - 1) * hop``;
- ring all-reduce (a reduce-scatter, then an all-gather): ``2 (n - 1) / n * S / bw +
  2 (n - 1) * hop``;
- tree all-reduce (NCCL's double binary tree, pipelined: a reduce up the tree, a
  broadcast down): ``2 * S / bw + 2 * ceil(log2 n) * hop``; better than the ring for
  small tensors on many ranks, worse for large ones. As NCCL's tuner does, an
  all-reduce takes whichever is faster (``algorithm="auto"``).

Every collective also pays ``base_ms`` (the kernel launch and protocol set-up NCCL
measures as its base latency). Bandwidths are what NCCL's bus-bandwidth tests reach,
not the links' nominal rates; the sources are in ``docs/distributed.md``. A group of 1
rank moves nothing and costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from streamplan.errors import ModelSpecError
from streamplan.ir.collectives import Collective

GB = 1e9
ALGORITHMS = ("auto", "ring", "tree")


@dataclass(frozen=True, slots=True)
class Link:
    """One kind of connection: per-device bandwidth in one direction, and one hop's latency."""

    name: str
    summary: str
    bandwidth_bytes_per_s: float
    hop_latency_ms: float

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "summary": self.summary,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "hop_latency_ms": self.hop_latency_ms,
        }

    @staticmethod
    def from_dict(d: dict[str, object]) -> Link:
        """``to_dict``'s form back to a link (``ValueError`` when a number is not a number > 0)."""
        link = Link(
            str(d["name"]),
            str(d.get("summary", d["name"])),
            float(d["bandwidth_bytes_per_s"]),  # type: ignore[arg-type]
            float(d["hop_latency_ms"]),  # type: ignore[arg-type]
        )
        if not (math.isfinite(link.bandwidth_bytes_per_s) and link.bandwidth_bytes_per_s > 0):
            raise ValueError(f"link {link.name}: bandwidth_bytes_per_s must be a number > 0")
        if not (math.isfinite(link.hop_latency_ms) and link.hop_latency_ms >= 0):
            raise ValueError(f"link {link.name}: hop_latency_ms must be a number >= 0")
        return link


# Achievable bus bandwidth per device and direction (what nccl-tests report for large messages),
# and per-hop latencies of NCCL's low-latency protocols; sources in docs/distributed.md.
LINKS: dict[str, Link] = {
    "nvlink2": Link("nvlink2", "NVLink 2 (V100 SXM2: 6 links, 150 GB/s per direction)", 130 * GB, 0.002),
    "nvlink3": Link("nvlink3", "NVLink 3 (A100 SXM4: 12 links, 300 GB/s per direction)", 230 * GB, 0.002),
    "nvlink4": Link("nvlink4", "NVLink 4 (H100/H200 SXM: 18 links, 450 GB/s per direction)", 360 * GB, 0.002),
    "pcie4": Link("pcie4", "PCIe 4.0 x16 (32 GB/s per direction)", 22 * GB, 0.003),
    "pcie5": Link("pcie5", "PCIe 5.0 x16 (64 GB/s per direction)", 45 * GB, 0.003),
    "ib-hdr": Link("ib-hdr", "InfiniBand HDR, one 200 Gb/s NIC per device", 22 * GB, 0.005),
    "ib-ndr": Link("ib-ndr", "InfiniBand NDR, one 400 Gb/s NIC per device", 45 * GB, 0.005),
    "roce-200": Link("roce-200", "RoCE v2, one 200 Gb/s NIC per device", 20 * GB, 0.008),
    "roce-400": Link("roce-400", "RoCE v2, one 400 Gb/s NIC per device", 40 * GB, 0.008),
    # gloo between processes on one host (shared memory through the loopback interface);
    # measured on this project's 2-core machine by bench/gloo_links.py
    "loopback": Link("loopback", "gloo over loopback TCP between processes of one host", 1.2 * GB, 0.05),
}


@dataclass(frozen=True, slots=True)
class Interconnect:
    """Which link joins the devices of one node (``intra``), which joins nodes (``inter``),
    how many devices a node holds, and each collective's fixed set-up time."""

    intra: Link
    inter: Link
    devices_per_node: int = 8
    base_ms: float = 0.010

    def links_of(self, collective: Collective, stride: int = 1) -> tuple[Link, int]:
        """The slowest link a group's ring crosses, and how many nodes it spans: ``stride``
        apart ranks (a data-parallel group across tensor-parallel pairs has stride 2)."""
        span = collective.group_size * max(1, stride)
        nodes = max(1, math.ceil(span / self.devices_per_node))
        if nodes == 1:
            return self.intra, 1
        slow = min((self.intra, self.inter), key=lambda link: link.bandwidth_bytes_per_s)
        return slow, nodes

    def to_dict(self) -> dict[str, object]:
        return {
            "intra": self.intra.to_dict(),
            "inter": self.inter.to_dict(),
            "devices_per_node": self.devices_per_node,
            "base_ms": self.base_ms,
        }

    @staticmethod
    def from_dict(d: dict[str, object]) -> Interconnect:
        """``to_dict``'s form back to an interconnect (a profile file's ``interconnect``)."""
        per_node = d.get("devices_per_node", 8)
        if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1:
            raise ValueError("interconnect.devices_per_node must be an int >= 1")
        base = float(d.get("base_ms", 0.010))  # type: ignore[arg-type]
        if not (math.isfinite(base) and base >= 0):
            raise ValueError("interconnect.base_ms must be a number >= 0")
        return Interconnect(
            Link.from_dict(d["intra"]),  # type: ignore[arg-type]
            Link.from_dict(d["inter"]),  # type: ignore[arg-type]
            per_node,
            base,
        )

    def describe(self) -> str:
        return f"{self.intra.name} within {self.devices_per_node}-device nodes, {self.inter.name} between"


def interconnect(intra: str, inter: str, devices_per_node: int = 8, base_ms: float = 0.010) -> Interconnect:
    """An ``Interconnect`` from link names (``ModelSpecError`` naming the links when unknown)."""
    return Interconnect(get_link(intra), get_link(inter), devices_per_node, base_ms)


def get_link(name: str) -> Link:
    """The link called ``name``."""
    try:
        return LINKS[name.lower()]
    except (KeyError, AttributeError):
        raise ModelSpecError(f"unknown link {name!r}", hint=f"use one of {', '.join(LINKS)}") from None


def ring_ms(collective: Collective, link: Link, base_ms: float) -> float:
    """A ring all-gather, reduce-scatter or (twice the traffic) all-reduce."""
    n = collective.group_size
    passes = 2 if collective.kind == "all_reduce" else 1
    moved = passes * (n - 1) / n * collective.full_bytes
    return base_ms + 1e3 * moved / link.bandwidth_bytes_per_s + passes * (n - 1) * link.hop_latency_ms


def tree_ms(collective: Collective, link: Link, base_ms: float) -> float:
    """A pipelined double-binary-tree all-reduce: a reduce up, a broadcast down."""
    n = collective.group_size
    depth = math.ceil(math.log2(n))
    return (
        base_ms
        + 1e3 * 2 * collective.full_bytes / link.bandwidth_bytes_per_s
        + 2 * depth * link.hop_latency_ms
    )


def collective_time_ms(
    collective: Collective, net: Interconnect, *, stride: int = 1, algorithm: str = "auto"
) -> tuple[float, str]:
    """How long ``collective`` takes on ``net``, and the algorithm that takes that long."""
    if algorithm not in ALGORITHMS:
        raise ModelSpecError(
            f"unknown collective algorithm {algorithm!r}", hint=f"use {', '.join(ALGORITHMS)}"
        )
    if collective.group_size <= 1 or collective.full_bytes <= 0:
        return 0.0, "none"
    link, _ = net.links_of(collective, stride)
    ring = ring_ms(collective, link, net.base_ms)
    if collective.kind != "all_reduce" or algorithm == "ring":
        return ring, "ring"  # NCCL all-gathers and reduce-scatters are rings
    tree = tree_ms(collective, link, net.base_ms)
    if algorithm == "tree" or tree < ring:
        return tree, "tree"
    return ring, "ring"
