"""Random ops in a region under torch.compile: the same numbers as the eager engine, or an error.

torch's ``tag_activation_checkpoint`` runs its checkpoint with ``preserve_rng_state=False`` (for
tracing). Under ``backend="eager"`` nothing is traced: torch's selective checkpoint runs at step time,
and its recompute draws fresh numbers: a wrong gradient (3.3 here), which the library now refuses.
AOTAutograd backends replay the forward's RNG and must give the unwrapped model's gradient exactly.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt


def _model(wrap: bool, policy: str, p: float) -> tuple[nn.Module, nn.Module, callable]:
    torch.manual_seed(0)
    lin1, lin2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def block(x: torch.Tensor) -> torch.Tensor:
        return lin2(F.dropout(torch.relu(lin1(x)), p, training=True))

    def model(x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            x = xla_ckpt.checkpoint(block, x, policy=policy) if wrap else block(x)
        return x.sum()

    return lin1, lin2, model


def _step(wrap: bool, backend, policy: str = "nothing_saveable", p: float = 0.5) -> list[torch.Tensor]:
    lin1, lin2, model = _model(wrap, policy, p)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(3), requires_grad=True)
    fn = model if backend is None else torch.compile(model, backend=backend)
    torch.manual_seed(1)
    fn(x).backward()
    grads = [lin1.weight.grad, lin1.bias.grad, lin2.weight.grad, lin2.bias.grad, x.grad]
    assert all(g is not None for g in grads)
    return grads


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
def test_aot_backend_replays_the_forward_rng(policy: str) -> None:
    ref = _step(False, None)
    for got, want in zip(_step(True, "aot_eager", policy), ref):
        torch.testing.assert_close(got, want)


def test_eager_backend_refuses_a_random_op_instead_of_a_wrong_gradient() -> None:
    with pytest.raises(xla_ckpt.CheckpointError, match=r"random op aten\.bernoulli.*backend='eager'.*aot_eager"):
        _step(True, "eager")


def test_eager_backend_without_random_ops_is_exact() -> None:
    ref = _step(False, None, p=0.0)
    for got, want in zip(_step(True, "eager", p=0.0), ref):
        torch.testing.assert_close(got, want)
