"""TorchScript inside and as a checkpointed region.

Megatron-style blocks still call ``@torch.jit.script`` functions (a fused bias-GeLU inside an
``autograd.Function``) and hold scripted submodules. A scripted submodule's ``_parameters`` is a view of
its C++ slots (``OrderedDictWrapper``, no ``get``): the recompute raised a bare AttributeError, every
policy, CPU and XLA; ``_engine/members.py`` reads them: exact. A region that *is* TorchScript is refused with a
``TypeError`` naming the fix: TorchScript's executor optimizes a graph between calls, so fn run again
saved other tensors (a false CheckpointError, "saved 9 tensors; the forward ... saved 8"), and a scripted
module's ``forward`` cannot be replaced (a bare AttributeError).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same

POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")


@torch.jit.script
def _bias_gelu(bias: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


@torch.jit.script
def _bias_gelu_grad(g: torch.Tensor, bias: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = bias + y
    t = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    return g * (0.5 * x * ((1 - t * t) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + t))


class _BiasGelu(torch.autograd.Function):
    """Megatron-LM's fused bias-GeLU: scripted forward and backward."""

    @staticmethod
    def forward(ctx, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(y, bias)
        return _bias_gelu(bias, y)

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        y, bias = ctx.saved_tensors
        grad = _bias_gelu_grad(g, bias, y)
        return grad, grad.sum(0)


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.jit.script(nn.LayerNorm(8))  # a scripted submodule
        self.fc1 = nn.Linear(8, 32, bias=False)
        self.bias = nn.Parameter(torch.randn(32) * 0.1)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(_BiasGelu.apply(self.fc1(self.norm(x)), self.bias))


def _steps(device: torch.device, policy) -> list:
    """Three steps (the executor profiles, then optimizes): each step's outputs and every grad."""
    torch.manual_seed(0)
    model = _Mlp().to(device)
    if policy is not None:
        xla_ckpt.checkpointed(model, policy=policy)
    x = torch.randn(4, 8).to(device).requires_grad_()
    out = []
    for _ in range(3):
        x.grad = None
        model.zero_grad(set_to_none=True)
        y = model(x)
        y.sum().backward()
        if device.type == "xla":
            import torch_xla

            torch_xla.sync()
        out.append(([y.detach()], [x.grad] + [p.grad for p in model.parameters()]))
    return out


@pytest.mark.parametrize("policy", POLICIES)
def test_scripted_pieces_inside_a_region(device, policy):
    for ref, got in zip(_steps(device, None), _steps(device, policy), strict=True):
        assert_same(ref, got)


def test_a_torchscript_region_is_refused_before_anything_changes():
    block = torch.jit.script(nn.LayerNorm(8))
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(TypeError, match=r"'LayerNorm' is TorchScript .*Checkpoint the Python module"):
        xla_ckpt.checkpointed(block, policy="nothing_saveable")
    with pytest.raises(TypeError, match=r"xla_ckpt.checkpoint: 'LayerNorm' is TorchScript"):
        xla_ckpt.checkpoint(block, x)
    with pytest.raises(TypeError, match=r"'_bias_gelu' is TorchScript"):
        xla_ckpt.checkpoint(_bias_gelu, x, x)

    # apply: a rule that selects a scripted module names it (config key and module), and nothing was wrapped.
    model = nn.Sequential(_Mlp(), torch.jit.script(nn.Linear(8, 8)))
    with pytest.raises(TypeError, match=r"checkpoint\[0\]: module '1': 'Linear' is TorchScript"):
        xla_ckpt.apply(model, {"checkpoint": [{"match": ["0", "1"], "policy": "nothing_saveable"}]})
    assert "forward" not in model[0].__dict__  # the Python block before it was not wrapped either
