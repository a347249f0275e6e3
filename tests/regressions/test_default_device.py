"""The default device as the forward found it, for the recompute that runs ``fn`` again.

A factory op without a device (``torch.ones(4)``) goes to the default device: the one of an open
``with torch.device(d)`` (or ``torch.set_default_device``). Opened around the forward only, with
backward outside it, fn run again made the tensor on the CPU: a CheckpointError ("called with other
arguments than in forward") where plain autograd, which reads the forward's tensors, is fine.
``_engine/members.py`` keeps it for the recompute. (A context around
backward only does not reach the recompute: autograd runs backward without the caller's torch-function
modes.) Eager CUDA meets it the same way; no CUDA device here.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

import xla_ckpt
from helpers import replay_kind

POLICIES = ("nothing_saveable", "dots_saveable")


def _step(device: torch.device, policy, forward_ctx, backward_ctx) -> list[torch.Tensor]:
    """fn makes a tensor with a factory op (no device given) and adds it; outputs and every grad."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(4, 4, generator=gen).to(device).requires_grad_()
    x = torch.randn(3, 4, generator=gen).to(device).requires_grad_()

    def fn(t: torch.Tensor) -> torch.Tensor:
        return (F.gelu(t @ w) + torch.ones(4) * 0.5).sin() @ w

    with forward_ctx():
        y = fn(x) if policy is None else xla_ckpt.checkpoint(fn, x, policy=policy)
    with backward_ctx():
        y.sum().backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    assert x.grad is not None and w.grad is not None
    return [y.detach().cpu(), x.grad.cpu(), w.grad.cpu()]


@pytest.mark.xla
@pytest.mark.parametrize("direct", [True, False], ids=["program", "fn_again"])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_device_context_around_the_forward_only(xla_device, policy, direct):
    """``with torch.device(xla):`` around the forward, backward outside: the values and grads of plain."""
    here = lambda: torch.device(xla_device)  # noqa: E731
    ref = _step(xla_device, None, here, contextlib.nullcontext)
    with replay_kind(direct):
        got = _step(xla_device, policy, here, contextlib.nullcontext)
    for name, g, r in zip(("output", "x.grad", "w.grad"), got, ref, strict=True):
        torch.testing.assert_close(g, r, msg=lambda m, name=name: f"{name}: {m}")
