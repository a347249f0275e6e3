"""A policy that raises: a PolicyError naming the policy, the op and the module, chained to the policy's own
exception, and nothing left installed (a plain call and a checkpointed call work right after)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt import policies


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(self.proj(x).sin())


def buggy(call: xla_ckpt.OpCall) -> xla_ckpt.Decision:
    """Raises on the tanh of the inner Sequential (a user's bug), decides the rest like dots_saveable."""
    if call.op.overloadpacket is torch.ops.aten.tanh:
        raise KeyError("my bug")
    return policies.dots_saveable(call)


def _nothing_left() -> None:
    from xla_ckpt._hooks import saved as _saved

    assert _saved.state.region is None and _saved.state.recompute is None
    assert torch._C._len_torch_dispatch_stack() == 0
    assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None


def _check(error: BaseException, where: str) -> None:
    assert isinstance(error, xla_ckpt.PolicyError), repr(error)
    assert isinstance(error, xla_ckpt.CheckpointError)
    text = str(error)
    assert f"{where}: policy {buggy!r} raised KeyError: 'my bug'" in text, text
    assert "aten.tanh.default" in text and "module 'inner.1'" in text, text
    assert isinstance(error.__cause__, KeyError) and error.__cause__.args == ("my bug",)


def _after(net: Net, x: torch.Tensor) -> None:
    """What follows works: the plain module, then a checkpoint of it, with exact grads."""
    _nothing_left()
    params = list(net.parameters())
    ref = grads_of(net, [x], params)
    assert_same(ref, grads_of(lambda t: xla_ckpt.checkpoint(net, t, policy="dots_saveable"), [x], params))
    _nothing_left()


def test_a_raising_policy_names_op_and_module(device):
    torch.manual_seed(0)
    net = Net().to(device)
    x = torch.randn(2, 4, device=device, requires_grad=True)
    with pytest.raises(xla_ckpt.PolicyError) as info:
        xla_ckpt.checkpoint(net, x, policy=buggy)
    _check(info.value, "checkpoint policy")
    _after(net, x)


def test_a_raising_policy_through_apply_and_inside_any_of():
    """Through apply's wrapper the module is named from the model's root; inside ``any_of`` the member that
    raised is named (not wrapped twice)."""
    torch.manual_seed(0)
    outer = nn.Sequential(Net())
    outer.layers = nn.ModuleList()  # no blocks: the rule below selects by name
    xla_ckpt.apply(outer, {"checkpoint": [{"match": "0", "policy": policies.any_of(buggy)}]})
    x = torch.randn(2, 4, requires_grad=True)
    with pytest.raises(xla_ckpt.PolicyError) as info:
        outer(x)
    assert "policies.any_of: policy" in str(info.value) and isinstance(info.value.__cause__, KeyError)
    assert "aten.tanh.default in module '0.inner.1'" in str(info.value), str(info.value)
    xla_ckpt.apply(outer, "none")
    _after(outer[0], x)


def test_a_raising_policy_under_torch_compile(fresh_dynamo):
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(2, 4, requires_grad=True)
    step = torch.compile(lambda t: xla_ckpt.checkpoint(net, t, policy=buggy), backend="inductor")
    with pytest.raises(Exception) as info:
        step(x).sum().backward()
    # Raised while AOTAutograd traced the region: Dynamo wraps it (BackendCompilerFailed), the error inside.
    _check(getattr(info.value, "inner_exception", info.value), "checkpoint policy (torch.compile)")
    _after(net, x)
