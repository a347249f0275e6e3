"""``memory_budget(fraction)``: keep at most a fraction of a region's bytes, recomputing as little as possible.

A planning policy (see ``_policy.plan``): at the end of each region's forward it chooses which ops to save
so that the bytes the region keeps (``RegionView.cost``: cached outputs backward reads, region inputs
the replay reads) are at most ``fraction`` of what it keeps with every op saved (no checkpointing),
minimising the recompute cost (matmul FLOPs, one unit per element for other ops), counting the ops
recomputed only to rebuild a saved op's inputs.

The search is two greedy passes on the exact cost, then swaps:
- down from "save everything": drop the saved op that frees the most bytes per unit of recompute
  added, until the bytes fit (what torch's knapsack does, but on the real liveness, not op by op);
- up from "save nothing": add the op that removes the most recompute per byte added while it fits;
- then 1-for-1 exchanges that lower the recompute and still fit;
- on the cheaper of the two, one round of wider exchanges: add one op, drop until it fits, refill the
  freed bytes with the up pass.

That greedy plan is the incumbent of an exact branch and bound (``_policy.exact``, pure Python) on
regions of at most ``EXACT_MAX_FREE`` free ops: it returns a plan of least recompute for this cost
model, or stops after ``EXACT_MAX_NODES`` branch points and the greedy plan stands (a warning, once,
and ``planned()`` / ``python -m xla_ckpt explain`` say which regions). bench/budget_optimum.py checks
both against an integer program (scipy). A region's plan is remembered by its structure (ops,
shapes, dataflow), so identical blocks and later steps reuse it; ``plan_cache_size`` bounds that.

torch's compiled equivalent is ``torch._functorch.config.activation_memory_budget`` (a whole-graph
knob of the min-cut partitioner): under ``torch.compile`` this policy leaves the region unmarked and
says so once (see ``_compile.marks``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Collection, Hashable, Optional

from xla_ckpt._base.warn import warn_once
from xla_ckpt._policy.exact import exact_search
from xla_ckpt._policy.plan import RegionView
from xla_ckpt._record.opcall import Decision, OpCall
from xla_ckpt._policy.registry import register

__all__ = ["memory_budget", "EXACT_MAX_FREE", "EXACT_MAX_NODES"]

SAVE, RECOMPUTE = Decision.SAVE, Decision.RECOMPUTE

# The exact search (``_policy.exact``) runs on regions of at most this many free ops...
EXACT_MAX_FREE = 128
# ...and stops after this many branch points (a count, not a clock, so every host and run plans the
# same): 0.5 s of pure Python with the plain bound, about 2.5 s with the strong one past 500
# (``_policy.exact``) on the loaded 2-core machine of docs/budget_offload.md, where the greedy search
# alone takes 0.3-2 s on the largest HF blocks. Past it, the greedy plan, said once.
EXACT_MAX_NODES = 20_000


@dataclass(frozen=True)
class memory_budget:  # noqa: N801  (a value-like policy constructor, named like the built-ins)
    """Keep at most ``fraction`` of the bytes a region keeps without checkpointing; recompute the least.

    Args:
        fraction: in (0, 1], the share of the region's no-checkpointing bytes it may keep (1: save
            everything backward reads). When even recomputing everything keeps more than the budget,
            the plan keeping the fewest bytes is used (so a small fraction keeps as little as possible).
            0, a negative share, more than 1, NaN or a non-number is a ``ValueError`` naming the value.

    Example:
        >>> y = xla_ckpt.checkpoint(block, x, policy=policies.memory_budget(0.3))
        >>> # config: policy = { name = "memory_budget", fraction = 0.3 }   or   budget = 0.3
    """

    fraction: float
    # Plans by region structure (a memo, not state a decision depends on): cleared when it grows past
    # plan_cache_size distinct structures.
    _plans: dict[Hashable, tuple[Decision, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False)
    # How each remembered structure was planned ("exact", or "greedy: why"), for ``planned()``/explain.
    _how: dict[Hashable, str] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    plan_cache_size = 64

    def __post_init__(self) -> None:
        f = self.fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not (0.0 < f <= 1.0) or math.isnan(f):
            # 0 is refused rather than read as "as little as possible": a budget of no bytes is a typo
            # (a percentage, a missing digit) more often than a plan.
            raise ValueError(f"memory_budget: fraction must be a number in (0, 1] (the share of the bytes the "
                             f"region keeps without checkpointing), got {f!r}")
        object.__setattr__(self, "fraction", float(f))

    def __call__(self, call: OpCall) -> Decision:
        raise TypeError(
            f"{self!r} plans a whole region: the engine calls its plan(); it cannot decide one op "
            f"({call.op}) alone (it is not usable inside any_of/all_of or scan_layers)"
        )

    def __repr__(self) -> str:
        return f"memory_budget({self.fraction:g})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (memory_budget, (self.fraction,))  # the plan cache does not travel

    def plan(self, view: RegionView) -> list[Decision]:
        """One Decision per ``view.free`` position (see the module docstring for the search)."""
        key = view.structure()
        hit = self._plans.get(key)
        if hit is None:
            saved, how = best_plan(view, self.fraction)
            hit = tuple(SAVE if p in saved else RECOMPUTE for p in view.free)
            if len(self._plans) >= self.plan_cache_size:
                self._plans.clear()
                self._how.clear()
            self._plans[key] = hit
            self._how[key] = how
            if how != "exact":
                warn_once(("memory_budget", "greedy", how.split(":")[0]),
                          f"{self!r}: a region planned greedily, not exactly ({how}); its recompute may be "
                          f"above the least within the budget (python -m xla_ckpt explain shows which)")
        return list(hit)

    def planned(self) -> dict[str, int]:
        """How the region structures planned so far were planned: ``{"exact": n, "greedy: why": m}``.

        Example:
            >>> policy.planned()
            {'exact': 1}
        """
        out: dict[str, int] = {}
        for how in self._how.values():
            out[how] = out.get(how, 0) + 1
        return out


def budget_bytes(fraction: float, baseline: int) -> int:
    """The budget in bytes: ``fraction`` of ``baseline``, rounded down (a fraction read back from bytes
    kept, e.g. ``131072 / 329728``, gives 131072 again, not 131071.99...)."""
    return math.floor(fraction * baseline + 1e-6)


def best_plan(view: RegionView, fraction: float) -> tuple[set[int], str]:
    """The saved set ``memory_budget`` uses, and how it was found: "exact" or "greedy: why".

    The greedy plan (:func:`search`) is the exact search's incumbent; the exact search
    (``_policy.exact``) replaces it by a plan of strictly less recompute when one exists, or proves it
    optimal. Regions over ``EXACT_MAX_FREE`` free ops, or whose search passes ``EXACT_MAX_NODES``
    branch points, keep the greedy plan.
    """
    greedy = search(view, fraction)
    n = len(view.free)
    if n > EXACT_MAX_FREE:
        return greedy, f"greedy: {n} free ops, over the exact search's {EXACT_MAX_FREE}"
    budget = budget_bytes(fraction, view.baseline.nbytes)
    cost = view.cost(greedy)
    r = exact_search(view, budget, cost.recompute if cost.nbytes <= budget else math.inf, EXACT_MAX_NODES)
    if r.status == "box":
        return greedy, f"greedy: exact search stopped at {EXACT_MAX_NODES} branch points ({n} free ops)"
    if r.status == "model":
        return greedy, "greedy: the region aliases a buffer the exact search does not model"
    return (set(r.saved) if r.saved is not None else greedy), "exact"


def search(view: RegionView, fraction: float) -> set[int]:
    """The greedy saved set: bytes within ``fraction`` of the baseline, least recompute (greedy + swaps)."""
    free = list(view.free)
    budget = budget_bytes(fraction, view.cost(free).nbytes)
    cands = [_down(view, free, budget), _up(view, free, budget)]
    cands = [_swaps(view, free, s, budget) for s in cands]
    fits = [(view.cost(s), s) for s in cands]
    ok = [(c, s) for c, s in fits if c.nbytes <= budget]
    if ok:
        best = min(ok, key=lambda cs: (cs[0].recompute, cs[0].nbytes, len(cs[1])))[1]
        # One round of wider moves on the winner (add, repair, refill: see _swaps), against the exact
        # optimum of bench/budget_optimum.py: 17 of 243 HF-table cases more than 2% off without it, 4 with.
        return _swaps(view, free, best, budget, rounds=1, refill=True)
    return min(fits, key=lambda cs: (cs[0].nbytes, cs[0].recompute))[1]


def _down(view: RegionView, start: Collection[int], budget: float, keep: Collection[int] = ()) -> set[int]:
    saved = set(start)
    cost, lv = view.evaluate(saved)
    while cost.nbytes > budget:
        best: Optional[tuple[float, float, int, int]] = None
        best_eval: Any = None
        for p in sorted((saved & lv.cached) - set(keep)):  # dropping an op backward does not read changes nothing
            trial = view.evaluate(saved - {p})
            freed = cost.nbytes - trial[0].nbytes
            if freed <= 0:
                continue
            added = trial[0].recompute - cost.recompute
            # Bytes beyond what is still needed are worth nothing: without the cap, one big drop beats
            # two small cheaper ones that reach the budget together.
            useful = min(freed, cost.nbytes - budget)
            cand = (useful / added if added > 0 else math.inf, useful, -added, -p)
            if best is None or cand > best:
                best, best_eval = cand, trial
        if best is None:
            break  # no single op frees bytes: the up pass covers this budget
        saved.discard(-best[3])
        cost, lv = best_eval
    return saved


def _up(view: RegionView, free: list[int], budget: float, start: Collection[int] = ()) -> set[int]:
    saved: set[int] = set(start)
    cost, lv = view.evaluate(saved)
    while True:
        best: Optional[tuple[float, int, int]] = None
        best_eval: Any = None
        for p in free:
            if p in saved or p not in lv.live:  # saving an op the replay does not run saves nothing
                continue
            trial = view.evaluate(saved | {p})
            gain = cost.recompute - trial[0].recompute
            if gain <= 0 or trial[0].nbytes > budget:
                continue
            added = trial[0].nbytes - cost.nbytes
            cand = (gain / added if added > 0 else math.inf, gain, -p)
            if best is None or cand > best:
                best, best_eval = cand, trial
        if best is None:
            return saved
        saved.add(-best[2])
        cost, lv = best_eval


def _swaps(view: RegionView, free: list[int], saved: set[int], budget: float, rounds: int = 4,
           refill: bool = False) -> set[int]:
    """Add one op the replay runs, then drop (as the down pass) until it fits: keep it if it recomputes less.

    Repairs what greedy passes miss: saving one large output (a projection) in place of two smaller
    ones the up pass took first for their better ratio. ``refill``: after the drops, add back (as the
    up pass) what fits in the bytes they freed, e.g. a Llama layer at 0.4: the MLP's up projection in
    place of a smaller matmul and an add, plus the small norm and rotary outputs beside it (-24% recompute).
    """
    cost, lv = view.evaluate(saved)
    if cost.nbytes > budget:
        return saved
    for _ in range(rounds):
        improved = False
        for q in free:
            if q in saved or q not in lv.live:
                continue
            trial_set = _down(view, saved | {q}, budget, keep=(q,))
            if refill:
                trial_set = _up(view, free, budget, start=trial_set)
            trial = view.evaluate(trial_set)
            if trial[0].nbytes <= budget and (trial[0].recompute, trial[0].nbytes) < (cost.recompute, cost.nbytes):
                saved, (cost, lv), improved = trial_set, trial, True
        if not improved:
            break
    return saved


register("memory_budget", lambda fraction: memory_budget(fraction))
