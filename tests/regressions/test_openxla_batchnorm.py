"""BatchNorm in training inside a region under ``torch.compile(backend="openxla")``.

A region holding BatchNorm recomputes it in backward under the replaying policies, and the recomputed op
reads the running statistics (its outputs do not depend on them: ``_compile.input_writes.STATISTICS_ONLY``).
Under ``openxla`` AOTAutograd writes the new statistics back in its Python epilogue (``running_mean.copy_``),
after the forward saved them for that recompute: the copy moves their version, and backward raised
autograd's bare ``RuntimeError`` ("modified by an inplace operation", a ``[32]`` XLA tensor) where the
plain compile runs, under every policy (inductor and ``aot_eager`` keep the write in the graph: fine).
On XLA the BatchNorm op is saved, as a random op is there: outputs, every grad and the statistics
equal the plain compile's over two steps.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt

pytestmark = [pytest.mark.xla, pytest.mark.usefixtures("fresh_dynamo"),
              pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")]


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(16, 32, bias=False)
        self.bn = nn.BatchNorm1d(32)
        self.l2 = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.l2(F.gelu(self.bn(self.l1(x))))


def _steps(device: torch.device, policy) -> list[torch.Tensor]:
    import torch_xla

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(_Block(), _Block(), nn.Linear(16, 4)).to(device)
    if policy is not None:
        for block in model[:2]:
            xla_ckpt.checkpointed(block, policy=policy)
    step = torch.compile(model, backend="openxla")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    got = []
    for i in range(2):
        x = torch.randn(6, 16, generator=torch.Generator().manual_seed(5 + i)).to(device).requires_grad_()
        y = step(x)
        y.square().mean().backward()
        torch_xla.sync()
        assert all(p.grad is not None for p in model.parameters())
        got += [y.detach().cpu(), x.grad.cpu(), *(p.grad.cpu() for p in model.parameters())]
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
    return got + [b.cpu() for b in model.buffers()]


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
def test_openxla_batchnorm_region_equals_the_plain_compile(xla_device, policy):
    ref = _steps(xla_device, None)
    got = _steps(xla_device, policy)
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"value {i}: {m}")
