"""Lower bounds of the exact budget search (``_policy.exact``): the least recompute still to come.

At a branch point ``p`` (every later position decided), each reached op at or before ``p`` will be
saved, for its bytes, or recomputed, for its units, which reaches its inputs, and so on. Two
relaxations of that, both never above the least recompute of any completion within ``cap`` bytes:

- :func:`relax`: a multiple-choice knapsack. Each reached free op ``q`` is an item: saved, or recomputed
  with each of its *private* inputs (reachable through ``q`` alone) saved or recomputed; the items'
  options are disjoint, so filling their lower convex hulls best ratio first is a bound (the LP). The
  item the fill splits is then decided both ways (``depth`` levels): a fraction of one large op (a
  matmul at 32 units per byte) then does not make the bound loose.
- :func:`lagrange`: a Lagrangian relaxation, bytes priced at ``lam`` per byte (any ``lam >= 0`` gives a
  bound: a plan within ``cap`` pays ``lam * (bytes - cap) <= 0`` on top). An op costs the lesser of its
  priced bytes and its recompute, which adds a 1/k share of the cost of each unreached input (k: its
  readers still undecided), so an input shared by k readers is counted at most once in all. Every op
  back to the region's inputs is seen, not only the reached ones: where the replay must walk far (a
  small budget: the knapsack sees a few cheap reached ops, not the matmuls behind them) it is far
  tighter (phimoe's MoE layer at 0.1: 640,000 branch points with the knapsack, 7,000 with both).

Both read the search's state (``_Search`` of ``_policy.exact``: ``reach``, ``kind``, ``units``, ...).
Floats only where a fraction is taken: rounding stays far below one unit of recompute (an integer).
Example: ``if s.rec + bound(s, p, 2, 6) >= s.best: prune``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Any

__all__ = ["bound", "relax", "item_hull", "lagrange", "best_lagrange"]

FORCED, FIXED, FREE = 0, 1, 2  # the search's kinds of position (mirrored in _policy.exact)


def bound(s: Any, p: int, depth: int, steps: int, strong: bool = True) -> tuple[float, float]:
    """Least recompute the positions up to ``p`` still add: the larger of :func:`relax` (split
    ``depth`` levels) and :func:`best_lagrange` (``steps`` prices; tried when the first does not
    already reach the incumbent). ``math.inf`` when the fixed ops reached alone are over the budget.
    Not ``strong``: the plain fractional knapsack over the reached ops (no inputs, no split, no
    prices), five to ten times cheaper a branch point, enough for most regions. Returns the bound and
    the price to start from at the next branch point (``s.lam``: log2 of the best price found)."""
    cap = s.budget - s.nbytes
    lb = 0.0
    reached = [q for q in s.reached if q <= p]
    kind, units = s.kind, s.units
    for q in reached:
        if kind[q] == FORCED:
            lb += units[q]
        elif kind[q] == FIXED:
            cap -= s.bytes_if_saved(q)
    if cap < 0:
        return math.inf, s.lam
    items: list[tuple[Any, ...]] = []
    for q in reached:
        if kind[q] != FREE:
            continue
        bq = s.bytes_if_saved(q)
        if bq == 0:
            continue  # saved for nothing: costs nothing either way
        own = units[q]
        chain: list[tuple[float, int, int]] = []
        for d in (_private_inputs(s, q, p) if strong else ()):
            u = units[d]
            if kind[d] == FORCED:
                own += u
            elif kind[d] == FREE and u:
                b = s.bytes_if_saved(d)
                if b > cap:
                    own += u
                elif b > 0:
                    chain.append((u / b, u, b))
        if own or chain:
            base = own + sum(u for _, u, _ in chain)
            items.append((base, bq, own, chain, item_hull(cap, base, bq, chain), bq <= cap))
    lb += relax(cap, items, depth if strong else 0)
    if strong and s.rec + lb < s.best:
        # The knapsack sees only reached ops; the priced walk sees what recomputing them reaches.
        value, lam = best_lagrange(s, p, cap, s.best - s.rec, steps)
        return max(lb, value), lam
    return lb, s.lam


def _private_inputs(s: Any, q: int, p: int) -> list[int]:
    """Unreached producers of ``q``'s inputs that nothing but ``q`` can still reach (every other reader
    is after ``p``: decided, and did not reach them)."""
    out = []
    for d in s.dep_set[q]:
        if s.reach[d]:
            continue
        cons = s.consumers[d]
        if cons[0] == q and (len(cons) == 1 or cons[1] > p):
            out.append(d)
    return out


def relax(cap: int, items: list, depth: int) -> float:
    """Least recompute of ``items`` within ``cap`` bytes, relaxed as above. Each item is ``(units at no
    bytes, bytes of q, q's own units, inputs, hull, hull has q saved)``: the inputs as ``(ratio, units,
    bytes)``, the hull as :func:`item_hull` made it for this cap or a larger one (made again here when
    q saved no longer fits)."""
    lb = 0.0
    segs: list[tuple[float, int, int, int]] = []
    for i, (base, bq, _, chain, hull, with_q) in enumerate(items):
        lb += base  # the item at no bytes: q and its private inputs recomputed
        if with_q and bq > cap:
            hull = item_hull(cap, base, bq, chain)  # made for a larger cap, with q saved: not here
        segs.extend((r, u, b, i) for r, u, b in hull)
    segs.sort(reverse=True)
    left, crit = cap, -1
    for _, u, b, i in segs:
        if b <= left:
            left -= b
            lb -= u
        else:
            lb -= u * left / b
            crit = i
            break
    if crit < 0 or depth <= 0:
        return lb
    _, bq, own, chain, _, _ = items[crit]
    rest = items[:crit] + items[crit + 1:]
    best = math.inf
    if bq <= cap:  # q saved
        best = relax(cap - bq, rest, depth - 1)
    if best > lb:  # q recomputed: each private input an item of its own (saved or recomputed)
        alone = [(u, math.inf, 0, (), ((r, u, b),), False) for r, u, b in chain]
        best = min(best, own + relax(cap, rest + alone, depth - 1))
    return max(lb, best)


def item_hull(cap: int, base: int, bq: int, chain: list[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """An item's options as the steps of their lower convex hull, ``(units per byte, units, bytes)``:
    its inputs saved best ratio first (from ``base``, everything recomputed), or q saved."""
    if not chain:
        return [(base / bq, base, bq)] if bq <= cap else []
    pts = [(0, base)]
    chain.sort(reverse=True)
    x, y = 0, base
    for _, u, b in chain:
        x, y = x + b, y - u
        pts.append((x, y))
    if bq <= cap:
        pts.append((bq, 0))
    return _hull_segments(pts)


def _hull_segments(pts: list[tuple[int, int]]) -> list[tuple[float, int, int]]:
    """The lower convex hull of (bytes, recompute) points from (0, most): (units per byte, units, bytes)
    of each step, steepest first."""
    pts.sort()
    hull: list[tuple[int, int]] = []
    for x, y in pts:
        if hull and y >= hull[-1][1]:
            continue  # more bytes for no less recompute: never on the frontier
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (y2 - y1) * (x - x1) >= (y - y1) * (x2 - x1):  # hull[-1] on or above the chord
                hull.pop()
            else:
                break
        hull.append((x, y))
    return [((y1 - y2) / (x2 - x1), y1 - y2, x2 - x1) for (x1, y1), (x2, y2) in itertools.pairwise(hull)]


def walk(s: Any, p: int, cap: int) -> list[tuple[int, int, int, int, tuple[tuple[int, int], ...]]]:
    """What :func:`lagrange` prices, prepared once per branch point: per position up to ``p`` (fixed
    ones left out: a bound may omit their bytes), ``(position, reached, units, bytes if saved, inputs)``, bytes
    -1 where it must be recomputed (forced, or over ``cap``), inputs as ``(position, readers still
    undecided)`` for the unreached ones."""
    units, kind, reach, deps, consumers = s.units, s.kind, s.reach, s.dep_set, s.consumers
    out = []
    for x in range(p + 1):
        k = kind[x]
        if k == FIXED:
            continue
        b = -1
        if k == FREE:
            b = s.bytes_if_saved(x)
            if b > cap:
                b = -1
        ins = tuple((e, bisect.bisect_right(consumers[e], p)) for e in deps[x] if not reach[e] and kind[e] != FIXED)
        out.append((x, reach[x], units[x], b, ins))
    return out


def lagrange(prog: list, p: int, cap: int, lam: float) -> tuple[float, float]:
    """(bound, slope in ``lam``) with bytes priced at ``lam``, over ``walk``'s positions, inputs first."""
    cost = [0.0] * (p + 1)
    grad = [0.0] * (p + 1)
    total, slope = -lam * cap, float(-cap)
    for x, reached, r, b, ins in prog:
        dr = 0.0
        for e, n in ins:
            c = cost[e]
            if c:
                r += c / n
                dr += grad[e] / n
        if b == 0:
            r, dr = 0, 0.0
        elif b > 0 and lam * b < r:
            r, dr = lam * b, float(b)
        if reached:
            total += r
            slope += dr
        else:
            cost[x], grad[x] = r, dr
    return total, slope


def best_lagrange(s: Any, p: int, cap: int, enough: float, steps: int) -> tuple[float, float]:
    """``max over lam`` of :func:`lagrange` (concave in lam): a search on log2(lam) by its slope from the
    last branch point's best price (``s.lam``), steps 4, 2, 1, ... at most ``steps`` evaluations,
    stopping once a value reaches ``enough``. Returns it and log2 of its price."""
    prog = walk(s, p, cap)
    if not any(b > 0 for _, _, _, b, _ in prog):
        return -math.inf, s.lam
    mid, step, best, at = s.lam, 4.0, -math.inf, s.lam
    for _ in range(steps):
        value, slope = lagrange(prog, p, cap, 2.0 ** mid)
        if value > best:
            best, at = value, mid
        if best >= enough:
            break
        mid += step if slope > 0 else -step
        step /= 2
    return best, at
