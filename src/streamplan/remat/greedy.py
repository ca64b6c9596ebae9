"""RAF's greedy eviction, the baseline solver.

Walk the ops in the reference order. Before an op runs, every storage it reads that is
not live is recomputed (lazily, recursively through its own missing inputs). When the
outputs of the next op (or recomputation) would not fit the target, evict the live
storage with the lowest ``(recompute_cost + 0.1) * (uses + 1) / size`` (cost in ms,
uses = reads still to come, size in MiB) until they fit; storages the current op or
recomputation needs are never evicted. ``recompute_cost`` is the op's time plus that
of recomputing its inputs that are not live at that moment. If nothing can be evicted
the target is out of reach for this method.

The live set the walk keeps is a superset of the plan's host-order live set (a copy
evicted at step i may really die at its last reader, earlier), so the plan's peak
never exceeds the target.
"""

from __future__ import annotations

import time

from streamplan.remat.problem import RematProblem, normalize
from streamplan.remat.solution import SolverResult, heuristic_result

MIB = 1 << 20
EVICTION_COST_OFFSET_MS = 0.1  # RAF's constant: keeps free ops from all scoring zero
MAX_STEPS_PER_OP = 50  # beyond this many steps per op the walk is thrashing: give up


class _Infeasible(Exception):
    pass


def solve_greedy(problem: RematProblem, target_bytes: int, **_: object) -> SolverResult:
    """RAF's greedy plan for ``problem`` under ``target_bytes`` (None sequence when it gets stuck)."""
    t0 = time.perf_counter()
    walk = _Walk(problem, target_bytes)
    try:
        seq = walk.run()
    except _Infeasible as e:
        return SolverResult.none("greedy", "stuck", time.perf_counter() - t0, note=str(e))
    return heuristic_result(
        problem, normalize(problem, tuple(seq)), "greedy", time.perf_counter() - t0, target_bytes=target_bytes
    )


class _Walk:
    def __init__(self, problem: RematProblem, target_bytes: int):
        self.p = problem
        self.target = target_bytes
        m = len(problem.storage_ids)
        self.live = [False] * m
        self.next_read = [0] * m  # index into problem.readers[s] of the next read to come
        self.live_bytes = problem.resident_bytes
        self.seq: list[int] = []
        self.pos = 0  # the reference position being run
        self.base: set[int] = set()  # what the op being run reads and writes
        self.pins: dict[int, int] = {}  # storages a planned recomputation still has to read
        self.evicted: set[int] = set()  # evicted storages whose recomputation is still to come
        self.owed_reads: dict[int, int] = {}  # storage -> reads by pending recomputations

    def run(self) -> list[int]:
        p = self.p
        for k in range(p.n):
            self.pos = k
            self.base = set(p.reads[k]) | set(p.writes[k])
            for s in p.reads[k]:
                if not self.live[s]:
                    self._materialize(s)
            self._ensure(sum(p.size[s] for s in p.writes[k]))
            self._emit(k)
            for s in p.reads[k]:
                self.next_read[s] += 1
            done, self.base = self.base, set()
            for s in done:
                self._free_if_done(s)
        return self.seq

    # -- bookkeeping --------------------------------------------------------------
    def _uses_left(self, s: int) -> int:
        """Reads still to come, counting the recomputations of evicted storages that need it."""
        return len(self.p.readers[s]) - self.next_read[s] + self.owed_reads.get(s, 0)

    def _pinned(self, s: int) -> bool:
        return s in self.base or self.pins.get(s, 0) > 0

    def _free_if_done(self, s: int) -> None:
        if self.live[s] and not self.p.persistent[s] and self._uses_left(s) == 0 and not self._pinned(s):
            self.live[s] = False
            self.live_bytes -= self.p.size[s]

    def _emit(self, k: int) -> None:
        p = self.p
        for s in p.writes[k]:
            if not self.live[s]:
                self.live[s] = True
                self.live_bytes += p.size[s]
        if self.live_bytes > self.target:
            raise _Infeasible(f"{p.order[k]} does not fit")
        self.seq.append(k)
        if len(self.seq) > MAX_STEPS_PER_OP * p.n:
            raise _Infeasible("recomputing in circles (each eviction forces another)")

    # -- recomputation --------------------------------------------------------------
    def _materialize(self, s: int) -> None:
        """Recompute storage ``s`` (and, first, whatever of its op's inputs is not live).

        A storage the chain needs is pinned from the moment the recomputation that reads
        it is planned until that recomputation has run; then it goes if nothing else
        will read it.
        """
        p = self.p
        stack: list[tuple[int, bool]] = [(s, False)]
        while stack:
            t, expanded = stack.pop()
            c = p.creator[t]
            if not expanded:
                if self.live[t]:
                    continue
                if not p.recomputable[c] or p.deadline[c] < self.pos:
                    raise _Infeasible(f"{p.storage_ids[t]} is needed again but cannot be recomputed")
                stack.append((t, True))
                for u in p.reads[c]:
                    self.pins[u] = self.pins.get(u, 0) + 1
                stack.extend((u, False) for u in p.reads[c] if not self.live[u])
                continue
            # the op's other outputs get new copies too: the old ones are not read again
            for w in p.writes[c]:
                if self.live[w]:
                    self.live[w] = False
                    self.live_bytes -= p.size[w]
            for w in p.writes[c]:
                self.pins[w] = self.pins.get(w, 0) + 1
            self._ensure(sum(p.size[w] for w in p.writes[c]))
            self._emit(c)
            for w in p.writes[c]:
                if w in self.evicted:  # its recomputation has run: its inputs are owed nothing more
                    self.evicted.discard(w)
                    for u in p.reads[c]:
                        self.owed_reads[u] -= 1
            for w in p.writes[c]:
                self.pins[w] -= 1
                if w != t:
                    self._free_if_done(w)
            for u in p.reads[c]:
                self.pins[u] -= 1
                self._free_if_done(u)

    def _ensure(self, need: int) -> None:
        """Evict until ``need`` more bytes fit under the target."""
        while self.live_bytes + need > self.target:
            victim = self._victim()
            if victim is None:
                raise _Infeasible(f"nothing left to evict before {self.p.order[self.pos]}")
            self.live[victim] = False
            self.live_bytes -= self.p.size[victim]
            # its recomputation will read its op's inputs: they stay until then (RAF's lazy remat)
            self.evicted.add(victim)
            for u in self.p.reads[self.p.creator[victim]]:
                self.owed_reads[u] = self.owed_reads.get(u, 0) + 1

    def _victim(self) -> int | None:
        p = self.p
        best, best_score = None, 0.0
        memo: dict[int, float] = {}
        for s, alive in enumerate(self.live):
            if not alive or self._pinned(s) or not p.droppable[s] or p.size[s] <= 0:
                continue
            left = self._uses_left(s)
            if left <= 0:
                continue
            c = p.creator[s]
            if p.deadline[c] < p.readers[s][-1]:
                continue  # its recomputation would come after an in-place write to its input
            score = (self._recompute_cost(s, memo) + EVICTION_COST_OFFSET_MS) * (left + 1) / (p.size[s] / MIB)
            if best is None or score < best_score:
                best, best_score = s, score
        return best

    def _recompute_cost(self, s: int, memo: dict[int, float]) -> float:
        """Time to bring ``s`` back now: its op plus its inputs that are not live (once each)."""
        if s in memo:
            return memo[s]
        p = self.p
        total, seen, stack = 0.0, set(), [s]
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            c = p.creator[t]
            total += p.cost_ms[c]
            stack.extend(u for u in p.reads[c] if not self.live[u] and u not in seen)
        memo[s] = total
        return total
