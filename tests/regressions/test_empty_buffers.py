"""Empty tensors are buffers of their own (the fuzz's ``moe`` kind on CPU).

Mixtral-style routing gives an expert no token now and then: ``x[mask.nonzero()[:, 0]]`` is empty, and
so is the expert linear's saved input. Eager buffers were keyed by address, and every empty storage has
address 0: the saved empty input shared its key with a dead op's empty output, and backward raised the
internal liveness ``CheckpointError`` where plain autograd works.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from xla_ckpt import policies
from xla_ckpt._base.xla import buffer_key

aten = torch.ops.aten
POLICIES = ["nothing_saveable", "everything_saveable", "dots_saveable", policies.save_ops(aten.nonzero)]


def _route(x: torch.Tensor, router: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """Top-1 routing over 3 experts; expert 2 gets no token (its logit is pushed down)."""
    logits = x @ router - torch.tensor([0.0, 0.0, 1e4], device=x.device)
    probs = logits.softmax(-1)
    choice = logits.argmax(-1)
    out = torch.zeros_like(x)
    for e in range(experts.shape[0]):
        tokens = (choice == e).nonzero()[:, 0]
        out = out.index_add(0, tokens, torch.relu(x[tokens] @ experts[e]) * probs[tokens, e:e + 1])
    return out.sin()


@pytest.mark.parametrize("needs_grad", [False, True], ids=["input_without_grad", "input_with_grad"])
@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_an_expert_with_no_token(device, policy, needs_grad):
    gen = torch.Generator().manual_seed(0)
    x0 = torch.randn(6, 4, generator=gen)
    router = torch.randn(4, 3, generator=gen).to(device).requires_grad_()
    experts = torch.randn(3, 4, 4, generator=gen).to(device).requires_grad_()

    def step(checkpointed: bool) -> list[torch.Tensor]:
        x = x0.to(device).requires_grad_(needs_grad)
        router.grad = experts.grad = None
        out = xla_ckpt.checkpoint(_route, x, router, experts, policy=policy) if checkpointed else _route(
            x, router, experts)
        out.sum().backward()
        grads = [out.detach(), router.grad, experts.grad] + ([x.grad] if needs_grad else [])
        assert all(g is not None for g in grads)
        return [g.cpu() for g in grads]

    ref = step(False)
    tol = {"rtol": 1e-5, "atol": 1e-5} if device.type == "xla" else {"rtol": 0.0, "atol": 0.0}
    torch.testing.assert_close(step(True), ref, **tol)
    assert ref[2][2].abs().sum() == 0  # expert 2 got no token indeed


def test_empty_tensors_have_buffers_of_their_own():
    a, b = torch.empty(0), torch.empty(0, 3)
    assert buffer_key(a) != buffer_key(b)
    assert buffer_key(b) == buffer_key(b[:, 1:]) == buffer_key(b.detach())  # views share their base's


def test_fuzz_program_moe_routing_of_a_value_without_grad():
    """The fuzz's program (``moe`` routing ``relu(b)``, which needs no grad; one expert gets no token)."""
    import fuzz_check
    from fuzz_programs import Step

    steps = (Step("act", (1,), 3), Step("moe", (2,), 0))
    assert fuzz_check.check(steps, "everything_saveable", torch.device("cpu"), fuzz_check.EXACT) == "exact"
