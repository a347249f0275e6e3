"""Attributes a checkpointed module's forward assigns are the forward's after backward, not the replay's.

Where the recompute runs fn again (eager devices), fn assigns its module attributes a second time, in
backward; plain autograd never runs the forward again. A module storing an
intermediate for later (``self.attn = probs``, with ``retain_grad()`` for a saliency map) ended the step
holding the replay's tensor, whose ``.grad`` is None (plain: the gradient); and a Python call counter
(``self.calls += 1``) advanced twice per step, so a warm-up branch on it switched a step early: silently
other losses and grads from the third step on, every policy that replays. The recompute puts each
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


class _Collects(nn.Module):
    """Appends an auxiliary loss to a list the training loop sums into the loss and clears before backward."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.aux: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        self.aux.append(h.pow(2).mean())
        return self.b(h.relu()).tanh()


@pytest.mark.parametrize("policy", REPLAYED)
def test_list_attribute_appended_once_per_step(policy):
    """The replay appended a second aux loss after the loop had cleared the list: the next step's loss
    summed a stale term (silently other losses and grads from step 2)."""
    def train(policy):
        torch.manual_seed(0)
        m = _Collects()
        if policy is not None:
            xla_ckpt.checkpointed(m, policy=policy)
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
        seen = []
        for _ in range(2):
            loss = m(x).sum() + sum(m.aux)
            m.aux.clear()
            loss.backward()
            seen.append((loss.detach(), m.a.weight.grad.clone(), len(m.aux)))
        return seen

    torch.testing.assert_close(train(policy), train(None))


def _halve_grad(p: torch.Tensor) -> None:
    p.grad.mul_(0.5)


class _ScalesItsGrad(nn.Module):
    """Registers gradient hooks on its own parameters in forward (a per-step gradient scale)."""

    def __init__(self, post: bool) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.post = post

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.post:
            self.b.weight.register_post_accumulate_grad_hook(_halve_grad)
        else:
            self.a.weight.register_hook(lambda g: g * 0.5)
        return self.b(torch.nn.functional.gelu(self.a(x))).tanh()


@pytest.mark.parametrize("post", [False, True], ids=["register_hook", "post_accumulate"])
@pytest.mark.parametrize("policy", [*REPLAYED, "everything_saveable"])
def test_parameter_grad_hook_registered_in_forward_fires_once(policy, post):
    """fn run again registered the hook on the parameter a second time: the grad scaled twice (0.25, not 0.5)."""
    def step(policy):
        torch.manual_seed(0)
        m = _ScalesItsGrad(post)
        if policy is not None:
            xla_ckpt.checkpointed(m, policy=policy)
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3), requires_grad=True)
        m(x).pow(2).sum().backward()
        return x.grad, [p.grad for p in m.parameters()]

    torch.testing.assert_close(step(policy), step(None))
