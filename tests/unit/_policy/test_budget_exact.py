"""The exact budget plan (``_policy.exact``, used by ``memory_budget``) against scipy's integer program.

The optimum comes from bench/budget_optimum.py (HiGHS through ``scipy.optimize.milp``, the ``bench``
extra): skipped without scipy. What needs no scipy always runs: the exact plan fits the budget, never
recomputes more than the greedy plan, and past its box the greedy plan stands and says so.
"""

from __future__ import annotations

from helpers import ROOT_DIR

import math
import os
import sys
import warnings

import pytest

sys.path.insert(0, os.path.join(ROOT_DIR, "bench"))

import budget_optimum  # noqa: E402

from xla_ckpt import Decision  # noqa: E402
from xla_ckpt._base.warn import forgetting  # noqa: E402
from xla_ckpt._policy import budget as budget_mod  # noqa: E402
from xla_ckpt._policy.budget import budget_bytes, memory_budget, search  # noqa: E402

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@pytest.fixture(scope="module")
def llama_view():
    (view,) = budget_optimum.views_of("llama")
    return view


@pytest.fixture(scope="module")
def gpt2_view():
    (view,) = budget_optimum.views_of("gpt2")
    return view


def _planned(policy: memory_budget, view) -> set[int]:  # noqa: ANN001
    decisions = policy.plan(view)
    assert len(decisions) == len(view.free)
    return {p for p, d in zip(view.free, decisions, strict=True) if d is Decision.SAVE}


def test_exact_plan_fits_and_never_recomputes_more_than_greedy(gpt2_view) -> None:  # noqa: ANN001
    view = gpt2_view
    better = 0
    for f in FRACTIONS:
        budget = budget_bytes(f, view.baseline.nbytes)
        policy = memory_budget(f)
        with forgetting(), warnings.catch_warnings():
            warnings.simplefilter("error")  # the exact search finishes on this block: no fallback notice
            exact = view.cost(_planned(policy, view))
        greedy = view.cost(search(view, f))
        assert exact.nbytes <= budget and exact.recompute <= greedy.recompute, (f, exact, greedy)
        assert policy.planned() == {"exact": 1}
        better += exact.recompute < greedy.recompute
    # GPT-2's layer at 0.2, 0.3, 0.4: greedy 1.007x, 1.027x, 1.100x of the optimum (docs/budget_offload.md)
    assert better == 3


def test_exact_plan_is_the_integer_programs_optimum(llama_view, gpt2_view) -> None:  # noqa: ANN001
    pytest.importorskip("scipy")
    for view in (llama_view, gpt2_view):
        for f in FRACTIONS:
            budget = budget_bytes(f, view.baseline.nbytes)
            with forgetting():
                exact = view.cost(_planned(memory_budget(f), view))
            _, optimum = budget_optimum.optimum(view, budget)
            assert exact.nbytes <= budget and exact.recompute == optimum, (f, exact, optimum)


@pytest.mark.parametrize("knob, why", [("EXACT_MAX_NODES", "stopped at 0 branch points"),
                                       ("EXACT_MAX_FREE", "free ops, over the exact search's 0")])
def test_past_the_box_the_greedy_plan_stands_and_says_so(gpt2_view, monkeypatch, knob, why) -> None:  # noqa: ANN001
    view, f = gpt2_view, 0.4  # a budget where greedy is 10% above the optimum: the fallback is visible
    monkeypatch.setattr(budget_mod, knob, 0)
    policy = memory_budget(f)
    with forgetting():
        with pytest.warns(UserWarning, match=r"memory_budget\(0.4\): a region planned greedily, not exactly"):
            saved = _planned(policy, view)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once
            assert _planned(memory_budget(f), view) == saved
    assert saved == search(view, f)
    (how,) = policy.planned()
    assert how.startswith("greedy: ") and why in how, how
    monkeypatch.undo()
    assert view.cost(_planned(memory_budget(f), view)).recompute < view.cost(saved).recompute


def test_strong_bound_prunes_more_and_keeps_the_optimum(llama_view, gpt2_view, monkeypatch) -> None:  # noqa: ANN001
    # The knapsack with private inputs and the priced walk (_policy.exact_bound) run only past
    # STRONG_AFTER branch points, which these small blocks never reach: forced on here. A bound above
    # the least recompute of some completion would prune the optimum: the plans must stay equal.
    from xla_ckpt._policy import exact as exact_mod

    fewer = 0
    for view in (llama_view, gpt2_view):
        for f in FRACTIONS:
            budget = budget_bytes(f, view.baseline.nbytes)
            cost = view.cost(search(view, f))
            found = {}
            for after in (10**9, 0):
                monkeypatch.setattr(exact_mod, "STRONG_AFTER", after)
                # no incumbent: the search itself must find the optimum, and prove it
                r = exact_mod.exact_search(view, budget, math.inf, 100_000)
                assert r.status == "optimal" and r.saved is not None, (f, after, r)
                found[after] = (view.cost(r.saved).recompute, r.nodes)
            assert found[0][0] == found[10**9][0] <= cost.recompute, (f, found, cost)
            fewer += found[0][1] < found[10**9][1]
    assert fewer == 18, fewer  # every case: fewer branch points with the strong bound
