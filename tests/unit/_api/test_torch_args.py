"""``checkpoint`` with torch.utils.checkpoint's keywords: torch's meaning or an error naming each, never
passed to ``fn``; ``fn_kwargs=`` gives ``fn`` a keyword of any name (``policy`` too)."""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

import xla_ckpt
from helpers import assert_same, grads_of

aten = torch.ops.aten


def _fn(x, w, policy="unset", debug="unset"):
    # A user function with keywords named like checkpoint's own: they must reach it only through fn_kwargs.
    assert policy == "causal" and debug == "mine", (policy, debug)
    return (x @ w).sin() @ w.t()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 6, generator=g, requires_grad=True), torch.randn(6, 6, generator=g, requires_grad=True)


def test_torch_keywords_keep_their_meaning_and_never_reach_fn():
    x, w = _inputs()
    ref = grads_of(lambda: _fn(x, w, policy="causal", debug="mine"), [], [x, w])
    got = grads_of(lambda: xla_ckpt.checkpoint(
        _fn, x, w, use_reentrant=False, preserve_rng_state=True, determinism_check="default", debug=True,
        context_fn=torch.utils.checkpoint.noop_context_fn, fn_kwargs={"policy": "causal", "debug": "mine"}), [], [x, w])
    assert_same(ref, got)
    with xla_ckpt.saved_activations() as kept:
        xla_ckpt.checkpoint(_fn, x, w, use_reentrant=False, fn_kwargs={"policy": "causal", "debug": "mine"})
    assert kept.nbytes == (4 * 6 + 6 * 6) * 4  # the default policy (nothing_saveable): only its inputs x, w


@pytest.mark.parametrize("kw, error, words", [
    ({"use_reentrant": True}, ValueError, ["use_reentrant=True", "use_reentrant=False"]),
    ({"use_reentrant": "no"}, TypeError, ["use_reentrant must be"]),
    ({"preserve_rng_state": False}, ValueError, ["preserve_rng_state=False", "drop preserve_rng_state"]),
    ({"determinism_check": "none"}, ValueError, ["determinism_check='none'", "drop determinism_check"]),
    ({"context_fn": lambda: None}, ValueError, ["context_fn=", "policy="]),
    ({"debug": 1}, TypeError, ["debug must be True or False"]),
    ({"fn_kwargs": {"policy": "a"}, "policy_": None}, TypeError, ["'policy_'", "pass it once"]),
])
def test_unsupported_torch_keywords_are_named(kw, error, words):
    x, w = _inputs()
    kw = dict(kw)
    if "policy_" in kw:  # the same keyword both loose and in fn_kwargs
        kw["fn_kwargs"] = {"policy_": 1}
    calls = []
    with pytest.raises(error) as e:
        xla_ckpt.checkpoint(lambda *a, **k: calls.append(1), x, w, **kw)
    for word in words:
        assert word in str(e.value), str(e.value)
    assert "xla_ckpt.checkpoint" in str(e.value) and calls == []  # raised before fn ran


def _mm_only(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op == aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE


@pytest.mark.parametrize("what", [[aten.mm.default], _mm_only], ids=["ops", "policy_fn"])
def test_selective_context_fn_becomes_the_policy(what):
    """torch's SAC ``context_fn`` keeps its meaning: the same bytes as the equivalent xla_ckpt policy."""
    x, w = _inputs()
    ctx = functools.partial(create_selective_checkpoint_contexts, what)
    fk = {"policy": "causal", "debug": "mine"}

    def kept(**kw):
        with xla_ckpt.saved_activations() as report:
            out = xla_ckpt.checkpoint(_fn, x, w, use_reentrant=False, fn_kwargs=fk, **kw)
        return report.nbytes, out

    via_torch, out = kept(context_fn=ctx)
    ours, _ = kept(policy=xla_ckpt.policies.save_ops(aten.mm))
    none, _ = kept()
    # The inputs x, w, plus the first mm's output (4x6 fp32); the second mm's is the region's output.
    assert none == (4 * 6 + 6 * 6) * 4 and via_torch == ours == none + 4 * 6 * 4
    ref = grads_of(lambda: _fn(x, w, **fk), [], [x, w])
    assert_same(ref, grads_of(lambda: xla_ckpt.checkpoint(_fn, x, w, context_fn=ctx, fn_kwargs=fk), [], [x, w]))
    with pytest.raises(ValueError, match="pass one of them"):
        xla_ckpt.checkpoint(_fn, x, w, context_fn=ctx, policy="dots_saveable", fn_kwargs=fk)


def test_partial_is_the_other_route_and_wrappers_pass_any_keyword():
    x, w = _inputs()
    ref = grads_of(lambda: _fn(x, w, policy="causal", debug="mine"), [], [x, w])
    got = grads_of(lambda: xla_ckpt.checkpoint(functools.partial(_fn, policy="causal", debug="mine"), x, w), [], [x, w])
    assert_same(ref, got)
    wrapped = xla_ckpt.checkpointed(_fn, policy="dots_saveable")
    assert_same(ref, grads_of(lambda: wrapped(x, w, policy="causal", debug="mine"), [], [x, w]))


def test_under_compile_fn_keywords_named_like_torchs_reach_fn():
    """Under ``torch.compile`` the region is torch's own checkpoint, which takes ``debug`` and its other keywords
    itself: ``fn``'s keyword of such a name (through ``fn_kwargs`` or a checkpointed function) still reaches ``fn``."""
    x, w = _inputs()
    ref = grads_of(lambda: _fn(x, w, policy="causal", debug="mine"), [], [x, w])
    torch._dynamo.reset()
    step = torch.compile(lambda x, w: xla_ckpt.checkpoint(_fn, x, w, policy="dots_saveable",
                                                          fn_kwargs={"policy": "causal", "debug": "mine"}),
                         backend="aot_eager", fullgraph=True)
    assert_same(ref, grads_of(lambda: step(x, w), [], [x, w]))
    wrapped = xla_ckpt.checkpointed(_fn, policy="dots_saveable")
    torch._dynamo.reset()
    step = torch.compile(lambda x, w: wrapped(x, w, policy="causal", debug="mine"), backend="aot_eager",
                         fullgraph=True)
    assert_same(ref, grads_of(lambda: step(x, w), [], [x, w]))
