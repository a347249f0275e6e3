"""The exact budget plan of a small region: branch and bound over the replay's walk, pure Python.

``memory_budget`` (``_policy.budget``) asks :func:`exact_search` for the saved set of least recompute
within the budget, for the engine's own cost model (``RegionView.evaluate``: the replay's walk back
from what backward reads, buffers counted once, a multi-output op kept by the outputs something reads).

The search visits positions last to first. Whether a position is reached by the walk is known once
every later one is decided (an op's producers come before it), so only the reached free positions
branch, save or recompute; an op nothing reaches costs nothing either way. Pruning:
- the incumbent (the greedy plan): a branch whose lower bound is not below its recompute is dropped;
- the lower bound (``_policy.exact_bound``): recompute so far, plus the larger of a knapsack over the
  reached ops (each saved, for its bytes, or recomputed with its private inputs) and a walk back to
  the region's inputs with bytes priced (what recomputing them reaches, shared inputs split);
- dominance: a frontier reached before with the same buffers counted that a later choice could share,
  no more ops reached (each must still be paid for), no more recompute and no more bytes covers this one.

The search is boxed by a count of visited branch points (``max_nodes``), not by a clock: the plan of a
region is the same on every host and every run (SPMD hosts must trace the same graph), whatever the
load. Every plan it returns is checked against ``view.evaluate``; a region this model does not
reproduce (an in-place op aliasing a saved buffer) is left to the greedy plan.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional

from xla_ckpt._record.liveness import EXTERNAL, INPUT
from xla_ckpt._policy.exact_bound import bound
from xla_ckpt._policy.plan import RegionView

__all__ = ["Exact", "exact_search"]

_FORCED, _FIXED, _FREE = 0, 1, 2  # as _policy.exact_bound's FORCED, FIXED, FREE
# The bound's knapsack decides its split item this many levels deep, and the priced walk takes at
# most this many prices (phimoe's MoE layer at 0.8: 113,578 branch points with the plain knapsack,
# 13,637 with both); the plain knapsack alone for the first STRONG_AFTER branch points, where most
# regions finish (the HF table's median: about 250), at a fifth of the cost a branch point.
SPLIT_DEPTH = 2
LAGRANGE_STEPS = 6
STRONG_AFTER = 500


@dataclass(frozen=True)
class Exact:
    """What the exact search found.

    ``status``: "optimal" (``saved`` is a least-recompute plan within the budget, or None when the
    incumbent already was one, or nothing fits), "box" (the node budget ran out) or "model" (the
    region has a buffer aliasing the search does not model). ``nodes``: branch points visited.
    """

    status: str
    saved: Optional[frozenset[int]]
    nodes: int


class _Box(Exception):
    pass


class _Mismatch(Exception):
    pass


def exact_search(view: RegionView, budget: int, incumbent: float, max_nodes: int) -> Exact:
    """The saved set of least recompute within ``budget`` bytes, if one beats ``incumbent``.

    Args:
        view: the region (see ``_policy.plan``).
        budget: bytes the region may keep.
        incumbent: the recompute of a known plan within the budget (``math.inf``: none known).
        max_nodes: branch points to visit at most; past it the answer is ``Exact("box", None, ...)``.

    Example:
        >>> r = exact_search(view, budget_bytes(0.3, view.baseline.nbytes), view.cost(greedy).recompute, 20_000)
        >>> saved = r.saved if r.status == "optimal" and r.saved is not None else greedy
    """
    s = _Search(view, budget, incumbent, max_nodes)
    limit = sys.getrecursionlimit()
    need = len(view.free) + 100
    try:
        if need > limit:
            sys.setrecursionlimit(need)  # one frame per branch point on the path
        s.run()
    except _Box:
        return Exact("box", None, s.nodes)
    except _Mismatch:
        return Exact("model", None, s.nodes)
    finally:
        if need > limit:
            sys.setrecursionlimit(limit)
    return Exact("optimal", None if s.best_saved is None else frozenset(s.best_saved), s.nodes)


class _Search:
    def __init__(self, view: RegionView, budget: int, incumbent: float, max_nodes: int) -> None:
        # The view's dataflow as evaluate() reads it (same package: _policy.plan builds it for us).
        self.view, self.budget, self.best, self.max_nodes = view, budget, incumbent, max_nodes
        n = len(view.calls)
        free, fixed = set(view.free), set(view._fixed)
        self.kind = [_FREE if p in free else _FIXED if p in fixed else _FORCED for p in range(n)]
        self.deps, self.units, self.outs = view._deps, view._units, view._outs
        self.inputs = view._inputs
        self.prune = view._prune
        owners: dict[Any, int] = {}  # entries (outputs, inputs) per buffer
        minpos: dict[Any, int] = {}
        for p, outs in enumerate(self.outs):
            for k, _ in outs:
                owners[k] = owners.get(k, 0) + 1
                minpos.setdefault(k, p)
        input_keys = set()
        for e in self.inputs:
            if e is not None:
                owners[e[0]] = owners.get(e[0], 0) + 1
                input_keys.add(e[0])
        self.shared = {k for k, c in owners.items() if c > 1}
        # Buffers whose being counted a later choice can see: inputs, and shared buffers of earlier ops.
        self.tracked = self.shared | input_keys
        self.minpos = {k: (-1 if k in input_keys else minpos[k]) for k in self.tracked}
        self.multi = {p for p, outs in enumerate(self.outs) if self.prune and len(outs) > 1}
        self.multi_keys = {k for p in self.multi for k, _ in self.outs[p]}
        # A single-output op's bytes if saved do not change during the search (the bounds ask often).
        self.own_bytes = [sum(b for k, b in outs if k not in self.shared) for outs in self.outs]
        self.reader_keys = view._dep_keys
        self.reach = [0] * n
        self.lam = 0.0  # log2 of the last best price of a byte (exact_bound.best_lagrange)
        # Per position: its producers (positions, once each) and, per producer, its readers in order.
        self.dep_set = [sorted({d for d in self.deps[q] if d >= 0}) for q in range(n)]
        readers: list[set[int]] = [set() for _ in range(n)]
        for q in range(n):
            for d in self.dep_set[q]:
                readers[d].add(q)
        self.consumers = [sorted(r) for r in readers]
        self.reached: set[int] = set()
        self.in_reach = [0] * len(self.inputs)
        self.key_count: dict[Any, int] = {}
        self.read: dict[Any, int] = {}
        self.nbytes = 0
        self.rec = 0
        self.saved: list[int] = []
        self.best_saved: Optional[list[int]] = None
        self.nodes = 0
        self.memo: dict[Any, list[tuple[frozenset[int], int, int]]] = {}
        if self.prune:
            for k in view._packed_keys:
                self.read[k] = self.read.get(k, 0) + 1
        if view._all_inputs:
            for e in self.inputs:
                if e is not None:
                    self._count(e[0], e[1], [])
        for code in list(view._packed) + list(view._always):
            self._touch(code, [])

    # -- undoable steps: each appends its undo to ``trail``
    def _count(self, key: Any, n: int, trail: list) -> None:
        c = self.key_count.get(key, 0)
        self.key_count[key] = c + 1
        if c == 0:
            self.nbytes += n
        trail.append(("k", key, n))

    def _touch(self, code: int, trail: list) -> None:
        if code <= INPUT:
            j = INPUT - code
            self.in_reach[j] += 1
            trail.append(("i", j))
            e = self.inputs[j]
            if self.in_reach[j] == 1 and e is not None and not self.view._all_inputs:
                self._count(e[0], e[1], trail)
        elif code != EXTERNAL:
            self.reach[code] += 1
            if self.reach[code] == 1:
                self.reached.add(code)
            trail.append(("r", code))

    def _cache(self, p: int, trail: list) -> None:
        outs = self.outs[p]
        for k, n in outs:
            if p in self.multi and self.read.get(k, 0) == 0:
                continue  # read by nothing decided: a later reader (none in practice) is caught by the check
            self._count(k, n, trail)

    def _recompute(self, p: int, trail: list) -> None:
        self.rec += self.units[p]
        trail.append(("u", self.units[p]))
        if self.prune:
            for k in self.reader_keys[p]:
                self.read[k] = self.read.get(k, 0) + 1
                trail.append(("d", k))
        for d in self.deps[p]:
            self._touch(d, trail)

    def _undo(self, trail: list) -> None:
        for step in reversed(trail):
            tag = step[0]
            if tag == "k":
                c = self.key_count[step[1]] - 1
                self.key_count[step[1]] = c
                if c == 0:
                    self.nbytes -= step[2]
            elif tag == "r":
                self.reach[step[1]] -= 1
                if self.reach[step[1]] == 0:
                    self.reached.discard(step[1])
            elif tag == "i":
                self.in_reach[step[1]] -= 1
            elif tag == "u":
                self.rec -= step[1]
            else:
                self.read[step[1]] -= 1
        trail.clear()

    # -- the search
    def run(self) -> None:
        if self.nbytes <= self.budget:
            self._dfs(len(self.kind) - 1)

    def _dfs(self, p: int) -> None:
        trail: list = []
        try:
            while p >= 0 and (not self.reach[p] or self.kind[p] != _FREE):
                if self.reach[p]:
                    if self.kind[p] == _FIXED:
                        self._cache(p, trail)
                        if self.nbytes > self.budget:
                            return
                    else:
                        self._recompute(p, trail)
                        if self.rec >= self.best or self.nbytes > self.budget:
                            return
                p -= 1
            if p < 0:
                self._leaf()
                return
            self.nodes += 1
            if self.nodes > self.max_nodes:
                raise _Box
            if self.rec + self._bound(p) >= self.best or self._dominated(p):
                return
            t: list = []
            self._cache(p, t)
            if self.nbytes <= self.budget:
                self.saved.append(p)
                self._dfs(p - 1)
                self.saved.pop()
            self._undo(t)
            self._recompute(p, t)
            if self.rec < self.best and self.nbytes <= self.budget:
                self._dfs(p - 1)
            self._undo(t)
        finally:
            self._undo(trail)

    def _leaf(self) -> None:
        if self.rec >= self.best:
            return
        cost = self.view.cost(self.saved)
        if cost.recompute != self.rec or cost.nbytes > self.budget:
            raise _Mismatch  # an aliasing the incremental count does not see: the greedy plan stands
        self.best, self.best_saved = self.rec, list(self.saved)

    def bytes_if_saved(self, q: int) -> int:
        """Bytes saving ``q`` adds for sure (shared buffers and unread outputs count as none)."""
        if q not in self.multi:
            return self.own_bytes[q]
        n = 0
        for k, b in self.outs[q]:
            if k in self.shared or (q in self.multi and self.read.get(k, 0) == 0):
                continue
            n += b
        return n

    def _bound(self, p: int) -> float:
        """Least recompute the positions up to ``p`` still add (``_policy.exact_bound``)."""
        lb, self.lam = bound(self, p, SPLIT_DEPTH, LAGRANGE_STEPS, self.nodes > STRONG_AFTER)
        return lb

    def _dominated(self, p: int) -> bool:
        """Whether a frontier reached before covers this one: the same buffers counted, no more ops
        reached (each must still be paid for), no more recompute and no more bytes."""
        minpos = self.minpos
        reached = frozenset(q for q in self.reached if q <= p)
        sig = (p, frozenset(k for k in self.tracked if self.key_count.get(k, 0) and minpos[k] <= p),
               frozenset(k for k in self.multi_keys if self.read.get(k, 0)) if self.multi else None)
        seen = self.memo.get(sig)
        rec, nbytes = self.rec, self.nbytes
        if seen is None:
            self.memo[sig] = [(reached, rec, nbytes)]
            return False
        for r, b, s in ((r, b, s) for s, r, b in seen):
            if r <= rec and b <= nbytes and s <= reached:
                return True
        seen[:] = [e for e in seen if not (rec <= e[1] and nbytes <= e[2] and reached <= e[0])]
        seen.append((reached, rec, nbytes))
        return False
