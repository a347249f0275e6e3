"""Inputs that share memory, one of them written in place by fn.

On XLA every view is a buffer of its own, so two inputs where one is a view of the other looked
unrelated: a write to one kept a starting copy of that one only, and the replay read the other as the
forward left it (``x.grad`` 203 off) or wrote one without the other. Eager raised autograd's raw
"leaf Variable ... in-place" error in the replay. A replay from copies cannot repeat such a write on
both: a ``CheckpointError`` that says so and how to fix it, before any gradient is computed.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import xla_ckpt

POLICIES = ["nothing_saveable", "everything_saveable", "dots_saveable"]


def _view_then_base(a, b, w):  # b is a view of a
    a[1].mul_(2.0)
    return F.linear(a, w) + (b * b).sum()


def _qkv_in_place(q, k, v, w):  # q, k, v: slices of one projection; an in-place rotary on q
    q.mul_(2.0)
    return ((q @ k.t()).softmax(-1) @ v) @ w


def _args(name, x, w):
    if name == "view":
        a = x * 1
        return _view_then_base, (a, a.t(), w)
    if name == "twice":
        a = x * 1
        return _view_then_base, (a, a, w)
    qkv = torch.cat([x, x.flip(0), x * 0.5], dim=1)
    return _qkv_in_place, (qkv[:, :4], qkv[:, 4:8], qkv[:, 8:], w[:, :4].t())


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", ["view", "twice", "qkv"])
def test_fn_writing_an_input_that_shares_memory_with_another(name, policy, device):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 4, generator=gen).to(device).requires_grad_()
    w = torch.randn(3, 4, generator=gen).to(device).requires_grad_()
    fn, args = _args(name, x, w)
    fn(*args).sum().backward()  # the plain run works
    fn, args = _args(name, x, w)
    out = xla_ckpt.checkpoint(fn, *args, policy=policy)
    with pytest.raises(xla_ckpt.CheckpointError, match="share memory"):
        out.sum().backward()


@pytest.mark.parametrize("policy", POLICIES)
def test_inputs_that_share_memory_and_are_only_read_stay_exact(policy, device):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 4, generator=gen).to(device).requires_grad_()
    w = torch.randn(3, 4, generator=gen).to(device).requires_grad_()

    def fn(a, b, w):
        return F.linear(a.sin(), w) + (b * b).sum()

    def step(checkpointed):
        x.grad = w.grad = None
        a = x * 1
        out = xla_ckpt.checkpoint(fn, a, a.t(), w, policy=policy) if checkpointed else fn(a, a.t(), w)
        out.sum().backward()
        return [out.detach().cpu(), x.grad.cpu(), w.grad.cpu()]

    tol = {"rtol": 1e-5, "atol": 1e-5} if device.type == "xla" else {"rtol": 0.0, "atol": 0.0}
    torch.testing.assert_close(step(True), step(False), **tol)
