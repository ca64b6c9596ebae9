"""The scalable solver: peak-driven splitting of lifetimes, for graphs of thousands of ops.

It works on *stages*: stage q is the q-th op of the reference order, preceded by the
recomputations placed at q (in reference order). A copy of a storage covers the
stages from the one that writes it to its last reader; the live bytes of a stage are
those of the copies that cover it (an over-count inside stages with recomputations,
whose copies may die part-way through: the plan's exact host-order peak can only be
lower).

Loop: take the stage p with the most live bytes; if it fits, stop. Otherwise pick,
among the copies alive across p but not read at p, the one to *split*: its readers
before p keep the copy (which now dies at the last of them), a recomputation at the
first reader after p writes a new copy for the rest. The recomputation needs its op's
inputs at that stage: those not covered there are recomputed first (a chain). The
choice is the split with the least added time per byte freed whose chain still fits
at its stage; a split never raises its stage above the current peak, so the peak
strictly falls or moves. Each step is a vectorised scan over the copies, so the
method runs in about (splits x copies) time: thousands of ops in seconds.

Finally, recomputations that are not needed any more are removed (largest cost first)
while the exact host-order peak stays under the target.

``Descent`` plans a whole ladder of targets in one run: it fits the highest target,
keeps every split, and goes on to the next one down, so all the rungs of a reference
order cost about as much as the lowest alone. The plan at a rung depends only on the
rungs above it, never on how far down the descent goes afterwards.
"""

from __future__ import annotations

import time
from bisect import bisect_left

import numpy as np

from streamplan.remat.problem import RematProblem, check_plan, evaluate, normalize
from streamplan.remat.solution import SolverResult, heuristic_result

MAX_SPLITS_PER_OP = 20
MAX_TRIED = 64  # splits weighed per step once one that fits is found (the cheapest-looking first)
MAX_CHAIN_OPS = 256  # longer recomputation chains are never worth it (and slow to search)


class _Copy:
    __slots__ = ("storage", "birth", "death", "readers", "recomputed", "slot")

    def __init__(self, storage: int, birth: int, death: int, readers: list[int], recomputed: bool):
        self.storage = storage
        self.birth = birth
        self.death = death
        self.readers = readers
        self.recomputed = recomputed
        self.slot = -1


class _NoSplit(Exception):
    pass


def solve_scalable(
    problem: RematProblem, target_bytes: int, *, time_limit_s: float = 10.0, **_: object
) -> SolverResult:
    """Peak-driven splitting under ``target_bytes`` (None sequence when no split helps any more)."""
    t0 = time.perf_counter()
    state = _Stages(problem)
    try:
        state.fit(target_bytes, deadline=t0 + time_limit_s)
    except _NoSplit as e:
        return SolverResult.none("scalable", "stuck", time.perf_counter() - t0, note=str(e))
    seq = normalize(problem, state.sequence())
    seq = _prune(problem, seq, target_bytes, deadline=t0 + time_limit_s)
    return heuristic_result(problem, seq, "scalable", time.perf_counter() - t0, target_bytes=target_bytes)


class Descent:
    """Plans at every rung of a ladder of targets on one problem, in one descent.

    The state fits the highest rung, then, keeping every split, the next one down, and so
    on; ``plan(rung)`` descends as far as ``rung`` (if it has not yet) and finishes the
    plan there (normalised, pruned, checked; cached). So the plan at a rung depends only
    on the ladder above it, whichever rungs were asked for and in which order. Once a
    fit gets stuck (nothing left to split, or ``time_limit_s`` for one rung) no lower
    rung has a plan. (A rung the kept splits cannot reach is fitted afresh, and the
    descent goes on from that state.)
    """

    def __init__(
        self, problem: RematProblem, rungs: list[int] | tuple[int, ...], *, time_limit_s: float = 10.0
    ):
        self.p = problem
        self.rungs = sorted(set(rungs), reverse=True)
        self.time_limit_s = time_limit_s
        self.state = _Stages(problem)
        self.raw: dict[int, tuple[int, ...] | str] = {}  # rung -> the state's plan there, or why stuck
        self.done: dict[int, SolverResult] = {}
        self.stuck: str | None = None

    def plan(self, rung: int) -> SolverResult:
        if rung not in self.rungs:
            raise ValueError(f"{rung} is not a rung of this descent")
        if rung in self.done:
            return self.done[rung]
        t0 = time.perf_counter()
        for r in self.rungs:
            if r < rung:
                break
            if r in self.raw:
                continue
            if self.stuck is None:
                try:
                    self.state.fit(r, deadline=time.perf_counter() + self.time_limit_s)
                except _NoSplit:
                    # the splits kept from above can block this rung: fit it afresh, and descend
                    # from there
                    fresh = _Stages(self.p)
                    try:
                        fresh.fit(r, deadline=time.perf_counter() + self.time_limit_s)
                        self.state = fresh
                    except _NoSplit as e:
                        self.stuck = str(e)
            self.raw[r] = self.stuck if self.stuck is not None else self.state.sequence()
        raw = self.raw[rung]
        if isinstance(raw, str):
            result = SolverResult.none("scalable", "stuck", time.perf_counter() - t0, note=raw)
        else:
            seq = _prune(self.p, normalize(self.p, raw), rung, deadline=t0 + self.time_limit_s)
            result = heuristic_result(self.p, seq, "scalable", time.perf_counter() - t0, target_bytes=rung)
        self.done[rung] = result
        return result


class Pruned:
    """Plans at each rung from one given plan (an activation-checkpointing policy, say): the
    given plan without the recomputations a rung does not need, costliest dropped first; no
    plan at a rung below the given plan's own peak."""

    def __init__(self, problem: RematProblem, seed: tuple[int, ...], *, time_limit_s: float = 10.0):
        self.p = problem
        self.time_limit_s = time_limit_s
        self.done: dict[int, SolverResult] = {}
        self.invalid: str | None = None
        try:
            self.seed = normalize(problem, seed)
            check_plan(problem, self.seed)
        except ValueError as e:  # the given plan breaks a rule of the problem: no plans from it
            self.invalid, self.seed = str(e), ()
        self.peak_bytes = evaluate(problem, self.seed).peak_bytes if self.invalid is None else 0

    def plan(self, rung: int) -> SolverResult:
        if rung not in self.done:
            t0 = time.perf_counter()
            if self.invalid is not None:
                self.done[rung] = SolverResult.none("scalable", "stuck", 0.0, note=self.invalid)
            elif self.peak_bytes > rung:
                self.done[rung] = SolverResult.none(
                    "scalable", "stuck", 0.0, note=f"the given plan peaks at {self.peak_bytes} bytes"
                )
            else:
                seq = _prune(self.p, self.seed, rung, deadline=t0 + self.time_limit_s)
                self.done[rung] = heuristic_result(
                    self.p, seq, "scalable", time.perf_counter() - t0, target_bytes=rung
                )
        return self.done[rung]


class _Stages:
    """Copies on the stage line. ``entering[q]``: bytes of copies alive through all of stage q
    (written before it, read at or after it); ``local[q]``: the peak, over stage q's steps
    (its recomputations, then its op), of the copies written inside the stage."""

    def __init__(self, problem: RematProblem):
        p = self.p = problem
        n = p.n
        self.copies: list[_Copy] = []
        # per storage, its copies in order of birth (their lifetimes never overlap) and the births
        self.copies_of: list[list[_Copy]] = [[] for _ in p.storage_ids]
        self.births_of: list[list[int]] = [[] for _ in p.storage_ids]
        cap = max(16, 4 * len(p.storage_ids))
        self.birth = np.zeros(cap, dtype=np.int64)
        self.death = np.zeros(cap, dtype=np.int64)
        self.splittable = np.zeros(cap, dtype=bool)
        self.storage_of = np.zeros(cap, dtype=np.int64)
        # per storage: its own op's time per byte, a lower bound on any split's ratio
        self.op_ratio = np.array(
            [p.cost_ms[p.creator[s]] / max(1, p.size[s]) for s in range(len(p.storage_ids))], dtype=np.float64
        )
        self.entering = np.full(n, p.resident_bytes, dtype=np.int64)
        self.local = np.array([sum(p.size[w] for w in p.writes[q]) for q in range(n)], dtype=np.int64)
        self.chain_ops: list[set[int]] = [set() for _ in range(n)]  # stage -> ops recomputed there
        self.beyond: list[set[int]] = [set() for _ in range(n)]  # stage -> storages its recomputations
        # write that live past the stage
        # what no split can remove from a stage: the storages it reads or writes, and those
        # alive across it that can never be dropped
        kept = np.zeros(n + 1, dtype=np.int64)
        for s in range(len(p.storage_ids)):
            b = p.creator[s]
            rs = list(p.readers[s])
            d = n - 1 if p.persistent[s] else (rs[-1] if rs else b)
            self._add(_Copy(s, b, d, rs, False))
            if self.splittable[self.copies_of[s][0].slot]:
                for q in {b, *rs}:
                    kept[q] += p.size[s]
                    kept[q + 1] -= p.size[s]
            else:
                kept[b] += p.size[s]
                kept[d + 1] -= p.size[s]
        irreducible = np.cumsum(kept[:n]) + p.resident_bytes
        self.irreducible_at = int(np.argmax(irreducible)) if n else 0
        self.irreducible_bytes = int(irreducible[self.irreducible_at]) if n else p.resident_bytes

    @property
    def profile(self) -> np.ndarray:
        return self.entering + self.local

    # -- copies -----------------------------------------------------------------------
    def _add(self, c: _Copy) -> None:
        if len(self.copies) == len(self.birth):
            for name in ("birth", "death", "splittable", "storage_of"):
                arr = getattr(self, name)
                setattr(self, name, np.concatenate([arr, np.zeros_like(arr)]))
        c.slot = len(self.copies)
        self.copies.append(c)
        births = self.births_of[c.storage]
        at = bisect_left(births, c.birth)
        births.insert(at, c.birth)
        self.copies_of[c.storage].insert(at, c)
        s = c.storage
        self.birth[c.slot] = c.birth
        self.death[c.slot] = c.death
        self.storage_of[c.slot] = s
        self.splittable[c.slot] = self.p.droppable[s] and not self.p.persistent[s] and self.p.size[s] > 0
        self.entering[c.birth + 1 : c.death + 1] += self.p.size[s]

    def _shorten(self, c: _Copy, readers: list[int]) -> None:
        """Keep only ``readers`` (a prefix) on copy ``c``: it now dies at the last of them."""
        new_death = readers[-1] if readers else c.birth
        if new_death < c.death:
            self.entering[new_death + 1 : c.death + 1] -= self.p.size[c.storage]
        c.readers = readers
        c.death = new_death
        self.death[c.slot] = new_death

    def _available(self, s: int, q: int) -> bool:
        """True when a recomputation at stage ``q`` can read a copy of ``s``."""
        if self._entering_copy(s, q) is not None:
            return True
        at = bisect_left(self.births_of[s], q)
        copies = self.copies_of[s]
        return at < len(copies) and copies[at].birth == q and copies[at].recomputed

    def _entering_copy(self, s: int, q: int) -> _Copy | None:
        """The copy of ``s`` alive through stage ``q``: written before it, read at or after it.
        Copies never overlap, so it can only be the last one written before ``q``."""
        at = bisect_left(self.births_of[s], q)
        if at == 0:
            return None
        c = self.copies_of[s][at - 1]
        return c if c.death >= q else None

    def _local_peak(self, q: int, ops: list[int], beyond: set[int]) -> int:
        """Peak over stage ``q``'s steps of the copies written inside it."""
        p = self.p
        steps = [*ops, q]
        made: dict[int, int] = {}
        last: dict[int, int] = {}
        for j, o in enumerate(steps):
            for u in p.reads[o]:
                if u in made:
                    last[u] = j
            for w in p.writes[o]:
                made[w] = j
                last[w] = j
        end = len(steps) - 1
        delta = [0] * (len(steps) + 1)
        for w, j in made.items():
            delta[j] += p.size[w]
            delta[(end if w in beyond and j < end else last[w]) + 1] -= p.size[w]
        peak = cur = 0
        for j in range(len(steps)):
            cur += delta[j]
            peak = max(peak, cur)
        return peak

    # -- the loop -----------------------------------------------------------------------
    def fit(self, target: int, deadline: float) -> None:
        p = self.p
        if target < self.irreducible_bytes:
            raise _NoSplit(
                f"{p.order[self.irreducible_at]} keeps {self.irreducible_bytes} bytes live whatever is recomputed"
            )
        for _ in range(MAX_SPLITS_PER_OP * max(1, p.n)):
            profile = self.profile
            at = int(np.argmax(profile))
            peak = int(profile[at])
            if peak <= target:
                return
            if time.perf_counter() > deadline:
                raise _NoSplit("time limit reached")
            best = self._best_split(at, target, peak)
            if best is None:
                raise _NoSplit(f"nothing alive across {p.order[at]} can be recomputed later to lower it")
            self._apply(*best)
        raise _NoSplit("too many splits")

    def _best_split(self, at: int, target: int, peak: int):
        """The split with the least time per byte whose stage still fits (else that lowers the
        peak at all). Candidates are tried in order of a lower bound on that ratio — their own
        op's time per byte — so the search stops as soon as no untried one can win."""
        p = self.p
        m = len(self.copies)
        slots = np.nonzero((self.birth[:m] < at) & (self.death[:m] > at) & self.splittable[:m])[0]
        if not len(slots):
            return None
        bound = self.op_ratio[self.storage_of[slots]]
        read_here = set(p.reads[at])
        best, best_key = None, None
        tried = 0
        for j in np.argsort(bound, kind="stable"):
            if best_key is not None and not best_key[0]:
                if bound[j] > best_key[1]:
                    break  # even its own op alone costs more per byte than the best split that fits
                if tried >= MAX_TRIED:
                    break  # a split that fits is in hand: do not weigh hundreds more
            if best_key is not None and tried >= 2 * MAX_TRIED:
                break  # none fits yet, but one lowers the peak: take the best of these
            tried += 1
            c = self.copies[int(slots[j])]
            if c.storage in read_here:
                continue
            after = [r for r in c.readers if r > at]
            if not after:
                continue
            q = after[0]
            plan = self._plan(c, q)
            if plan is None:
                continue
            ops, cost, new_at_q, _moves = plan
            if new_at_q >= peak:
                continue  # would only move the peak
            key = (new_at_q > target, cost / p.size[c.storage], -p.size[c.storage], q)
            if best_key is None or key < best_key:
                best, best_key = (c, at, plan), key
        return best

    def _plan(self, c: _Copy, q: int):
        """Splitting ``c`` for a recomputation at stage ``q``: (new ops at q, their cost, the stage's
        new live bytes, the copies whose later readers move to the new copies), or None."""
        p = self.p
        s = c.storage
        ops: list[int] = []
        planned: set[int] = set(self.chain_ops[q])
        stack = [p.creator[s]]
        while stack:
            op = stack.pop()
            if op in planned:
                continue
            if not p.recomputable[op] or p.deadline[op] < q or len(ops) >= MAX_CHAIN_OPS:
                return None
            planned.add(op)
            ops.append(op)
            for u in p.reads[op]:
                if not self._available(u, q):
                    stack.append(p.creator[u])
        moves: list[_Copy] = [c]
        beyond = set(self.beyond[q]) | {s}
        for o in ops:
            for w in p.writes[o]:
                if w == s:
                    continue
                old = self._entering_copy(w, q)
                if old is not None and (any(r >= q for r in old.readers) or p.persistent[w]):
                    moves.append(old)
                    beyond.add(w)
        leaving = sum(p.size[x.storage] for x in moves)
        local = self._local_peak(q, sorted(planned), beyond)
        new_at_q = int(self.entering[q]) - leaving + local
        return sorted(ops), sum(p.cost_ms[o] for o in ops), new_at_q, (moves, beyond)

    def _apply(self, c: _Copy, at: int, plan) -> None:
        ops, _cost, _new, (moves, beyond) = plan
        p = self.p
        q = next(r for r in c.readers if r > at)
        for old in moves:
            keep = [r for r in old.readers if r < (at if old is c else q)]
            moved = [r for r in old.readers if r >= q]
            d = old.death
            self._shorten(old, keep)
            self._add(_Copy(old.storage, q, d, moved, True))
        for o in ops:
            self.chain_ops[q].add(o)
            for w in p.writes[o]:
                if all(x.storage != w for x in moves):
                    self._add(_Copy(w, q, q, [], True))
        for o in ops:  # what the recomputations read from older copies keeps those alive to q
            for u in p.reads[o]:
                old = self._entering_copy(u, q)
                if old is not None and q not in old.readers:
                    old.readers = sorted([*old.readers, q])
        self.beyond[q] = beyond
        self.local[q] = self._local_peak(q, sorted(self.chain_ops[q]), beyond)

    def sequence(self) -> tuple[int, ...]:
        seq: list[int] = []
        for q in range(self.p.n):
            seq.extend(sorted(self.chain_ops[q]))
            seq.append(q)
        return tuple(seq)


def _prune(problem: RematProblem, seq: tuple[int, ...], target: int, deadline: float) -> tuple[int, ...]:
    """Drop recomputations the plan does not need (costliest first) while it stays under ``target``.

    Dropping the recomputation at step i lets its readers use the copy before it, which
    then also lives over the steps between its last reader and i: the drop is kept when
    the live bytes there still fit. (The inputs the recomputation read may die earlier
    too; not counting that only makes the check safe.)"""
    p = problem
    n_steps = len(seq)
    birth: list[int] = []
    death: list[int] = []
    size: list[int] = []
    prev: list[int] = []  # the copy of the same storage before this one (-1: none)
    written_at: list[list[int]] = [[] for _ in range(n_steps)]
    current: dict[int, int] = {}
    for i, k in enumerate(seq):
        for s in p.reads[k]:
            death[current[s]] = i
        for s in p.writes[k]:
            c = len(birth)
            prev.append(current.get(s, -1))
            current[s] = c
            birth.append(i)
            death.append(n_steps - 1 if p.persistent[s] else i)
            size.append(p.size[s])
            written_at[i].append(c)
    delta = np.zeros(n_steps + 1, dtype=np.int64)
    for b, d, nb in zip(birth, death, size, strict=True):
        delta[b] += nb
        delta[d + 1] -= nb
    profile = np.cumsum(delta)[:n_steps] + p.resident_bytes
    seen: set[int] = set()
    steps = []
    for i, k in enumerate(seq):
        if k in seen:
            steps.append(i)
        seen.add(k)
    steps.sort(key=lambda i: -p.cost_ms[seq[i]])
    removed: set[int] = set()
    nxt = {c: -1 for c in range(len(birth))}
    for c, pc in enumerate(prev):
        if pc >= 0:
            nxt[pc] = c
    for i in steps:
        if time.perf_counter() > deadline:
            break
        copies = written_at[i]
        if any(prev[c] < 0 for c in copies):
            continue
        add = np.zeros(n_steps, dtype=np.int64)
        for c in copies:
            add[death[prev[c]] + 1 : i] += size[c]
        if int((profile + add).max()) > target:
            continue
        profile += add
        removed.add(i)
        for c in copies:  # the copy before takes over this one's readers and successor
            pc = prev[c]
            death[pc] = max(death[pc], death[c])
            n = nxt[c]
            nxt[pc] = n
            if n >= 0:
                prev[n] = pc
    out = tuple(k for j, k in enumerate(seq) if j not in removed)
    out = normalize(problem, out)
    return out if evaluate(problem, out).peak_bytes <= target else seq
