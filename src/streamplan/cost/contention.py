"""How concurrent kernels slow each other: what each running op demands, what the device offers.

Each op that runs has a ``Demand``, in fractions of what the device has when the op
runs alone:

- ``sm``: the compute slots it fills (GPU: thread-block slots over all SMs; the CPU
  runtime: one core of the machine), its occupancy;
- ``dram``: the memory bandwidth it draws (bytes per second over the achievable
  bandwidth): about 1 for a large copy, a few percent for a large GEMM;
- ``lock``: the share of its time that holds a lock every stream needs (the CPU
  runtime's Python interpreter lock while it prepares the op; 0 on a GPU, whose
  launches the one host thread issues in order);
- ``link``: the share of the links between devices it uses (a collective: 1, all of
  them while alone; collectives in flight split the links, and leave the SMs to the
  kernels running beside them).

The device offers a ``Supply`` of each resource (1.0 = all of it; a calibration on a
busy machine may find less, e.g. cores shared with other processes) and an
``interference`` coefficient. ``corun_rates`` says how fast each running op
progresses, relative to running alone:

1. each resource is shared max-min fairly (water-filling): ops that ask for less
   than an equal share get what they ask, the rest split what remains;
2. an op progresses at the rate of its most constrained resource: the smallest
   ``granted / demanded`` over the resources it uses (never above 1);
3. that rate is divided by ``1 + interference x`` (the bandwidth demand of the
   *other* running ops): co-runners that stream memory evict each other's cache
   lines and lengthen each other's memory latency even below saturation, the effect
   a slowdown model of co-running kernels measures (it cut the median error of
   co-run predictions from 28% to 9.5% in López Albelda et al., 2022);
4. and by ``1 + sm_interference x min(1, y)``, ``y`` the SM demand of the *other*
   running ops: a GPU's block scheduler spreads each kernel's thread blocks over all
   the SMs, so blocks of kernels that each fill part of the device still land on the
   same SMs and compete for their issue slots, registers, shared memory and L1 (a
   fraction ``y`` of an op's blocks shares an SM with a co-runner's, at most all of
   them); the slot sharing of step 1 only counts what does not fit at all;
5. and by ``1 + lock_interference x L x lock``, ``L`` the lock demand of the *other*
   running ops and ``lock`` the op's own: on the CPU runtime, streams whose ops are
   mostly interpreter work cost each other more than the lock's share (threads hand
   the lock over and switch on few cores), which slows the interpreter part of an op
   (its ``lock`` share of its time), not its kernel: many small ops on several streams
   can run slower than on one, as measured, while large ops are not touched.

An op running alone runs at full speed unless it asks for more than the device
offers; with no bandwidth demand, no lock and no interference this is processor
sharing of the SMs (what the simulator did before contention was modelled), except
that an op asking for less than an equal share is not slowed at all. A new kind of demand is
one more field in ``Demand`` and ``Supply`` and one more resource in ``RESOURCES``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

RESOURCES = ("sm", "dram", "lock", "link")


@dataclass(frozen=True, slots=True)
class Demand:
    """What one running op asks of the device (fractions of each resource; see the module doc)."""

    sm: float
    dram: float = 0.0
    lock: float = 0.0
    link: float = 0.0


@dataclass(frozen=True, slots=True)
class Supply:
    """What the device offers concurrent ops, and how much co-runners' memory traffic slows an op."""

    sm: float = 1.0
    dram: float = 1.0
    lock: float = 1.0
    interference: float = 0.0
    link: float = 1.0
    sm_interference: float = 0.0  # slowdown per co-running SM share (module doc, step 4)
    lock_interference: float = 0.0  # slowdown of the interpreter work per co-running lock share (step 5)

    @property
    def is_perfect_sharing(self) -> bool:
        """True when only SM slots are shared (no bandwidth, lock or interference effects)."""
        return self.interference == 0.0 and self.sm_interference == 0.0 and self.lock_interference == 0.0

    def to_dict(self) -> dict[str, float]:
        return {
            "sm": self.sm,
            "dram": self.dram,
            "lock": self.lock,
            "interference": self.interference,
            "link": self.link,
            "sm_interference": self.sm_interference,
            "lock_interference": self.lock_interference,
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Supply:
        s = Supply(
            float(d.get("sm", 1.0)),
            float(d.get("dram", 1.0)),
            float(d.get("lock", 1.0)),
            float(d.get("interference", 0.0)),
            float(d.get("link", 1.0)),
            float(d.get("sm_interference", 0.0)),
            float(d.get("lock_interference", 0.0)),
        )
        if not all(math.isfinite(x) and x > 0 for x in (s.sm, s.dram, s.lock, s.link)):
            raise ValueError("contention capacities (sm, dram, lock, link) must be > 0")
        if not all(
            math.isfinite(x) and x >= 0 for x in (s.interference, s.sm_interference, s.lock_interference)
        ):
            raise ValueError("contention interference, sm_interference and lock_interference must be >= 0")
        return s


def fair_shares(demands: Sequence[float], capacity: float) -> list[float]:
    """Max-min fair allocation of ``capacity`` among ``demands`` (water-filling).

    Everyone gets at most what they ask; those asking less than an equal share of
    what is left get all of it, the others split the rest equally.
    """
    total = sum(demands)
    if total <= capacity:
        return list(demands)
    granted = [0.0] * len(demands)
    order = sorted(range(len(demands)), key=demands.__getitem__)
    left, waiting = capacity, len(demands)
    for i in order:
        share = left / waiting
        g = min(demands[i], share)
        granted[i] = g
        left -= g
        waiting -= 1
    return granted


def corun_rates(demands: Sequence[Demand], supply: Supply) -> list[float]:
    """Progress rate of each running op relative to running alone, in (0, 1] (see the module doc)."""
    n = len(demands)
    if n == 0:
        return []
    rates = [1.0] * n
    for resource in RESOURCES:
        asked = [getattr(d, resource) for d in demands]
        if sum(asked) <= getattr(supply, resource):
            continue
        for i, g in enumerate(fair_shares(asked, getattr(supply, resource))):
            if asked[i] > 0:
                rates[i] = min(rates[i], g / asked[i])
    if (supply.interference or supply.sm_interference or supply.lock_interference) and n > 1:
        total_dram = sum(d.dram for d in demands)
        total_sm = sum(d.sm for d in demands)
        total_lock = sum(d.lock for d in demands)
        for i, d in enumerate(demands):
            others_sm = min(1.0, total_sm - d.sm) if d.sm > 0 else 0.0
            rates[i] /= (
                1.0
                + supply.interference * (total_dram - d.dram)
                + supply.sm_interference * others_sm
                + supply.lock_interference * (total_lock - d.lock) * d.lock
            )
    return rates
