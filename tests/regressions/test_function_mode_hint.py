"""A user's TorchFunctionMode open around a checkpointed forward.

``Tensor.backward()`` runs backward without the caller's torch-function modes, so where the recompute runs fn again a
mode that changes or adds ops (here: doubles every tanh) makes it diverge. That is a CheckpointError (never
a silent difference), but its likely cause named a call counter or a running statistic; it names the
mode and the fix. A mode entered inside fn runs in the recompute too (exact), and a mode that only watches
(records the calls) around the forward sees fn's calls once each, as without the library. (One open around
``torch.autograd.backward`` too sees the recompute's calls, as a dispatch mode does.)
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import xla_ckpt
from helpers import assert_same, grads_of

POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")


class DoubledTanh(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if func is torch.tanh or func is torch.Tensor.tanh or getattr(func, "__name__", "") == "tanh" else out


class Watching(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _block() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Sigmoid())


@pytest.mark.parametrize("policy", POLICIES)
def test_a_function_mode_around_the_forward_is_named_when_the_recompute_diverges(policy):
    model = xla_ckpt.checkpointed(_block(), policy=policy)
    x = torch.randn(4, 8, requires_grad=True)
    with DoubledTanh():
        y = model(x)
    with pytest.raises(xla_ckpt.CheckpointError, match="torch function mode DoubledTanh was active"):
        y.sum().backward()


@pytest.mark.parametrize("policy", POLICIES)
def test_a_function_mode_entered_inside_fn_is_exact(policy):
    base = _block()
    x = torch.randn(4, 8)
    runs = {}
    for name in (None, policy):
        model = copy.deepcopy(base)

        def fn(inp, model=model):
            with DoubledTanh():
                return model(inp)

        run = fn if name is None else (lambda inp, fn=fn, name=name: xla_ckpt.checkpoint(fn, inp, policy=name))
        runs[name] = grads_of(run, [x.clone().requires_grad_()], list(model.parameters()))
    assert_same(runs[None], runs[policy])


@pytest.mark.parametrize("policy", POLICIES)
def test_a_watching_function_mode_around_the_forward_sees_what_it_sees_without_the_library(policy):
    base = _block()
    x = torch.randn(4, 8)
    runs, seen = {}, {}
    for name in (None, policy):
        model = copy.deepcopy(base)
        if name is not None:
            xla_ckpt.checkpointed(model, policy=name)
        xi = x.clone().requires_grad_()
        with Watching() as mode:
            y = model(xi)
        y.backward(torch.ones_like(y))
        runs[name] = ([y.detach()], [xi.grad] + [p.grad for p in model.parameters()])
        seen[name] = mode.calls
    assert_same(runs[None], runs[policy])
    # fn's own calls, once each (the library's bookkeeping calls, detach and attribute reads, pass the mode too)
    fns = {"linear", "tanh", "sigmoid"}
    assert [c for c in seen[policy] if c in fns] == [c for c in seen[None] if c in fns]
