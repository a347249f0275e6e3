"""Attributes a checkpointed module's forward assigns are the forward's after backward, not the replay's.

Where the recompute runs fn again (eager devices), fn assigns its module attributes a second time, in
backward; plain autograd never runs the forward again. Found by hand (hunt-a): a module storing an
intermediate for later (``self.attn = probs``, with ``retain_grad()`` for a saliency map) ended the step
holding the replay's tensor, whose ``.grad`` is None (plain: the gradient); and a Python call counter
(``self.calls += 1``) advanced twice per step, so a warm-up branch on it switched a step early: silently
other losses and grads from the third step on, every policy that replays. The recompute now puts each
module's ``__dict__`` back as it found it (``_engine/members.py``): the stored tensor is the forward's, and
a counter the forward reads after the replay moved it is the documented ``CheckpointError``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import xla_ckpt

REPLAYED = ("nothing_saveable", "dots_saveable")


class _Stores(nn.Module):
    """Keeps its attention-like probabilities for a saliency map, gradient retained."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = self.a(x).softmax(-1)
        probs.retain_grad()
        self.probs = probs
        return self.b(probs * x).tanh()


def _stored_step(policy):
    torch.manual_seed(0)
    m = _Stores()
    if policy is not None:
        xla_ckpt.checkpointed(m, policy=policy)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)
    out = m(x)
    stored = m.probs
    out.pow(2).sum().backward()
    assert m.probs is stored, "the module holds another tensor after backward than its forward stored"
    return out.detach(), m.probs.detach(), m.probs.grad, x.grad, {n: p.grad for n, p in m.named_parameters()}


@pytest.mark.parametrize("policy", REPLAYED)
def test_stored_intermediate_keeps_its_retained_grad(policy):
    ref = _stored_step(None)
    got = _stored_step(policy)
    assert ref[2] is not None
    assert got[2] is not None, "the stored intermediate's retained grad is None"
    torch.testing.assert_close(got, ref)


class _WarmUp(nn.Module):
    """A Python call counter picks a warm-up branch for the first two calls."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        h = self.a(x)
        return (h.relu() if self.calls <= 2 else h.tanh()).sum()


def _train(policy, steps=3):
    torch.manual_seed(0)
    m = _WarmUp()
    if policy is not None:
        xla_ckpt.checkpointed(m, policy=policy)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    seen = []
    for _ in range(steps):
        loss = m(x)
        loss.backward()
        seen.append((loss.detach(), m.a.weight.grad.clone(), m.calls))
    return seen


@pytest.mark.parametrize("policy", REPLAYED)
def test_python_counter_advances_once_per_step(policy):
    assert [c for *_, c in _train(policy, steps=1)] == [1]
    ref = _train(None)
    try:
        got = _train(policy)
    except xla_ckpt.CheckpointError as e:  # the replay of a step after the switch reads the advanced counter
        assert "recomputation diverged" in str(e), e
        return
    torch.testing.assert_close(got, ref)


def test_function_region_modules_too():
    """A function region's modules (noted at their first call in the forward) are put back too."""
    def run(wrapped):
        torch.manual_seed(0)
        m = _Stores()
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)
        out = xla_ckpt.checkpoint(m, x, policy="nothing_saveable") if wrapped else m(x)
        stored = m.probs
        out.sum().backward()
        assert m.probs is stored
        return m.probs.grad, x.grad

    torch.testing.assert_close(run(True), run(False))
