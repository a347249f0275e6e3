"""``memory_budget`` under torch.compile: planned by the library's planner on the joint graph, before the min-cut.

What the compiled forward keeps is read from the partitioner itself (the backward graph's placeholders
minus the tangents and the parameters). The fast tests partition with torch's min-cut looked up by name
at call time, as openxla's default partitioner and inductor do (where the library plans); the graphs run
as FX code (no code generation). Inductor itself and the openxla peak are the slow tier.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import pytest
import torch

import xla_ckpt
from xla_ckpt.models import GPT, GPTConfig

from helpers import assert_same
from switches import planned_regions

pytestmark = pytest.mark.newest

CFG = GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32)
CLOSE = 0.05  # the accuracy, as in eager (tests/unit/_policy/test_budget.py)
# Compiled kernels (inductor) reassociate sums: gradients agree to fp32 rounding, not bit for bit.
INDUCTOR_TOL = {"rtol": 1e-4, "atol": 1e-5}


class _Partition:
    """torch's min-cut, looked up by name per call; keeps what each forward saves (non-parameter values)."""

    def __init__(self) -> None:
        self.saved: list[dict[str, int]] = []

    def __call__(self, joint: torch.fx.GraphModule, joint_inputs: Any, **kw: Any) -> Any:
        from torch._functorch import partitioners

        fw, bw = partitioners.min_cut_rematerialization_partition(joint, joint_inputs, **kw)
        primals = [n.name for n in joint.graph.nodes if n.op == "placeholder" and n.name.startswith("primals")]
        static = {primals[i] for i in kw.get("static_lifetime_input_indices") or ()}
        nodes = {n.name: n for n in joint.graph.nodes}
        saved = {}
        for n in bw.graph.nodes:
            if n.op == "placeholder" and "tangents" not in n.name and n.name not in static:
                src = nodes.get(n.name)  # backward may save a detach() of a value (softmax's): that value
                while src is not None and src.target in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):
                    src = src.args[0]
                saved[src.name if src is not None else n.name] = _nbytes(n)
        self.saved.append(saved)
        return fw, bw


def _in_partition(name: str, saved: dict[str, int]) -> str:
    """The saved node that is the plan's node ``name``: itself, or its twin in an earlier block when the
    partitioner's CSE merged them (the causal mask, ``bitwise_not``, is the same in every block)."""
    if name in saved:
        return name
    base = name.rsplit("_", 1)[0]
    assert base == "bitwise_not" and base in saved, (name, sorted(saved))
    return base


def _within_the_band(plan: Any) -> None:
    """Kept bytes at most the budget, and within 5% of it unless nothing that still fits recomputes less
    (the eager criterion, tests/unit/_policy/test_budget.py)."""
    view, saved, cost = plan.view, plan.chosen, plan.cost
    assert view.cost(saved) == cost and cost.nbytes <= plan.budget, plan
    if cost.nbytes < (1 - CLOSE) * plan.budget:
        for q in view.free:
            if q not in saved:
                trial = view.cost(saved | {q})
                assert not (trial.nbytes <= plan.budget and trial.recompute < cost.recompute), (q, trial, cost)


def _nbytes(n: torch.fx.Node) -> int:
    v = n.meta.get("val")
    n = v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0
    return n if isinstance(n, int) else 0  # the RNG states a recomputed dropout saves: symbolic sizes, tiny


def _backend(partition: _Partition) -> Any:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    return aot_autograd(fw_compiler=lambda gm, _: make_boxed_func(gm), partition_fn=partition)


def _run(cfg: GPTConfig, budget: float | None, backend: Any) -> tuple[tuple[list[torch.Tensor], list[Any]], list[Any]]:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT(cfg)
    if budget is not None:
        xla_ckpt.apply(model, {"checkpoint": [{"blocks": True, "budget": budget}]})
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), generator=torch.Generator().manual_seed(1))
    with planned_regions() as plans, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(5)  # the dropout masks: the same draws in both runs
        loss = torch.compile(model, fullgraph=True, backend=backend)(idx, idx)
        loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    return ([loss.detach()], grads), plans


# The fast tier: one budget without and one with dropout; `make test-all` a second budget with dropout too.
@pytest.mark.parametrize("fraction,dropout", [(0.3, 0.0), (0.3, 0.1), pytest.param(0.6, 0.1, marks=pytest.mark.slow)],
                         ids=["0.3", "0.3-dropout", "0.6-dropout"])
def test_compiled_budget_keeps_the_plan_with_equal_grads(fraction, dropout):
    """Grads equal the compiled unwrapped model's (dropout included: a recomputed random op replays its RNG);
    the partition saves exactly the nodes the plan keeps; the plan keeps at most the budget and within 5%
    of it unless nothing that still fits recomputes less (as in eager); the whole forward saves less."""
    cfg = replace(CFG, dropout=dropout)
    none_part, part = _Partition(), _Partition()
    ref, _ = _run(cfg, None, _backend(none_part))
    got, plans = _run(cfg, fraction, _backend(part))
    assert_same(ref, got)
    assert len(plans) == cfg.n_layer and len(part.saved) == 1
    saved = part.saved[0]
    for plan in plans:
        assert plan.positions > 0 and plan.budget == int(fraction * plan.baseline.nbytes + 1e-6)
        assert plan.cost.nbytes <= plan.budget, plan
        _within_the_band(plan)
        # What the partition saves of the region is the plan, node for node, and the inputs it holds.
        for name in plan.saved:
            _in_partition(name, saved)
        assert set(plan.inputs) <= set(saved) | {"primals_1"}, plan.inputs
    # The plan did something: the forward keeps less than unwrapped by what the plans drop from their baselines.
    dropped = sum(p.baseline.nbytes - p.cost.nbytes for p in plans)
    assert dropped > 0 and sum(saved.values()) <= sum(none_part.saved[0].values()) - dropped


def test_compiled_budget_saved_bytes_are_the_plans():
    """The compiled forward's bytes of each region's own values are the planner's, to the byte."""
    part = _Partition()
    _, plans = _run(CFG, 0.5, _backend(part))
    saved = part.saved[0]
    for plan in plans:
        kept = sum(saved[_in_partition(n, saved)] for n in plan.saved)
        outputs = plan.cost.nbytes - sum(saved.get(n, 0) for n in plan.inputs)
        assert kept == outputs, (plan, {n: saved.get(n) for n in plan.saved})
        _within_the_band(plan)


def test_compiled_budget_under_a_backend_the_library_cannot_reach_says_so():
    """aot_eager binds its own partition function: the region runs unmarked (torch decides), equal grads, said."""
    from xla_ckpt._base import warn as _warn

    _warn._seen.discard(("compiled", "budget-unplanned"))  # said once per process
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT(CFG)
    ref_model = GPT(CFG)
    ref_model.load_state_dict(model.state_dict())
    xla_ckpt.apply(model, {"checkpoint": [{"blocks": True, "budget": 0.3}]})
    idx = torch.randint(0, CFG.vocab_size, (2, CFG.seq_len), generator=torch.Generator().manual_seed(1))
    with pytest.warns(UserWarning, match="partitioner xla_ckpt does not reach"):
        loss = torch.compile(model, backend="aot_eager")(idx, idx)
    loss.backward()
    ref_model(idx, idx).backward()
    assert_same(([], [p.grad for p in ref_model.parameters()]), ([], [p.grad for p in model.parameters()]))


@pytest.mark.slow  # inductor generates and builds C++ kernels: about a minute on 2 cores
def test_inductor_budget_one_graph_equal_grads_and_the_plan_saved():
    import torch._dynamo.utils as dynamo_utils
    import torch._inductor.compile_fx as compile_fx

    original = compile_fx.min_cut_rematerialization_partition
    cfg = replace(CFG, dropout=0.1)
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        ref, _ = _run(cfg, None, "inductor")
        dynamo_utils.counters.clear()
        got, plans = _run(cfg, 0.3, "inductor")
    assert compile_fx.min_cut_rematerialization_partition is original  # put back after the compile
    assert dynamo_utils.counters["stats"]["unique_graphs"] == 1
    assert_same(ref, got, **INDUCTOR_TOL)
    assert len(plans) == cfg.n_layer
    assert all(p.cost.nbytes <= p.budget and p.cost.recompute > 0 for p in plans), plans
