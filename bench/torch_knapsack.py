"""torch's activation-memory knapsack run on a block's candidates, its plan evaluated by our cost model.

torch's min-cut partitioner (``torch/_functorch/partitioners.py``, ``choose_saved_values_set``) meets
``activation_memory_budget`` by a 0/1 knapsack (``_activation_checkpointing/knapsack.py``:
``dp_knapsack``, the default ``activation_memory_budget_solver``, ``greedy_knapsack``, ``ilp_knapsack``):
- items: the forward nodes the aggressive min-cut would still save and that backward needs
  (``dist_from_bw < 1e9``), sorted by size, largest first;
- memory of an item: its output bytes over ``max_act - min_act`` (bytes the runtime-optimal cut
  keeps minus the graph inputs' bytes), so the budget fraction is the knapsack's capacity;
- runtime: ``estimate_runtime`` (FLOPs by ``FlopCounterMode``, at least 1);
- the knapsack maximises the runtime *saved*; the items it leaves out may be recomputed.

Here, on a ``RegionView`` (``xla_ckpt/_policy/plan.py``), with our costs and the same byte limit:
- items: the free ops the replay reaches when nothing is saved (what backward needs, directly or
  through a recomputed op), with output bytes (each buffer once) and our recompute units (matmul
  FLOPs, one unit per output element otherwise: torch's ``flops`` estimator gives such ops 1);
- ``min_act``: what the region keeps with nothing free saved (``view.cost(())``: fixed-saved outputs and
  the region inputs the replay reads); ``max_act``: the baseline (everything saved); capacity
  ``(budget - min_act) / (max_act - min_act)``;
- the knapsack's saved items are the saved set, evaluated by ``view.cost`` (the engine's liveness: a
  saved op nothing reads costs nothing, a recomputed op needs its inputs, buffers count once): the
  same evaluator the optimum table uses. The knapsack assumes items independent, so its plan may keep
  more than the budget: then its capacity is lowered by the overshoot and it is solved again, until
  the evaluated plan fits (torch itself never looks back; this gives it the benefit of the doubt);
- ``tune``: the plan of least recompute that fits over every capacity a bisection tries (the items'
  double-counted bytes make torch's own capacity too small at large budgets).

torch re-solves the min-cut after the knapsack (the left-out items become recomputable); that step
is not modelled: the comparison is between solvers on one cost model, not between partitioners.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from xla_ckpt._policy.plan import Cost, RegionView

SOLVERS = ("dp", "greedy")


def _solver(name: str) -> Callable[..., Any]:
    from torch._functorch._activation_checkpointing import knapsack  # noqa: PLC0415  (torch >= 2.5)

    return {"dp": knapsack.dp_knapsack, "greedy": knapsack.greedy_knapsack, "ilp": knapsack.ilp_knapsack}[name]


def items(view: RegionView) -> list[tuple[int, int, int]]:
    """(position, bytes, recompute units) of each knapsack item, largest first (torch's order)."""
    lv = view.evaluate(())[1]
    read: set[Any] = set(view._packed_keys)
    for q in range(len(view.calls)):
        read.update(view._dep_keys[q])
    input_keys = {e[0] for e in view._inputs if e is not None}
    out = []
    for p in view.free:
        if p not in lv.live:
            continue
        outs = view._outs[p]
        seen: set[Any] = set()
        nbytes = 0
        for k, n in outs:
            if k in seen or k in input_keys or (view._prune and len(outs) > 1 and k not in read):
                continue
            seen.add(k)
            nbytes += n
        out.append((p, nbytes, view._units[p]))
    out.sort(key=lambda t: -t[1])  # torch: sorted(recomputable_banned_nodes, key=_size_of, reverse=True)
    return out


def knapsack_plan(view: RegionView, budget: int, solver: str = "dp", tune: bool = False,
                  max_rounds: int = 50) -> tuple[Optional[set[int]], Cost]:
    """torch's ``solver`` knapsack's saved set within ``budget`` bytes, and its cost by ``view.cost``.

    ``tune``: also try larger capacities (bisection up to every item's bytes) and keep the plan of
    least recompute that still fits: the best the knapsack gives at any capacity, not only at torch's.
    Returns ``(None, cost of saving nothing)`` when even the empty knapsack keeps more than ``budget``.

    Example:
        >>> saved, cost = knapsack_plan(view, budget_bytes(0.3, view.baseline.nbytes), "dp")
    """
    fn = _solver(solver)
    its = items(view)
    lo, hi = view.cost(()).nbytes, view.baseline.nbytes
    span = max(hi - lo, 1)
    # Items of no bytes fit any capacity: saved outright (torch's greedy would divide by zero on them).
    zero = {p for p, b, _ in its if b == 0}
    sized = [(p, b, u) for p, b, u in its if b > 0]
    memory = [b / span for _, b, _ in sized]
    runtimes = [float(u) for _, _, u in sized]

    def solve(cap: int) -> tuple[set[int], Cost]:
        _, chosen, _ = fn(memory, runtimes, cap / span) if sized and cap > 0 else (0.0, [], [])
        saved = zero | {sized[i][0] for i in chosen}
        return saved, view.cost(saved)

    best: Optional[tuple[set[int], Cost]] = None
    cap = budget - lo
    for _ in range(max_rounds):
        saved, cost = solve(max(cap, 0))
        if cost.nbytes <= budget:
            best = (saved, cost)
            break
        if cap <= 0:
            break
        cap -= cost.nbytes - budget  # the overshoot the independence assumption missed
    if tune and best is not None:
        low, high = cap, max(cap, sum(b for _, b, _ in sized))
        while high - low > max(span // 4096, 1):  # the dp quantises capacity at 1e-4 of the span anyway
            mid = (low + high) // 2
            saved, cost = solve(mid)
            if cost.nbytes <= budget:
                low = mid
                if cost.recompute < best[1].recompute:
                    best = (saved, cost)
            else:
                high = mid
    if best is None:
        return None, view.cost(zero)
    return best
