"""A user's module hook inside a region that draws random numbers.

A forward hook applying dropout to its module's output (``lambda m, a, out: F.dropout(out, 0.5)``) or a
pre-hook adding noise (``a[0] + 0.1 * torch.randn_like(a[0])``) runs once, in the forward, with the
region's engine paused (``_hooks/user_hooks.py``); the replay does not call it but hands back what it
returned. Its draw is no recorded op, so the forward's chain of draws (``_engine/seeding.py``) looked
broken, as if fn had set the seed itself. On XLA that made the general replay (fn run again: any region
with an in-place op, here BatchNorm's running statistics) raise a ``CheckpointError`` claiming fn sets
torch_xla's seed itself, under every policy, where the plain step runs and nothing would be drawn again.
The forward reads the generators around such a hook and counts its draws as links of the chain:
exact, both RNG streams included. On the CPU the region's replay restores the generator as well (the
test pins it there too).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import replay_kind


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.bn = nn.Linear(8, 16), nn.Linear(16, 8), nn.BatchNorm1d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.b(F.dropout(torch.tanh(self.bn(self.a(x))), 0.3, self.training))


def _dropout_after(block: _Block) -> None:
    block.a.register_forward_hook(lambda m, args, out: F.dropout(out, 0.5))


def _noise_before(block: _Block) -> None:
    block.b.register_forward_pre_hook(lambda m, args: (args[0] + 0.1 * torch.randn_like(args[0]),))


HOOKS: dict[str, Callable[[_Block], None]] = {"dropout_after": _dropout_after, "noise_before": _noise_before}


def _step(device: torch.device, hook: Callable[[_Block], None], policy: Any) -> list[torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(_Block(), _Block()).to(device)
    for block in model:
        hook(block)
        if policy is not None:
            xla_ckpt.checkpointed(block, policy=policy)
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
    torch.manual_seed(7)
    if device.type == "xla":
        import torch_xla.core.xla_model as xm

        xm.set_rng_state(77, device)
    for _ in range(2):
        y = model(x)
        (y * y).sum().backward()
    after = [torch.get_rng_state()]
    if device.type == "xla":
        import torch_xla
        import torch_xla.core.xla_model as xm

        torch_xla.sync()
        after.append(torch.tensor(xm.get_rng_state(device)))
        after.append(torch.rand(4, device=device))
        torch_xla.sync()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None for g in grads)
    return [t.detach().cpu() for t in [y, x.grad, *grads, *model.buffers(), *after]]


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
@pytest.mark.parametrize("name", sorted(HOOKS))
def test_a_hook_drawing_random_numbers_inside_a_region_is_exact(device, name: str, policy: str) -> None:
    ref = _step(device, HOOKS[name], None)
    with replay_kind(device.type != "xla"):  # XLA: fn run again (BatchNorm's write sends it there anyway)
        got = _step(device, HOOKS[name], policy)
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"{name}: value {i}: {m}")
