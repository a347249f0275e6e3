"""``policies.memory_budget`` and region planning (``plan``): accuracy, Pareto front, gradients.

Bytes are the ledger's (``saved_activations``), recompute FLOPs torch's ``FlopCounterMode`` over
backward: both deterministic, and neither read from the planner's own cost model, which the tests
check against them.
"""

from __future__ import annotations

import copy
import re
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import xla_ckpt
from xla_ckpt import Decision, policies
from xla_ckpt._policy.budget import budget_bytes, memory_budget
from xla_ckpt.models import Block, GPTConfig

from helpers import assert_same, grads_of

FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)
CLOSE = 0.05  # the accuracy: kept bytes within 5% of the budget, unless nothing fits
# The per-op policies behind the built-in presets (none = everything_saveable, full = nothing_saveable).
PRESET_POLICIES = {
    "none": "everything_saveable",
    "full": "nothing_saveable",
    "dots": "dots_saveable",
    "megatron_selective": "dots_with_no_batch_dims_saveable",
    "names": policies.save_only_these_names("qkv", "mlp_up", "mlp_gate"),
}


class Spy:
    """A planning policy that delegates to ``inner`` and records every view and answer."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.seen: list[tuple] = []

    def __call__(self, call):  # pragma: no cover - planners are not asked per op
        raise AssertionError("a planner is never asked per op")

    def plan(self, view):
        out = self.inner.plan(view)
        self.seen.append((view, out))
        return out


def _block(device: torch.device):
    torch.manual_seed(0)
    blk = Block(GPTConfig(d_model=64, n_head=4, seq_len=32)).to(device)
    x = torch.randn(2, 32, 64, device=device, requires_grad=True)
    return blk, x


def _measure(fn, x, device):
    """(kept bytes, backward FLOPs) of one step."""
    with xla_ckpt.saved_activations() as report:
        y = fn(x)
    with FlopCounterMode(display=False) as flops:
        y.sum().backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    return report.nbytes, flops.get_total_flops()


def _chosen(view, decisions) -> set[int]:
    return {p for p, d in zip(view.free, decisions, strict=True) if d is Decision.SAVE}


# XLA compiles each fraction: 0.5 is in the fast tier on both devices, the others on CPU only.
@pytest.mark.parametrize("fraction", [f if f == 0.5 else pytest.param(f, marks=pytest.mark.slow_on_xla)
                                      for f in FRACTIONS])
def test_block_keeps_the_budget_with_equal_grads(device, fraction):
    blk, x = _block(device)
    params = list(blk.parameters())
    spy = Spy(memory_budget(fraction))
    ref = grads_of(blk, [x], params)
    got = grads_of(lambda x: xla_ckpt.checkpoint(blk, x, policy=spy), [x], params)
    assert_same(ref, got)

    kept, _ = _measure(lambda x: xla_ckpt.checkpoint(blk, x, policy=spy), x, device)
    view, decisions = spy.seen[-1]
    saved = _chosen(view, decisions)
    cost, base = view.cost(saved), view.baseline
    budget = budget_bytes(fraction, base.nbytes)
    # The planner's model of what the region keeps is the ledger's figure, to the byte.
    assert kept == cost.nbytes
    assert kept <= budget
    if kept < (1 - CLOSE) * budget:
        # Below the 5% band: only allowed when nothing that still fits recomputes less.
        for q in view.free:
            if q not in saved:
                trial = view.cost(saved | {q})
                assert not (trial.nbytes <= budget and trial.recompute < cost.recompute), (q, trial, cost)
    if device.type == "cpu":
        none, _ = _measure(blk, x, device)
        assert base.nbytes == none  # eager: every op saved keeps exactly what autograd keeps


@pytest.mark.slow_on_xla  # every preset and fraction compiled on XLA
def test_block_budget_is_on_the_pareto_front_of_the_presets(device):
    """No preset keeps fewer bytes with fewer recompute FLOPs than the budget at any fraction; at a
    preset's own bytes, the budget keeps no more and recomputes no more.

    Recompute FLOPs: on CPU, torch's FlopCounterMode over backward minus the plain backward's (the
    eager replay skips dead ops, so this is what runs; it must equal the planner's model). On XLA
    every position is traced and the compiler drops the dead ones, so a trace-level count says
    nothing: there the figure is the liveness model's (``RegionView.cost``), whose bytes the
    accuracy test checks against the ledger.
    """
    blk, x = _block(device)
    _, plain = _measure(blk, x, device)
    spy = Spy(memory_budget(1.0))
    xla_ckpt.checkpoint(blk, x, policy=spy).sum().backward()
    view = spy.seen[0][0]

    def point(policy) -> tuple[int, int]:
        probe = Spy(policy) if isinstance(policy, memory_budget) else policy
        kept, flops = _measure(lambda x: xla_ckpt.checkpoint(blk, x, policy=probe), x, device)
        if isinstance(probe, Spy):
            model = view.cost(_chosen(*probe.seen[-1])).flops
        else:
            pol = policies.resolve(policy)
            model = view.cost({p for p in view.free if pol(view.calls[p]) is Decision.SAVE}).flops
        if device.type == "cpu":
            assert flops - plain == model, (policy, flops - plain, model)
        return kept, model

    presets = {name: point(pol) for name, pol in PRESET_POLICIES.items()}
    base = presets["none"][0]
    assert base == view.baseline.nbytes
    points = {f: point(memory_budget(f)) for f in FRACTIONS + tuple(k / base for k, _ in presets.values())}
    for f, (kept, recompute) in points.items():
        for name, (pk, pr) in presets.items():
            assert not (pk < kept and pr < recompute), f"{name} {pk, pr} dominates memory_budget({f}) {kept, recompute}"
    for name, (pk, pr) in presets.items():
        kept, recompute = points[pk / base]
        assert kept <= pk and recompute <= pr, (name, (pk, pr), (kept, recompute))
    # The sweep spans the range: 0.1 recomputes matmuls, 0.9 recomputes none.
    assert points[0.9][1] == 0 < points[0.1][1]


def _llama():
    pytest.importorskip("transformers")
    from xla_ckpt import hf_models

    torch.manual_seed(0)
    model = hf_models.build("llama", d_model=64, n_layer=2, n_head=4, seq_len=32)
    batch = hf_models.batch("llama", model, batch=2, seq_len=32)
    return model, batch


def _llama_step(model, batch):
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    with xla_ckpt.saved_activations() as report:
        loss = model(**batch).loss
    with FlopCounterMode(display=False) as flops:
        loss.backward()
    return loss.detach(), [p.grad for p in params], report.nbytes, flops.get_total_flops()


@pytest.mark.parametrize("fraction", (pytest.param(0.1, marks=pytest.mark.slow), 0.5,
                                      pytest.param(0.9, marks=pytest.mark.slow)))
def test_hf_llama_layers_keep_the_budget(fraction, monkeypatch):
    """Config ``budget = f`` on every Llama decoder layer (default config, ``use_cache=True``)."""
    model, batch = _llama()
    ref_loss, ref_grads, _, _ = _llama_step(model, batch)
    seen = []
    plan = memory_budget.plan
    monkeypatch.setattr(memory_budget, "plan", lambda self, view: seen.append((view, plan(self, view))) or seen[-1][1])
    wrapped = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the KV-cache-off warning for checkpointed layers
        report = xla_ckpt.apply(wrapped, {"checkpoint": [{"blocks": True, "budget": fraction}]})
    assert len(report.wrapped) == 2
    loss, grads, kept, _ = _llama_step(wrapped, batch)
    torch.testing.assert_close(loss, ref_loss)
    for g, r in zip(grads, ref_grads, strict=True):
        assert g is not None
        torch.testing.assert_close(g, r)
    assert len(seen) == 2  # one plan per layer
    for view, decisions in seen:
        assert view.cost(_chosen(view, decisions)).nbytes <= budget_bytes(fraction, view.baseline.nbytes)
    # The ledger agrees: against every op saved, the model keeps exactly what the plans dropped.
    everything = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xla_ckpt.apply(everything, {"checkpoint": [{"blocks": True, "policy": "everything_saveable"}]})
    *_, kept_all, _ = _llama_step(everything, batch)
    dropped = sum(v.baseline.nbytes - v.cost(_chosen(v, d)).nbytes for v, d in seen)
    assert kept == kept_all - dropped and dropped > 0


@pytest.mark.slow  # every preset and fraction on a Llama; the GPT block's front is in the fast tier
def test_hf_llama_budget_is_on_the_pareto_front(monkeypatch):
    model, batch = _llama()
    *_, plain = _llama_step(model, batch)

    def run(policy):
        wrapped = copy.deepcopy(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            xla_ckpt.apply(wrapped, {"checkpoint": [{"blocks": True, "policy": policy}]})
        _, _, kept, flops = _llama_step(wrapped, batch)
        return kept, flops - plain

    presets = {n: run(p if isinstance(p, str) else {"name": "save_only_these_names", "names": list(p.names)})
               for n, p in PRESET_POLICIES.items()}
    points = {f: run({"name": "memory_budget", "fraction": f}) for f in FRACTIONS}
    for f, (kept, recompute) in points.items():
        for name, (pk, pr) in presets.items():
            assert not (pk < kept and pr < recompute), f"{name} {pk, pr} dominates memory_budget({f}) {kept, recompute}"
    kept = [points[f][0] for f in FRACTIONS]
    assert kept == sorted(kept) and kept[0] < kept[-1]


def test_a_plan_is_made_once_per_region_structure(monkeypatch):
    from xla_ckpt._policy import budget as _budget

    calls = []
    search = _budget.search
    monkeypatch.setattr(_budget, "search", lambda view, f: calls.append(f) or search(view, f))
    blk, x = _block(torch.device("cpu"))
    policy = memory_budget(0.5)
    for _ in range(3):
        xla_ckpt.checkpoint(blk, x, policy=policy).sum().backward()
    assert calls == [0.5]
    xla_ckpt.checkpoint(blk, x[:1], policy=policy).sum().backward()  # other shapes: planned again
    assert calls == [0.5, 0.5]


def test_a_custom_planner_sees_the_whole_region():
    """Save only the single largest output: a planning policy written by a user."""

    class Largest:
        def __call__(self, call):
            raise AssertionError

        def plan(self, view):
            big = max(view.free, key=lambda p: view.calls[p].nbytes)
            return [Decision.SAVE if p == big else Decision.RECOMPUTE for p in view.free]

    blk, x = _block(torch.device("cpu"))
    params = list(blk.parameters())
    assert_same(grads_of(blk, [x], params), grads_of(lambda x: xla_ckpt.checkpoint(blk, x, policy=Largest()), [x], params))


def test_bad_plans_and_combinations_are_clear_errors():
    class Short:
        def __call__(self, call):
            raise AssertionError

        def plan(self, view):
            return [Decision.SAVE]

    blk, x = _block(torch.device("cpu"))
    with pytest.raises(TypeError, match=r"plan\(\) must return a list of \d+ Decisions"):
        xla_ckpt.checkpoint(blk, x, policy=Short())
    xla_ckpt.checkpoint(blk, x, policy="dots_saveable").sum().backward()  # nothing left behind
    with pytest.raises(TypeError, match="plans a whole region"):
        policies.any_of(memory_budget(0.3), "dots_saveable")
    for bad in (1.5, -0.1, 0, 0.0, 30, "0.3", True, float("nan")):
        with pytest.raises(ValueError, match=r"fraction must be a number in \(0, 1\] .*got " + re.escape(repr(bad))):
            memory_budget(bad)
    assert memory_budget(1).fraction == 1.0 and memory_budget(1e-9).fraction == 1e-9  # the edges of (0, 1]


def test_config_budget_key_and_policy_table_are_the_same():
    a = xla_ckpt.Config  # noqa: F841  (documented entry point)
    as_config = xla_ckpt.load_config

    short = as_config({"checkpoint": [{"blocks": True, "budget": 0.3}]})
    long = as_config({"checkpoint": [{"blocks": True, "policy": {"name": "memory_budget", "fraction": 0.3}}]})
    assert short.checkpoint[0].policy == long.checkpoint[0].policy
    assert short.checkpoint[0].policy.build() == memory_budget(0.3)
    for bad in (2, 0, -0.5, float("nan"), "0.3"):
        with pytest.raises(xla_ckpt.ConfigError,
                           match=r"checkpoint\[1\]\.budget: expected a fraction in \(0, 1\].*got " + re.escape(repr(bad))):
            as_config({"checkpoint": [{"blocks": True, "budget": 0.5}, {"match": "x", "budget": bad}]})
    with pytest.raises(xla_ckpt.ConfigError, match=r"checkpoint\[0\]\.policy: .*\(0, 1\].*got 0"):
        as_config({"checkpoint": [{"blocks": True, "policy": {"name": "memory_budget", "fraction": 0}}]})
    with pytest.raises(xla_ckpt.ConfigError, match=r"checkpoint\[0\]\.budget: give either 'budget'"):
        as_config({"checkpoint": [{"blocks": True, "budget": 0.3, "policy": "dots_saveable"}]})
    with pytest.raises(xla_ckpt.ConfigError, match=r"checkpoint\[0\]\.policy: .*fraction must be a number"):
        as_config({"checkpoint": [{"blocks": True, "policy": {"name": "memory_budget", "fraction": "x"}}]})


# Under torch.compile the region is planned on the joint graph: tests/integration/compile/test_compiled_budget.py.


def test_a_planner_that_raises_is_named_and_leaves_nothing_behind():
    class Broken:
        def __call__(self, call):
            raise AssertionError

        def plan(self, view):
            return 1 / 0

        def __repr__(self):
            return "Broken()"

    blk, x = _block(torch.device("cpu"))
    with pytest.raises(ZeroDivisionError) as err:
        xla_ckpt.checkpoint(blk, x, policy=Broken())
    assert any("planning policy Broken()" in n for n in getattr(err.value, "__notes__", []))
    params = list(blk.parameters())
    assert_same(grads_of(blk, [x], params), grads_of(lambda x: xla_ckpt.checkpoint(blk, x, policy="dots_saveable"),
                                                   [x], params))


def test_registry_errors_say_what_a_policy_takes():
    with pytest.raises(TypeError, match=r"policy 'memory_budget': bad parameters \{'frac': 0.3\}; it takes: fraction"):
        policies.get("memory_budget", frac=0.3)
    with pytest.raises(xla_ckpt.ConfigError, match=r"<dict>: checkpoint\[0\]\.policy: .*it takes: fraction"):
        xla_ckpt.load_config({"checkpoint": [{"blocks": True, "policy": {"name": "memory_budget"}}]})
