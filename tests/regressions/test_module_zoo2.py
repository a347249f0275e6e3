"""The module zoo, second round: more stock modules and training-step shapes users run, against the plain step.

``module_zoo`` (a support module) holds the helpers (``module_step`` builds the module afresh and compares outputs, every
grad, buffers, hook records and the RNG streams with the plain step). Here: torchvision's stochastic
depth and ResNet / ConvNeXt blocks, BatchNorm's running statistics, random activations and dropouts
that write their noise in place, weight-norm and orthogonal parametrizations, hooks that rewrite
arguments or outputs, and steps shaped unlike one forward and one backward (a layer called twice,
gradient accumulation, a retained graph, a gradient penalty, eval / no_grad / inference_mode calls).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import seed_all, sync
from module_zoo import POLICIES_XLA_ONCE, REPLAYED_XLA_ONCE, check_module, fixed_randn, module_step, rng_state

tv_ops = pytest.importorskip("torchvision.ops")

# Further variants whose XLA cases (a compile each) are slow tier.
_SLOW_ON_XLA = pytest.mark.slow_on_xla


# --------------------------------------------------------------------------- torchvision blocks


class _StochasticDepthBlock(nn.Module):
    """A residual branch dropped per sample (``bernoulli_`` on a fresh tensor inside the region)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.sd = tv_ops.StochasticDepth(0.5, mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.sd(self.b(F.gelu(self.a(x))))


@pytest.mark.parametrize("mode", ["row", "batch"])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_stochastic_depth(device, policy, mode):
    check_module(lambda: _StochasticDepthBlock(mode), [fixed_randn(6, 8)], device, policy)


def _cn_block() -> nn.Module:
    from torchvision.models.convnext import CNBlock

    return CNBlock(8, layer_scale=0.5, stochastic_depth_prob=0.5)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_convnext_block(device, policy):
    """Depthwise 7x7 conv, permutes, LayerNorm, layer scale and row stochastic depth."""
    check_module(_cn_block, [fixed_randn(4, 8, 7, 7)], device, policy)


def _basic_block(momentum: Any) -> nn.Module:
    from torchvision.models.resnet import BasicBlock

    down = nn.Sequential(nn.Conv2d(4, 8, 1, stride=2, bias=False), nn.BatchNorm2d(8, momentum=momentum))
    return BasicBlock(4, 8, stride=2, downsample=down)


@pytest.mark.parametrize("momentum", [pytest.param(0.1, marks=_SLOW_ON_XLA), None])
@pytest.mark.parametrize("policy", REPLAYED_XLA_ONCE)
def test_resnet_basic_block(device, policy, momentum):
    """Three BatchNorms in training: running mean / var and num_batches_tracked (momentum None: the
    cumulative average, whose factor is read from num_batches_tracked) end the step as plain."""
    check_module(lambda: _basic_block(momentum), [fixed_randn(2, 4, 6, 6)], device, policy)


# --------------------------------------------------------------------------- random activations and dropouts


class _Noisy(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.kind = kind
        self.act = {"rrelu": nn.RReLU(), "alpha": nn.AlphaDropout(0.3), "feature_alpha": nn.FeatureAlphaDropout(0.3),
                    "dropout2d": nn.Dropout2d(0.3), "inplace": nn.Dropout(0.3, inplace=True)}[kind]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        if self.kind == "rrelu":
            h = self.act(h - 0.2)
        elif self.kind in ("feature_alpha", "dropout2d"):
            h = self.act(h.view(2, 3, 2, 4)).view(6, 8)
        elif self.kind == "inplace":
            h = self.act(h * 2)
        else:
            h = self.act(h)
        return self.b(h).sin()


@pytest.mark.parametrize("kind", ["rrelu", "alpha", "feature_alpha", "dropout2d", "inplace"])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_random_activations(device, policy, kind):
    """RReLU draws its slopes into a noise tensor it writes in place; the alpha dropouts and Dropout2d
    draw a mask per element or per channel; ``Dropout(inplace=True)`` writes its input. RReLU on XLA:
    a named error (its noise is written under the node that saved it, which a recompute cannot give back)."""
    if kind == "rrelu" and device.type == "xla":
        with pytest.raises(xla_ckpt.CheckpointError, match="rrelu_with_noise.*in module 'act'"):
            module_step(lambda: _Noisy(kind), [fixed_randn(6, 8)], device, policy)
        return
    check_module(lambda: _Noisy(kind), [fixed_randn(6, 8)], device, policy)


# --------------------------------------------------------------------------- parametrizations


def _parametrized(kind: str) -> nn.Module:
    from torch.nn.utils import parametrizations

    mid = nn.Linear(8, 8)
    if kind == "weight_norm":
        parametrizations.weight_norm(mid)
    elif kind == "orthogonal":
        parametrizations.orthogonal(mid)
    return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), mid, nn.GELU(), nn.Linear(8, 4))


@pytest.mark.parametrize("kind", ["weight_norm", "orthogonal"])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_parametrizations(device, policy, kind):
    check_module(lambda: _parametrized(kind), [fixed_randn(3, 8)], device, policy)


class _Cached(nn.Module):
    """``parametrize.cached()`` entered inside the region: the weight computed once, read twice."""

    def __init__(self) -> None:
        super().__init__()
        self.mid = nn.utils.parametrizations.orthogonal(nn.Linear(8, 8))
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with nn.utils.parametrize.cached():
            h = self.mid(x).tanh()
            h = self.mid(h).sin()
        return self.out(h)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_parametrize_cached_inside(device, policy):
    check_module(_Cached, [fixed_randn(3, 8)], device, policy)


# --------------------------------------------------------------------------- hooks that rewrite


class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, scale: float = 1.0, shift: Any = None) -> torch.Tensor:
        h = self.lin(x) * scale
        return h if shift is None else h + shift


class _KwargsBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Scaled()
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.tanh(self.inner(x, scale=2.0))))


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_forward_pre_hook_rewrites_kwargs(device, policy):
    """A ``with_kwargs`` pre-hook that changes a keyword and adds a tensor one; a forward hook that
    returns a new output; both record what they saw."""

    def hooks(m: nn.Module, log: list) -> None:
        def pre(mod: nn.Module, args: tuple, kwargs: dict) -> tuple:
            log.extend(["pre", args[0].detach().clone()])
            return args, {**kwargs, "scale": kwargs["scale"] * 3, "shift": args[0].sin()}

        def post(mod: nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor:
            log.extend(["post", out.detach().clone()])
            return out.cos() * 2

        m.inner.register_forward_pre_hook(pre, with_kwargs=True)
        m.inner.register_forward_hook(post)

    check_module(_KwargsBlock, [fixed_randn(3, 8)], device, policy, hooks)


class _SelfRemoving(nn.Module):
    """A forward hook that removes itself at its first call (a one-shot hook, as a warm-up probe), and a
    recording hook that the step removes between forward and backward (as feature extractors do)."""

    def __init__(self, returns: bool) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)
        self.log: list = []

        def once(mod: nn.Module, args: tuple, out: torch.Tensor) -> Any:
            self.handle.remove()
            self.log.append(out.detach().clone())
            return out * 3 if returns else None

        self.handle = self.a.register_forward_hook(once)
        self.record = self.b.register_forward_hook(lambda mod, args, out: self.log.append(out.detach().clone()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.b(torch.tanh(self.a(x)))
        self.record.remove()  # the caller's removal after forward, before backward
        return out


@pytest.mark.parametrize("returns", [False, True])
@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_forward_hooks_removed_mid_step(device, policy, returns):
    """Removed before backward: a hook that returned None is exact. One that returned a new output is
    exact on XLA (the recorded program runs no hooks); the eager replay runs fn without it and cannot
    hand its output back: a CheckpointError naming the hook and the cause (before, one about an
    outside tensor whose values differ, naming neither)."""

    def hooks(m: nn.Module, log: list) -> None:
        m.log = log

    make = lambda: _SelfRemoving(returns)  # noqa: E731
    if returns and device.type == "cpu" and policy != "everything_saveable":
        cause = "values differ.*Likely cause: .*'once' of module Linear returned new.*removed before backward"
        with pytest.raises(xla_ckpt.CheckpointError, match=cause):
            module_step(make, [fixed_randn(3, 8)], device, policy, hooks)
        return
    check_module(make, [fixed_randn(3, 8)], device, policy, hooks)


# --------------------------------------------------------------------------- tensors swapped into the module


class _TiedLM(nn.Module):
    """An embedding tied to the output head, a dropout and a BatchNorm between them."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.mid = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Dropout(0.2), nn.LayerNorm(8))
        self.bn = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 16, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.mid(self.emb(ids))
        return self.head(self.bn(h.transpose(1, 2)).transpose(1, 2))


class _Functional(nn.Module):
    """``torch.func.functional_call`` on the checkpointed model with a tensor for its tied weight and one
    for a weight inside: they are in the model's slots for the call only, not when backward recomputes."""

    def __init__(self) -> None:
        super().__init__()
        self.model = _TiedLM()
        self.scale = nn.Parameter(torch.full((16, 1), 0.5))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        params = {"emb.weight": self.model.emb.weight * self.scale, "mid.0.weight": self.model.mid[0].weight.tanh()}
        return torch.func.functional_call(self.model, params, (ids,), tie_weights=True)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_functional_call_on_a_checkpointed_model(device, policy):
    """The recompute ran with the model's own weights (CheckpointError "values differ from the
    forward's" on CPU and XLA, everything_saveable aside); it runs with the tensors the forward ran with."""
    ids = torch.tensor([[1, 2, 4, 5, 7], [4, 3, 2, 9, 15]])
    check_module(_Functional, [ids], device, lambda m: xla_ckpt.checkpointed(m.model, policy=policy), fewer_bytes=False)


class _Counted(nn.Module):
    """A call counter kept as a buffer the forward assigns anew (not in place) and reads."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls = self.calls + 1
        return torch.tanh(self.lin(x)) * self.calls


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_buffer_assigned_anew_in_forward(device, policy):
    check_module(lambda: nn.Sequential(_Counted(), nn.Linear(8, 4)), [fixed_randn(3, 8)], device, policy)


# --------------------------------------------------------------------------- steps shaped otherwise


class _SharedLayer(nn.Module):
    """ALBERT's shape: one layer (with dropout) called twice in one forward."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Dropout(0.3), nn.Linear(8, 8))
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.layer(self.layer(x).tanh()))


def _accumulate(m: nn.Module, x: torch.Tensor, x2: torch.Tensor) -> list:
    """Two forwards (both graphs alive), then each loss's backward: gradient accumulation."""
    o1, o2 = m(x), m(x2)
    o2.pow(2).sum().backward()
    o1.sin().sum().backward()
    return [o1, o2]


def _retained(m: nn.Module, x: torch.Tensor, x2: torch.Tensor) -> list:
    """``backward(retain_graph=True)`` then a second loss through the same graph: two recomputes."""
    o = m(x)
    o.pow(2).sum().backward(retain_graph=True)
    o.sin().sum().backward()
    return [o]


def _penalty(m: nn.Module, x: torch.Tensor, x2: torch.Tensor) -> list:
    """A gradient penalty: ``autograd.grad(create_graph=True)`` through the region, then backward
    through that grad (double backward of the recomputed ops)."""
    o = m(x)
    (g,) = torch.autograd.grad(o.sum(), x, create_graph=True)
    (o.pow(2).sum() + g.pow(2).sum()).backward()
    return [o, g]


def _clipped(m: nn.Module, x: torch.Tensor, x2: torch.Tensor) -> list:
    o = m(x)
    o.pow(2).sum().backward()
    return [o, torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1)]


def _run_step(body: Any, device: torch.device, wrap: Any) -> list:
    torch.manual_seed(0)
    m = _SharedLayer().to(device).train()
    if wrap is not None:
        wrap(m)
    x = fixed_randn(3, 8).to(device).requires_grad_()
    x2 = (fixed_randn(3, 8) + 1).to(device).requires_grad_()
    seed_all(device, 7)
    outs = body(m, x, x2)
    rng = rng_state(device)
    sync(device)
    return ([o.detach().cpu() for o in outs] + [x.grad, x2.grad] + [p.grad for p in m.parameters()], rng)


@pytest.mark.parametrize("body", [_accumulate, _retained, _penalty, _clipped], ids=lambda b: b.__name__[1:])
@pytest.mark.parametrize("where", ["model", pytest.param("shared layer", marks=_SLOW_ON_XLA)])
@pytest.mark.parametrize("policy", REPLAYED_XLA_ONCE)
def test_step_shapes(device, policy, where, body):
    """The shared layer checkpointed (two regions over one module) or the whole model (one region
    calling it twice), under steps with two forwards, a retained graph, double backward, clipping."""
    wrap = (lambda m: xla_ckpt.checkpointed(m, policy=policy)) if where == "model" else (
        lambda m: xla_ckpt.checkpointed(m.layer, policy=policy))
    (ref, ref_rng), (got, got_rng) = _run_step(body, device, None), _run_step(body, device, wrap)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        if r is None:
            assert g is None, f"value {i}: a grad where the plain step has none"
            continue
        assert g is not None, f"value {i} is None"
        torch.testing.assert_close(g.cpu(), r.cpu(), msg=lambda m, i=i: f"value {i}: {m}")
    torch.testing.assert_close(got_rng[0], ref_rng[0])
    assert got_rng[1:] == ref_rng[1:]


# --------------------------------------------------------------------------- calls that should be plain


class _Plainly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.3)
        self.b = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.drop(F.gelu(self.a(x))))


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "eval"])
def test_calls_without_training(device, mode):
    """A checkpointed model evaluated (no_grad, inference_mode, eval with grad) between training steps:
    the same outputs as plain, nothing kept under no_grad / inference_mode, then the training step as plain."""

    if device.type == "xla" and mode == "inference_mode":
        pytest.skip("torch_xla raises without the library: Cannot set version_counter for inference tensor")

    def run(wrap: bool) -> list:
        torch.manual_seed(0)
        m = _Plainly().to(device).train()
        if wrap:
            xla_ckpt.checkpointed(m, policy="nothing_saveable")
        x = fixed_randn(3, 8).to(device)
        seed_all(device, 7)
        with xla_ckpt.saved_activations() as kept:
            if mode == "eval":
                m.eval()
                first = m(x.requires_grad_())
            else:
                with getattr(torch, mode)():
                    first = m(x)
        assert mode == "eval" or kept.nbytes == 0
        first = first.detach().clone()
        m.train()
        out = m(x)
        out.pow(2).sum().backward()
        rng = rng_state(device)
        sync(device)
        return [first.cpu(), out.detach().cpu()] + [p.grad.cpu() for p in m.parameters()] + [rng[0]]

    for g, r in zip(run(True), run(False), strict=True):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_under_caller_autocast_bf16(policy):
    """The whole step under the caller's ``torch.autocast("cpu", bfloat16)``, a tied weight cast once."""

    def wrap(m: nn.Module) -> None:
        xla_ckpt.checkpointed(m.mid, policy=policy)
        xla_ckpt.checkpointed(m, policy=policy)

    class Cast(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = _TiedLM()

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self.inner(ids).float()

    ids = torch.tensor([[1, 2, 4, 5, 7], [4, 3, 2, 9, 15]])
    check_module(Cast, [ids], torch.device("cpu"), lambda m: wrap(m.inner), fewer_bytes=False)


# --------------------------------------------------------------------------- Hugging Face


def _dynamic_llama() -> nn.Module:
    """Llama with dynamic NTK rope scaling: its rotary embedding (the model's, outside the decoder layers)
    recomputes ``inv_freq`` and reassigns the buffer when a sequence outgrows max_position_embeddings."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=64, max_position_embeddings=8,
                                   rope_scaling={"rope_type": "dynamic", "factor": 2.0}, attention_dropout=0.1)
    return transformers.LlamaForCausalLM(cfg)


def _llama_steps(device: torch.device, wrap: Any) -> list:
    """Three steps of growing, shrinking and growing sequences: the rotary buffers change between them."""
    torch.manual_seed(0)
    m = _dynamic_llama().to(device).train()
    if wrap is not None:
        wrap(m)
    seen: list = []
    for seq in (12, 6, 16):
        ids = torch.randint(0, 64, (2, seq), generator=torch.Generator().manual_seed(seq)).to(device)
        seed_all(device, 7)
        m(input_ids=ids, labels=ids).loss.backward()
        rng = rng_state(device)
        sync(device)
        seen += [rng[0], *rng[1:]] + [p.grad.cpu() for p in m.parameters()] + [b.cpu().clone() for b in m.buffers()]
        m.zero_grad()
    return seen


def _same_steps(got: list, ref: list) -> None:
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        if isinstance(r, int):
            assert g == r, f"torch_xla running seed {i}"
        else:
            torch.testing.assert_close(g, r, msg=lambda m, i=i: f"value {i}: {m}")


@pytest.mark.slow_on_xla  # XLA compiles each of the three lengths, twice: about 20 s
@pytest.mark.parametrize("how", ["apply", "whole model"])
def test_llama_dynamic_rope(device, how):
    """``apply`` (the decoder layers, as users run it): exact. The whole model in one region: XLA's program
    is exact; the eager replay reaches the rotary's Python branch on its own updated cache length and
    diverges: a CheckpointError naming the rotary embedding and the cause."""
    wrap = (lambda m: xla_ckpt.apply(m, "full")) if how == "apply" else (
        lambda m: xla_ckpt.checkpointed(m, policy="nothing_saveable"))
    if how == "whole model" and device.type == "cpu":
        with pytest.raises(xla_ckpt.CheckpointError, match="diverged.*'model.rotary_emb'.*state that the forward changed"):
            _llama_steps(device, wrap)
        return
    _same_steps(_llama_steps(device, wrap), _llama_steps(device, None))


class _CachedAround(nn.Module):
    """An orthogonal weight used twice; the caller opens ``parametrize.cached()`` around the whole step."""

    def __init__(self) -> None:
        super().__init__()
        self.mid = nn.utils.parametrizations.orthogonal(nn.Linear(8, 8))
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.mid(self.mid(x).tanh()).sin())


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_parametrize_cached_around_the_forward(device, policy):
    """``parametrize.cached()`` open around the model call, closed before backward: the forward computed
    the weight once and read the cache after, the replay (cache closed) computed it at each read: a
    CheckpointError ("diverged ... aten.tril") on CPU, every policy. The replay caches as the forward did."""

    def wrap(m: nn.Module) -> None:
        xla_ckpt.checkpointed(m, policy=policy)
        inner = m.forward

        def cached(*args: Any) -> Any:
            with nn.utils.parametrize.cached():
                return inner(*args)

        m.forward = cached

    check_module(_CachedAround, [fixed_randn(3, 8)], device, wrap)


@pytest.mark.parametrize("policy", REPLAYED_XLA_ONCE)
def test_parametrize_cached_around_forward_and_backward(device, policy):
    """Open around backward too: the replay found the forward's weight in the cache at its first read."""

    def run(wrap: bool) -> list:
        torch.manual_seed(0)
        m = _CachedAround().to(device)
        if wrap:
            xla_ckpt.checkpointed(m, policy=policy)
        x = fixed_randn(3, 8).to(device).requires_grad_()
        with nn.utils.parametrize.cached():
            out = m(x)
            out.pow(2).sum().backward()
        sync(device)
        return [out.detach().cpu(), x.grad.cpu()] + [p.grad.cpu() for p in m.parameters()]

    for g, r in zip(run(True), run(False), strict=True):
        torch.testing.assert_close(g, r)


def _old_weight_norm() -> nn.Module:
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")  # deprecated in favour of parametrizations.weight_norm
        mid = nn.utils.weight_norm(nn.Linear(8, 8))
    return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), mid, nn.GELU(), mid, nn.Linear(8, 4))


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_old_weight_norm_called_twice(device, policy):
    """The old ``nn.utils.weight_norm``: a forward pre-hook assigns ``weight`` anew (a plain attribute) at
    each call, here twice in one forward."""
    check_module(_old_weight_norm, [fixed_randn(3, 8)], device, policy)


def _mbconv() -> nn.Module:
    from functools import partial

    from torchvision.models.efficientnet import MBConv, MBConvConfig

    cfg = MBConvConfig(4, 3, 1, 8, 8, 1, width_mult=1.0, depth_mult=1.0)
    return MBConv(cfg, 0.5, partial(nn.BatchNorm2d, eps=1e-3))


@pytest.mark.parametrize("policy", REPLAYED_XLA_ONCE)
def test_efficientnet_mbconv(device, policy):
    """Expand, depthwise conv, squeeze-excitation (pool, SiLU, sigmoid gate), BatchNorm, stochastic depth."""
    check_module(_mbconv, [fixed_randn(4, 8, 5, 5)], device, policy)


class _FrozenAfter(nn.Module):
    """A GAN's generator step: the discriminator's parameters stop requiring grad after the forward through
    it and before backward (plain autograd differentiates the graph the forward recorded)."""

    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Linear(8, 8)
        self.d = nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.2), nn.Dropout(0.2), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.d(torch.tanh(self.g(x)))
        self.d.requires_grad_(False)
        return out


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_requires_grad_switched_off_before_backward(device, policy):
    """The replay ran with the frozen flags and saved fewer tensors than the forward: a CheckpointError
    ("saved 4 tensors; the forward ... saved 6") on CPU; it runs with the flags the forward found."""
    check_module(_FrozenAfter, [fixed_randn(3, 8)], device, lambda m: xla_ckpt.checkpointed(m.d, policy=policy), fewer_bytes=False)


class _HooksDisabled(nn.Module):
    """A checkpointed block called where ``disable_saved_tensors_hooks`` is in force."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Dropout(0.2), nn.Linear(8, 8))
        self.out = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autograd.graph.disable_saved_tensors_hooks("this library owns what autograd saves here"):
            return self.out(self.inner(x).tanh())


def test_saved_tensor_hooks_disabled(device):
    """Pushing the region's hooks would raise a bare RuntimeError with the disabler's message (torch's
    checkpoint raises the same). The block runs plainly, as under torch.func, with a notice. (No
    ``saved_activations`` around it: torch refuses to disable hooks while some are active.)"""

    def run(wrap: bool) -> list:
        torch.manual_seed(0)
        m = _HooksDisabled().to(device)
        if wrap:
            xla_ckpt.checkpointed(m.inner, policy="nothing_saveable")
        x = fixed_randn(3, 8).to(device).requires_grad_()
        seed_all(device, 7)
        out = m(x)
        out.pow(2).sum().backward()
        rng = rng_state(device)
        sync(device)
        return [out.detach().cpu(), x.grad.cpu(), *rng] + [p.grad.cpu() for p in m.parameters()]

    with pytest.warns(UserWarning, match="saved-tensor hooks are disabled.*this library owns"):
        got = run(True)
    for g, r in zip(got, run(False), strict=True):
        torch.testing.assert_close(g, r)


def _instance_norm() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True, track_running_stats=True), nn.ReLU(),
                         nn.Conv2d(4, 2, 1))


@pytest.mark.parametrize("policy", POLICIES_XLA_ONCE)
def test_instance_norm_running_stats(device, policy):
    """``InstanceNorm2d(track_running_stats=True)``: ATen's instance_norm repeats the running statistics per
    sample, batch-norms with the copies and writes the buffers back through ``alias(running_mean).copy_``.
    Exact on CPU and XLA, buffers included. On XLA under the replaying policies it was a CheckpointError at
    the replay's ``repeat`` of the already updated buffer: torch_xla's functional ``copy`` returns its first
    argument's tensor id, so the write through the alias looked like one to a region value and was not
    restored for the replay (reported with the second zoo round)."""
    check_module(_instance_norm, [fixed_randn(2, 3, 6, 6)], device, policy, fewer_bytes=False)


def test_parametrize_cache_count_moved_by_another_thread_during_a_recompute():
    """parametrize's cache is process-wide: another thread's ``cached()`` block that closes while a recompute
    runs here (the fuzz's replaying thread met one) must leave caching off and the cache empty, as without the
    library. A recompute that wrote back the count it found (1) would leave caching on for good, and the next
    module with a reused id would read a stale weight (an XLA tensor in a CPU test)."""
    P = nn.utils.parametrize
    opened, replaying, closed = threading.Event(), threading.Event(), threading.Event()

    def other() -> None:
        with P.cached():
            opened.set()
            replaying.wait(30)
        closed.set()

    calls = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        if len(calls) == 2:  # the replay: the other thread closes its block now
            replaying.set()
            closed.wait(30)
        return x.sin().cos()

    x = torch.randn(4, requires_grad=True)
    t = threading.Thread(target=other)
    t.start()
    assert opened.wait(30)
    y = xla_ckpt.checkpoint(fn, x, policy="nothing_saveable")  # the forward found caching on
    y.sum().backward()
    t.join(30)
    assert len(calls) == 2 and closed.is_set()
    torch.testing.assert_close(x.grad, -torch.sin(x.sin()) * torch.cos(x))
    assert P._cache_enabled == 0 and not P._cache, (P._cache_enabled, dict(P._cache))
