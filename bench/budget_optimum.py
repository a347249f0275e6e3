"""How far the ``memory_budget`` planner (greedy, and the library's plan: exact where boxed) is from the optimum.

    python bench/budget_optimum.py [--json bench/results/budget_optimum.json] [--archs llama gpt2 ...]

Beside the optimum, torch's activation-memory knapsack (``dp``, its default solver, and ``greedy``) on
the same block, costs and byte limit, its plan evaluated by the same ``view.cost``
(``bench/torch_knapsack.py`` says how the items are formed).

Needs scipy (``pip install -e .[bench]``): the optimum is an integer program solved by HiGHS through
``scipy.optimize.milp``. The library never imports this file; it is the reference the greedy search
(``xla_ckpt/_policy/budget.py``: two greedy passes and swaps) and the library's plan (``best_plan``: that
greedy plan improved by the exact branch and bound of ``_policy/exact.py`` where it finishes within
its box) are measured against.

The program is ``RegionView.evaluate`` (what the engine keeps and recomputes for a saved set) written
as linear constraints, so its optimum is exact for the same cost model:

- ``s_p``: free position p saved (fixed-saved positions 1, the others 0);
- ``n_p``: p is reached by the replay's walk back from what backward reads (packed tensors' producers
  and ops that must run): ``n_d >= n_p - s_p`` for each producer d of p's arguments (a recomputed op
  needs its inputs); ``i_j`` the same for region input j;
- ``r_p >= n_p - s_p`` (recomputed, costing its units), ``c_p >= n_p + s_p - 1`` (read from the cache);
- ``b_k`` for each buffer: ``b_k >= c_p`` for a cached op writing k (a multi-output op's output only
  when backward or a recomputed op reads it: ``b_k >= c_p + r_q - 1``), ``b_k >= i_j``;
- ``sum_k bytes_k b_k <= budget``; minimise ``sum_p units_p r_p``.

Minimising never gains from a larger walk, so the least fixed point (the engine's) is optimal. Every
optimum is checked by ``view.cost`` of its saved set: the same bytes bound and the same recompute.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import xla_ckpt  # noqa: E402
from xla_ckpt import hf_models  # noqa: E402
from xla_ckpt._record.liveness import EXTERNAL, INPUT  # noqa: E402
from xla_ckpt._policy.budget import best_plan, budget_bytes, memory_budget, search  # noqa: E402
from xla_ckpt._policy.plan import RegionView  # noqa: E402

import torch_knapsack  # noqa: E402  (bench/: torch's knapsack on the same candidates and costs)

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


class Capture:
    """A planning policy that plans like ``memory_budget(1.0)`` and keeps every view it is shown."""

    def __init__(self) -> None:
        self.views: list[RegionView] = []
        self.inner = memory_budget(1.0)

    def __call__(self, call: Any) -> Any:  # pragma: no cover - planners are not asked per op
        raise AssertionError

    def plan(self, view: RegionView) -> Any:
        self.views.append(view)
        return self.inner.plan(view)


def optimum(view: RegionView, budget: int, time_limit: float = 60.0) -> Optional[tuple[set[int], int]]:
    """(saved set, recompute) of least recompute within ``budget`` bytes, or None if none fits (or the
    time limit ran out before the optimum was proven)."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: PLC0415  (views_of needs no scipy)
    from scipy.sparse import lil_matrix  # noqa: PLC0415

    n = len(view.calls)
    free, fixed = set(view.free), set(view._fixed)
    deps, packed, always = view._deps, view._packed, view._always
    n_inputs = len(view._inputs)
    # Variable layout: s, n, r, c per position; i per input; b per buffer key.
    keys: dict[Any, int] = {}
    for outs in view._outs:
        for k, _ in outs:
            keys.setdefault(k, len(keys))
    for e in view._inputs:
        if e is not None:
            keys.setdefault(e[0], len(keys))
    S, N, R, C = 0, n, 2 * n, 3 * n
    I = 4 * n  # noqa: E741
    B = I + n_inputs
    nv = B + len(keys)
    rows: list[tuple[dict[int, float], float, float]] = []  # (coefficients, lower, upper)

    def ge(a: int, terms: dict[int, float], const: float = 0.0) -> None:
        """x_a >= sum(terms) + const, as x_a - sum(terms) >= const."""
        coef = {a: 1.0}
        for v, c in terms.items():
            coef[v] = coef.get(v, 0.0) - c
        rows.append((coef, const, np.inf))

    lb, ub = np.zeros(nv), np.ones(nv)
    for p in range(n):
        if p in fixed:
            lb[S + p] = 1
        elif p not in free:
            ub[S + p] = 0
    for root in list(packed) + list(always):
        if root <= INPUT:
            lb[I + INPUT - root] = 1
        elif root != EXTERNAL:
            lb[N + root] = 1
    for p in range(n):
        for d in deps[p]:
            if d <= INPUT:
                ge(I + INPUT - d, {N + p: 1, S + p: -1})
            elif d != EXTERNAL:
                ge(N + d, {N + p: 1, S + p: -1})
        ge(R + p, {N + p: 1, S + p: -1})
        ge(C + p, {N + p: 1, S + p: 1}, -1.0)
    readers: dict[Any, list[int]] = {}
    for q in range(n):
        for k in view._dep_keys[q]:
            readers.setdefault(k, []).append(q)
    packed_keys = view._packed_keys
    for p, outs in enumerate(view._outs):
        for k, _ in outs:
            if not view._prune or len(outs) == 1 or k in packed_keys:
                ge(B + keys[k], {C + p: 1})
            else:
                for q in readers.get(k, ()):
                    ge(B + keys[k], {C + p: 1, R + q: 1}, -1.0)
    for j, e in enumerate(view._inputs):
        if e is None:
            continue
        if view._all_inputs:
            lb[B + keys[e[0]]] = 1
        else:
            ge(B + keys[e[0]], {I + j: 1})
    size = np.zeros(nv)
    for outs in view._outs:
        for k, nbytes in outs:
            size[B + keys[k]] = nbytes
    for e in view._inputs:
        if e is not None:
            size[B + keys[e[0]]] = e[1]
    A = lil_matrix((len(rows) + 1, nv))
    lo, hi = np.empty(len(rows) + 1), np.empty(len(rows) + 1)
    for i, (coef, low, high) in enumerate(rows):
        for v, c in coef.items():
            A[i, v] = c
        lo[i], hi[i] = low, high
    A[len(rows), :] = size
    lo[-1], hi[-1] = 0, budget
    cost = np.zeros(nv)
    cost[R:R + n] = view._units
    res = milp(cost, constraints=LinearConstraint(A.tocsr(), lo, hi), integrality=np.ones(nv),
               bounds=Bounds(lb, ub), options={"time_limit": time_limit, "mip_rel_gap": 0.0})  # exact, not within 1e-4
    if res.status != 0 or res.x is None:  # 0: optimal; else infeasible, or a time limit without proof
        return None
    saved = {p for p in view.free if res.x[S + p] > 0.5}
    return saved, int(round(res.fun))


def _ratio(cost: Any, budget: int, opt_rec: Optional[int]) -> Optional[float]:
    """recompute / the optimum's (None: over the budget, or nothing fits)."""
    if opt_rec is None or cost.nbytes > budget:
        return None
    return cost.recompute / opt_rec if opt_rec else (1.0 if cost.recompute == 0 else float("inf"))


def _torch_cell(rec: Optional[int], ours: int) -> str:
    """torch's knapsack's recompute / the planner's ("-": its plan does not fit; "=": both 0)."""
    if rec is None:
        return "-"
    return f"{rec / ours:.3f}" if ours else ("=" if rec == 0 else "inf")


def views_of(arch: str) -> list[RegionView]:
    """The distinct block views of a small default-config ``arch`` (one training step on CPU)."""
    model = hf_models.build(arch, d_model=64, n_layer=2, n_head=4, seq_len=32)
    cap = Capture()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in xla_ckpt.find_blocks(model):
            xla_ckpt.checkpointed(model.get_submodule(name), policy=cap)
        out = model(**hf_models.batch(arch, model, seq_len=32))
    loss = out.loss if hasattr(out, "loss") else out.logits.sum()
    loss.backward()
    distinct: dict[Any, RegionView] = {}
    for v in cap.views:
        distinct.setdefault(v.structure(), v)
    return list(distinct.values())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--archs", nargs="*", default=list(hf_models.ARCHS))
    p.add_argument("--time-limit", type=float, default=60.0)
    a = p.parse_args()
    rows = []
    print("| block | free ops | budget | greedy recompute | planner | optimum | greedy / optimum | planner / optimum "
          "| how | greedy s | planner s | MILP s | torch dp / planner | tuned | torch greedy / planner |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for arch in a.archs:
        try:
            views = views_of(arch)
        except Exception as e:  # noqa: BLE001 - a model that does not build here is reported, not fatal
            print(f"| {arch} | skipped: {type(e).__name__}: {str(e)[:80]} |")
            continue
        for vi, view in enumerate(views):
            base = view.baseline.nbytes
            for f in FRACTIONS:
                budget = budget_bytes(f, base)
                t0 = time.perf_counter()
                greedy = view.cost(search(view, f))
                t1 = time.perf_counter()
                planned, how = best_plan(view, f)  # the greedy search again, then the exact one
                planner = view.cost(planned)
                tp = time.perf_counter()
                best = optimum(view, budget, a.time_limit)
                t2 = time.perf_counter()
                if best is None:
                    opt_rec = None  # nothing fits: greedy keeps the fewest bytes it can
                else:
                    saved, opt_rec = best
                    check = view.cost(saved)
                    assert check.nbytes <= budget and check.recompute == opt_rec, (arch, f, check, opt_rec)
                torch_rec: dict[str, Optional[int]] = {}
                for solver in torch_knapsack.SOLVERS:
                    for tune in (False, True):
                        tsaved, tcost = torch_knapsack.knapsack_plan(view, budget, solver, tune)
                        torch_rec[solver + ("_tuned" if tune else "")] = None if tsaved is None else tcost.recompute
                fits = greedy.nbytes <= budget
                ratio = _ratio(greedy, budget, opt_rec)
                pratio = _ratio(planner, budget, opt_rec)
                block = arch if len(views) == 1 else f"{arch} #{vi}"
                rows.append(dict(block=block, free=len(view.free), fraction=f, budget=budget, baseline=base,
                                 greedy_recompute=greedy.recompute, greedy_bytes=greedy.nbytes, greedy_fits=fits,
                                 optimum_recompute=opt_rec, ratio=ratio, greedy_s=t1 - t0,
                                 planner_recompute=planner.recompute, planner_bytes=planner.nbytes,
                                 planner_ratio=pratio, planner_how=how, planner_s=tp - t1, milp_s=t2 - tp,
                                 **{f"torch_{k}_recompute": v for k, v in torch_rec.items()}))
                shown = "nothing fits" if opt_rec is None else f"{opt_rec:,}"
                print(f"| {block} | {len(view.free)} | {f:g} | {greedy.recompute:,}{'' if fits else ' (over)'} | "
                      f"{planner.recompute:,} | {shown} | {'-' if ratio is None else f'{ratio:.4f}'} | "
                      f"{'-' if pratio is None else f'{pratio:.4f}'} | {how} | {t1 - t0:.2f} | {tp - t1:.2f} | "
                      f"{t2 - tp:.2f} | {_torch_cell(torch_rec['dp'], planner.recompute)} | "
                      f"{_torch_cell(torch_rec['dp_tuned'], planner.recompute)} | "
                      f"{_torch_cell(torch_rec['greedy'], planner.recompute)} |", flush=True)
    for name, col in (("greedy", "ratio"), ("the planner", "planner_ratio")):
        off = [r for r in rows if r[col] is not None and r[col] > 1.02]
        print(f"\n{len(rows)} cases; {name} more than 2% over the optimum in {len(off)}: "
              + (", ".join(f"{r['block']}@{r['fraction']:g} ({r[col]:.3f})" for r in off) or "none"))
    for k in ("dp", "dp_tuned", "greedy", "greedy_tuned"):
        col = f"torch_{k}_recompute"
        both = [r for r in rows if r[col] is not None and r["planner_bytes"] <= r["budget"]]
        worse = [r for r in both if r["planner_recompute"] > r[col]]
        better = [r for r in both if r["planner_recompute"] < r[col]]
        print(f"torch's {k} knapsack: {len(both)} cases both fit; the planner recomputes more in {len(worse)}"
              + "".join(f", {r['block']}@{r['fraction']:g}" for r in worse) + f", less in {len(better)}")
    greedy_only = [r for r in rows if r["planner_how"] != "exact"]
    print(f"planned greedily (exact search boxed out): {len(greedy_only)}: "
          + (", ".join(f"{r['block']}@{r['fraction']:g}" for r in greedy_only) or "none"))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"fractions": FRACTIONS, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
