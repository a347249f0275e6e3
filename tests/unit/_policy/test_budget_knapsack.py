"""``memory_budget`` never recomputes more than torch's activation-memory knapsack at the same bytes.

torch's partitioner meets ``activation_memory_budget`` with a 0/1 knapsack (``dp_knapsack`` by default,
``greedy_knapsack``); bench/torch_knapsack.py runs it on a block's free ops with our bytes and
recompute units and evaluates its saved set with ``RegionView.cost``, the evaluator of our own plan
(items assumed independent by the knapsack, real liveness here). Two small blocks, every budget; the
whole HF table: ``python bench/budget_optimum.py`` (docs/budget_offload.md).
"""

from __future__ import annotations

from helpers import ROOT_DIR

import os
import sys

import pytest

sys.path.insert(0, os.path.join(ROOT_DIR, "bench"))

import budget_optimum  # noqa: E402
import torch_knapsack  # noqa: E402

from xla_ckpt import Decision  # noqa: E402
from xla_ckpt._base.warn import forgetting  # noqa: E402
from xla_ckpt._policy import budget as budget_mod  # noqa: E402
from xla_ckpt._policy.budget import budget_bytes, memory_budget  # noqa: E402

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
# (solver, tune): torch's own capacity, and the best capacity a bisection finds (dp's is 10x slower).
VARIANTS = (("dp", False), ("greedy", False), ("greedy", True))


@pytest.fixture(scope="module")
def views():
    return {arch: budget_optimum.views_of(arch)[0] for arch in ("llama", "gpt2")}


def _ours(view, f: float) -> int:  # noqa: ANN001
    with forgetting():
        decisions = memory_budget(f).plan(view)
    cost = view.cost({p for p, d in zip(view.free, decisions, strict=True) if d is Decision.SAVE})
    assert cost.nbytes <= budget_bytes(f, view.baseline.nbytes), (f, cost)
    return cost.recompute


def _torch(view, f: float) -> dict[tuple[str, bool], int]:  # noqa: ANN001
    budget = budget_bytes(f, view.baseline.nbytes)
    out = {}
    for solver, tune in VARIANTS:
        saved, cost = torch_knapsack.knapsack_plan(view, budget, solver, tune)
        assert saved is not None and cost.nbytes <= budget, (f, solver, tune, cost)  # a plan fits on these blocks
        out[(solver, tune)] = cost.recompute
    return out


def test_planner_never_recomputes_more_than_torchs_knapsack(views) -> None:  # noqa: ANN001
    strictly_less = 0
    for arch, view in views.items():
        for f in FRACTIONS:
            ours, theirs = _ours(view, f), _torch(view, f)
            worse = {k: v for k, v in theirs.items() if ours > v}
            assert not worse, (arch, f, ours, worse)
            strictly_less += ours < min(theirs.values())
    # The knapsack counts each op alone (no shared inputs, no replay walk): it recomputes more in
    # 16 of these 18 cases, whichever capacity it is given (equal at 0.1, where both recompute all).
    assert strictly_less == 16


def test_the_comparison_catches_a_weaker_planner(views, monkeypatch) -> None:  # noqa: ANN001
    # The up pass alone (no down pass, swaps or exact search) at Llama 0.3 and 0.4 recomputes
    # 2,134,272 and 1,085,696 where torch's dp knapsack recomputes 1,902,848 and 855,296: the check
    # above goes red on a planner that much worse.
    view = views["llama"]
    monkeypatch.setattr(budget_mod, "best_plan", lambda v, f: (
        budget_mod._up(v, list(v.free), budget_bytes(f, v.baseline.nbytes)), "exact"))
    for f in (0.3, 0.4):
        assert _ours(view, f) > _torch(view, f)[("dp", False)], f
