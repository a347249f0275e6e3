"""Where plain PyTorch works, the library works too or names the fix.

torch.func transforms and forward-mode AD run a region plainly; scan_layers with dropout on XLA is a named error before
anything runs; apply() again replaces the earlier apply; an HF layer in eval mode with grad and a KV
cache runs plainly, as Hugging Face's own checkpointing does.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt.models import GPT, GPTConfig


def _gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=64, seq_len=8, n_layer=3, n_head=2, d_model=16))


def _idx() -> torch.Tensor:
    return torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))


def _kept(model: nn.Module, idx: torch.Tensor) -> int:
    with xla_ckpt.saved_activations() as r:
        model(idx)
    return r.nbytes


# -- 1. torch.func -------------------------------------------------------------------------------
def test_torch_func_runs_a_region_plainly():
    """grad / jacrev / vmap / per-sample grads through checkpointed blocks equal the plain model's
    (not NotImplementedError "Cannot access storage of TensorWrapper"); warned once; a normal
    backward afterwards still checkpoints."""
    plain, model = _gpt(), _gpt()
    xla_ckpt.apply(model, "full")
    params = {k: v.detach() for k, v in plain.named_parameters()}
    idx = _idx()

    def loss(m, p, i):
        return torch.func.functional_call(m, p, (i, i))

    with pytest.warns(UserWarning, match=r"runs under torch.func \(grad\).*nothing is checkpointed"):
        got = torch.func.grad(lambda p: loss(model, p, idx))(params)
    ref = torch.func.grad(lambda p: loss(plain, p, idx))(params)
    assert got.keys() == ref.keys()
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], msg=lambda m, k=k: f"{k}: {m}")

    def per_sample(m):
        g = torch.func.grad(lambda p, i: loss(m, p, i[None]))
        return torch.func.vmap(g, in_dims=(None, 0))(params, idx)

    got, ref = per_sample(model), per_sample(plain)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], msg=lambda m, k=k: f"per-sample {k}: {m}")

    x = torch.randn(3, 2, 4, 16)
    block, plain_block = model.layers[0], plain.layers[0]
    torch.testing.assert_close(torch.func.vmap(block)(x), torch.func.vmap(plain_block)(x))
    torch.testing.assert_close(torch.func.jacrev(block)(x[0, :1]), torch.func.jacrev(plain_block)(x[0, :1]))

    # Nothing left behind: the same model still checkpoints in an ordinary backward, with equal grads.
    assert _kept(model, idx) < _kept(plain, idx) / 2
    ps, qs = list(plain.parameters()), list(model.parameters())
    assert_same(grads_of(lambda: plain(idx, idx), [], ps), grads_of(lambda: model(idx, idx), [], qs))


def test_torch_func_over_fsdp_xla_preset():
    """fsdp_xla adds the corrected linear (an autograd.Function without setup_context) and saved-tensor
    hooks at the root (weights by reference): under torch.func both step aside, the values are plain."""
    plain, model = _gpt(), _gpt()
    xla_ckpt.apply(model, "fsdp_xla")
    params = {k: v.detach() for k, v in plain.named_parameters()}
    idx = _idx()
    with pytest.warns(UserWarning, match="runs under torch.func"):
        got = torch.func.grad(lambda p: torch.func.functional_call(model, p, (idx, idx)))(params)
    ref = torch.func.grad(lambda p: torch.func.functional_call(plain, p, (idx, idx)))(params)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], msg=lambda m, k=k: f"{k}: {m}")
    w, x = torch.randn(3, 4), torch.randn(5, 2, 4)
    torch.testing.assert_close(torch.func.vmap(lambda r: xla_ckpt.linear(r, w))(x), x @ w.t())


# -- 1b. forward-mode AD --------------------------------------------------------------------------
# The fast tier: fsdp_xla (patched linear, weights by reference) on CPU and megatron_selective on XLA;
# `make test-all` every preset on both.
_FAST_AD = {("cpu", "fsdp_xla"), ("xla", "megatron_selective")}


@pytest.mark.parametrize("where,preset", [
    pytest.param(w, p, marks=[pytest.mark.xla] * (w == "xla") + [pytest.mark.slow] * ((w, p) not in _FAST_AD))
    for w in ("cpu", "xla") for p in ("full", "megatron_selective", "fsdp_xla")])
def test_forward_ad_runs_a_region_plainly(where, preset, request):
    """Forward-mode AD (``dual_level``) through checkpointed blocks: the tangent of the loss along every
    parameter, and the grads of a backward taken inside the level, equal the plain model's (not a
    bare RuntimeError from the engine, "invalid python storage"; on XLA the corrected linear has a
    ``jvp``); warned once; an ordinary step afterwards checkpoints again."""
    device = request.getfixturevalue("xla_device") if where == "xla" else torch.device("cpu")
    plain, model = _gpt().to(device), _gpt().to(device)
    xla_ckpt.apply(model, preset)
    idx = _idx().to(device)
    gen = torch.Generator().manual_seed(2)
    tangents = {k: torch.randn(p.shape, generator=gen).to(device) for k, p in plain.named_parameters()}

    def run(m: nn.Module) -> list[torch.Tensor]:
        with fwAD.dual_level():
            duals = {k: fwAD.make_dual(p, tangents[k]) for k, p in m.named_parameters()}
            loss, tangent = fwAD.unpack_dual(torch.func.functional_call(m, duals, (idx, idx)))
            loss.backward()
        if device.type == "xla":
            import torch_xla
            torch_xla.sync()
        grads = [p.grad for p in m.parameters()]
        assert None not in grads
        return [loss.detach(), tangent] + grads

    with pytest.warns(UserWarning, match=r"runs under forward-mode AD.*nothing is checkpointed"):
        got = run(model)
    ref = run(plain)
    names = ["loss", "tangent"] + [n for n, _ in plain.named_parameters()]
    for n, g, r in zip(names, got, ref, strict=True):
        torch.testing.assert_close(g.cpu(), r.cpu(), msg=lambda m, n=n: f"{n}: {m}")

    # Nothing left behind: outside the level the same model checkpoints again, with equal grads.
    assert _kept(model, idx) < _kept(plain, idx)
    ps, qs = list(plain.parameters()), list(model.parameters())
    assert_same(grads_of(lambda: plain(idx, idx), [], ps), grads_of(lambda: model(idx, idx), [], qs))


def test_forward_ad_through_the_corrected_linear():
    """``xla_ckpt.linear`` under a dual level: the tangent (input and weight dual) and the grads are
    ``F.linear``'s (its autograd.Function has no ``jvp``: the stock op runs there)."""
    gen = torch.Generator().manual_seed(3)
    x, w, b, tx, tw = (torch.randn(*s, generator=gen) for s in ((5, 4), (3, 4), (3,), (5, 4), (3, 4)))
    out = []
    for f in (xla_ckpt.linear, F.linear):
        leaves = [t.clone().requires_grad_() for t in (x, w, b)]
        with fwAD.dual_level():
            y, ty = fwAD.unpack_dual(f(fwAD.make_dual(leaves[0], tx), fwAD.make_dual(leaves[1], tw), leaves[2]))
            y.pow(2).sum().backward()
        out.append([y.detach(), ty] + [t.grad for t in leaves])
    for i, (g, r) in enumerate(zip(*out, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"value {i}: {m}")


# -- 2. scan_layers with dropout on XLA --------------------------------------------------------------
class _Layer(nn.Module):
    def __init__(self, p: float, functional: bool) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.0 if functional else p)
        self.p = p if functional else 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.drop(torch.tanh(self.lin(x))), self.p, self.training)


@pytest.mark.xla
@pytest.mark.parametrize("functional", [False, True], ids=["module", "functional"])
def test_scan_layers_with_dropout_names_the_fix(xla_device, functional):
    """Not torch_xla's "run_and_save_rng_state ... Functionalize": a CheckpointError naming
    dropout and the fix, raised before anything runs (XLA's RNG untouched); with p=0 it runs."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    torch.manual_seed(0)
    layers = nn.ModuleList(_Layer(0.1, functional) for _ in range(3)).to(xla_device)
    x = torch.randn(4, 8).to(xla_device).requires_grad_()
    torch_xla.sync()
    seed = xm.get_rng_state(xla_device)
    what = r"random op aten\.\w*(dropout|bernoulli)\w* \(dropout\)" if functional else r"layers\[0\]\.drop is Dropout"
    with pytest.raises(xla_ckpt.CheckpointError, match=rf"scan_layers: (dropout: )?{what}.*dropout p=0.*without scan"):
        xla_ckpt.scan_layers(layers, x, policy="nothing_saveable")
    assert xm.get_rng_state(xla_device) == seed
    for layer in layers:
        layer.p, layer.drop.p = 0.0, 0.0
    y = xla_ckpt.scan_layers(layers, x, policy="nothing_saveable")
    y.sum().backward()
    torch_xla.sync()
    assert x.grad is not None


# -- 3. apply again ------------------------------------------------------------------------------
@pytest.mark.parametrize("first,second", [("full", "none"), ("none", "full"), ("full", "dots"),
                                          ("fsdp_xla", "none"), ("full", "fsdp_xla"), ("dots", "dots")])
def test_apply_again_replaces_the_earlier_apply(first, second):
    """apply(model, second) after apply(model, first) gives what apply(fresh, second) gives (not
    "full" kept silently under "none", nor an error for "dots" after "full"): kept bytes, gradients,
    state_dict keys, forward signature and the modules' instance attributes."""
    idx = _idx()
    model, fresh = _gpt(), _gpt()
    keys, sig = list(model.state_dict()), inspect.signature(model.forward)
    xla_ckpt.apply(model, first)
    report = xla_ckpt.apply(model, second)
    xla_ckpt.apply(fresh, second)
    assert [w.name for w in report.wrapped] == ([] if second == "none" else ["layers.0", "layers.1", "layers.2"])
    assert _kept(model, idx) == _kept(fresh, idx)
    assert list(model.state_dict()) == keys and inspect.signature(model.forward) == sig
    attrs = lambda m: [(n, type(s.__dict__.get("forward")).__name__) for n, s in m.named_modules()]  # noqa: E731
    assert attrs(model) == attrs(fresh)
    ps, qs = list(fresh.parameters()), list(model.parameters())
    assert_same(grads_of(lambda: fresh(idx, idx), [], ps), grads_of(lambda: model(idx, idx), [], qs))


def test_apply_again_keeps_the_users_own_wrappers():
    """Only what apply did is replaced: a module wrapped by hand stays, a conflict with it is still an
    error (and raised before anything changes), a deep copy replaces its own apply only."""
    model = _gpt()
    xla_ckpt.checkpointed(model.lm_head, policy="dots_saveable")
    xla_ckpt.apply(model, "full")
    twin = copy.deepcopy(model)
    xla_ckpt.apply(model, "none")
    assert xla_ckpt._api.wrap.checkpoint_policy(model.lm_head) is not None
    assert xla_ckpt._api.wrap.checkpoint_policy(twin.layers[0]) is not None
    xla_ckpt.apply(model, "full")
    with pytest.raises(ValueError, match="'lm_head' is already checkpointed"):
        xla_ckpt.apply(model, {"checkpoint": [{"match": "lm_head", "policy": "nothing_saveable"}]})
    assert xla_ckpt._api.wrap.checkpoint_policy(model.layers[0]) is not None  # the earlier apply stands


# -- 4. Hugging Face, eval mode with grad and a KV cache -------------------------------------------
def _tiny_llama() -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    # Defaults apart from the sizes: use_cache=True, sdpa attention.
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2))


@pytest.mark.parametrize("preset", ["full", "megatron_selective"])
def test_hf_eval_with_grad_and_cache_runs_plainly(preset):
    """Not a CheckpointError about aten.cat (the cache written in forward and again in the recompute):
    the layers run plainly for such a call, as HF's own checkpointing does outside training:
    logits, the returned cache and every gradient equal the plain model's."""
    pytest.importorskip("transformers")
    plain, model = _tiny_llama(), _tiny_llama()
    xla_ckpt.apply(model, preset)
    plain.eval(), model.eval()
    idx = _idx()
    caches = {}

    def run(m):
        out = m(idx)
        caches[m] = out.past_key_values
        return out.logits

    ref = grads_of(lambda: run(plain), [], list(plain.parameters()))
    with pytest.warns(UserWarning, match="eval mode with grad enabled and a key/value cache.*use_cache=False"):
        got = grads_of(lambda: run(model), [], list(model.parameters()))
    assert_same(ref, got)
    for a, b in zip(caches[plain].layers, caches[model].layers, strict=True):
        torch.testing.assert_close(b.keys, a.keys)
        torch.testing.assert_close(b.values, a.values)
    # Eval without a cache still checkpoints.
    with xla_ckpt.saved_activations() as r:
        model(idx, use_cache=False)
    with xla_ckpt.saved_activations() as p:
        plain(idx, use_cache=False)
    assert r.nbytes < p.nbytes
