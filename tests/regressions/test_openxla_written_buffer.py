"""A buffer a region advances and reads, under ``torch.compile(backend="openxla")``.

``self.n.add_(1)`` then ``x.sin() * (1 + 0.1 * self.n)`` in a checkpointed module: the write is saved
(``_compile.input_writes``), so the forward graph returns the buffer's new value twice, as the value
AOTAutograd's epilogue copies into the buffer and as a value backward reads (the recompute of
``1 + 0.1 * n`` starts from it). torch_xla's dynamo bridge then took that saved value for a constant of
the backward graph: backward read the first step's ``n`` at every step, x.grad 1.1, 1.1, 1.1 where the
plain compile and the lazy run give 1.1, 1.2, 1.3, silently. The forward saves its own copy of such a
value (``_compile.fence.separate_saved_writes``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import xla_ckpt

pytestmark = [pytest.mark.xla, pytest.mark.usefixtures("fresh_dynamo"),
              pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")]


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("n", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n.add_(1)
        return self.lin(x).sin() * (1 + 0.1 * self.n)


def _steps(device: torch.device, policy, compiled: bool) -> list[torch.Tensor]:
    import torch_xla

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Counter().to(device)
    if policy is not None:
        xla_ckpt.checkpointed(model, policy=policy)
    step = torch.compile(model, backend="openxla") if compiled else model
    got = []
    for i in range(3):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(i)).to(device).requires_grad_()
        y = step(x)
        y.sum().backward()
        torch_xla.sync()
        got += [y.detach().cpu(), x.grad.cpu(), model.lin.weight.grad.cpu(), model.lin.bias.grad.cpu()]
        model.zero_grad(set_to_none=True)
    return got + [model.n.cpu()]


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
def test_openxla_buffer_written_and_read_in_a_region_is_read_anew_each_step(xla_device, policy):
    lazy = _steps(xla_device, None, compiled=False)
    plain = _steps(xla_device, None, compiled=True)
    got = _steps(xla_device, policy, compiled=True)
    for i, (g, p, r) in enumerate(zip(got, plain, lazy, strict=True)):
        torch.testing.assert_close(p, r, msg=lambda m, i=i: f"plain compile, value {i}: {m}")
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"value {i} (step {i // 4}): {m}")
