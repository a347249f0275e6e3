"""XLA: a random op nothing backward needs, whose draw count depends on its input.

``y = b * torch._standard_gamma(b.abs() + 0.5)`` inside a region, with ``b`` an input that needs no grad
and ``y`` written in place (so XLA's replay runs fn again, the general replay). Nothing backward reads
depends on ``y``, so the region lets ``b`` go and the replay reads a stand-in of it. torch_xla runs
``_standard_gamma`` (and ``poisson``) on torch's CPU generator, by rejection sampling: how many numbers
it draws depends on its input, so from the stand-in it ended elsewhere than in the forward, and the
replay raised "the random numbers ... cannot be reproduced" (a false CheckpointError) under every policy
that recomputes. Such an op is a dead position on XLA too: run from its forward state, its end not
checked (the generator is put back either way), its output never read.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import xla_ckpt

pytestmark = pytest.mark.xla


def _gamma(b: torch.Tensor) -> torch.Tensor:
    return torch._standard_gamma(b.detach().abs() + 0.5)


def _poisson(b: torch.Tensor) -> torch.Tensor:
    return torch.poisson(b.detach().abs() * 2)


DRAWS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"standard_gamma": _gamma, "poisson": _poisson}


def _step(device: torch.device, draw: Callable[[torch.Tensor], torch.Tensor], policy: Any) -> list[torch.Tensor]:
    import torch_xla
    import torch_xla.core.xla_model as xm

    gen = torch.Generator().manual_seed(0)
    w = torch.randn(8, 8, generator=gen).to(device).requires_grad_()
    a = torch.randn(4, 8, generator=gen).to(device).requires_grad_()
    b = torch.randn(4, 8, generator=gen).to(device)  # needs no grad: nothing backward reads depends on it

    def fn(a: torch.Tensor, *, b: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(F.linear(a, w))
        y = b * draw(b)
        y.mul_(0.5)  # a write: XLA's replay runs fn again
        return h + y

    torch_xla.sync()
    torch.manual_seed(1234)
    xm.set_rng_state(1234, device)
    out = fn(a, b=b) if policy is None else xla_ckpt.checkpoint(fn, a, b=b, policy=policy)
    out.sum().backward()
    after = torch.get_rng_state()
    torch_xla.sync()
    return [t.detach().cpu() for t in (out, a.grad, w.grad)] + [after, torch.tensor(xm.get_rng_state(device))]


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
@pytest.mark.parametrize("name", sorted(DRAWS))
def test_an_unneeded_input_dependent_draw_replays_as_the_plain_step(xla_device, name: str, policy: str) -> None:
    ref = _step(xla_device, DRAWS[name], None)
    got = _step(xla_device, DRAWS[name], policy)
    for what, g, r in zip(("out", "a.grad", "w.grad", "CPU RNG after", "XLA seed after"), got, ref, strict=True):
        assert g is not None and r is not None, what
        torch.testing.assert_close(g, r, msg=lambda m, what=what: f"{name}, {policy}: {what}: {m}")
