"""A random factory op in a region under ``torch.compile(backend="aot_eager")``.

``torch.randn(shape)``, ``torch.rand(shape)`` or ``torch.randperm(n)`` inside a checkpointed region
under an AOTAutograd backend raised the ``CheckpointError`` meant for ``backend="eager"`` ("torch
recomputes it with fresh random numbers... compile with backend='aot_eager'"), while compiling with
'aot_eager' already: a false error where the plain compile runs. The lowering told AOTAutograd's trace
from torch's step-time SAC by the op's tensor arguments being fake, and a factory op has none. It
also looks for the fake mode on the dispatch stack. ``randn_like`` and dropout (a tensor argument) were
fine. Values, grads and the CPU RNG state after the step equal the plain compiled step's.
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt

pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py

DRAWS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "randn": lambda h: h * torch.randn(h.shape),
    "rand_mask": lambda h: h * (torch.rand(h.shape[-1]) > 0.3),
    "randperm_shuffle": lambda h: h[torch.randperm(h.shape[0])] * h,  # token shuffling
    "randperm_drop": lambda h: h.index_fill(0, torch.randperm(h.shape[0])[:3], 0.0),  # capacity drops
}


def _step(draw: Callable[[torch.Tensor], torch.Tensor], policy: str | None) -> list[torch.Tensor]:
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(3)
    a, b = nn.Linear(8, 16), nn.Linear(16, 8)
    with torch.no_grad():
        for p in [*a.parameters(), *b.parameters()]:
            p.copy_(torch.randn(p.shape, generator=gen))
    x = torch.randn(8, 8, generator=gen).requires_grad_()
    w = torch.randn(8, 8, generator=gen)

    def block(t: torch.Tensor) -> torch.Tensor:
        return b(draw(torch.tanh(a(t))))

    def model(t: torch.Tensor) -> torch.Tensor:
        return block(t) if policy is None else xla_ckpt.checkpoint(block, t, policy=policy)

    torch.manual_seed(1234)
    out = torch.compile(model, backend="aot_eager")(x)
    (out * w).sum().backward()
    grads = [x.grad, a.weight.grad, a.bias.grad, b.weight.grad, b.bias.grad]
    assert all(g is not None for g in grads)
    return [out.detach(), *grads, torch.get_rng_state()]


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable", "dots_saveable"])
@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_random_factory_op_under_aot_eager_is_the_plain_compiled_step(name: str, policy: str) -> None:
    ref = _step(DRAWS[name], None)
    got = _step(DRAWS[name], policy)
    for what, g, r in zip(("out", "x.grad", "a.weight.grad", "a.bias.grad", "b.weight.grad", "b.bias.grad",
                           "CPU RNG state"), got, ref, strict=True):
        torch.testing.assert_close(g, r, msg=lambda m, what=what: f"{name}: {what}: {m}")


def test_the_eager_backend_still_refuses_a_random_factory_op() -> None:
    """The error is still raised where it is true: torch's SAC at step time."""

    def block(t: torch.Tensor) -> torch.Tensor:
        return F.relu(t) * torch.randn(t.shape)

    x = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"random op aten\.randn.*backend='eager'"):
        torch.compile(lambda t: xla_ckpt.checkpoint(block, t), backend="eager")(x).sum().backward()
