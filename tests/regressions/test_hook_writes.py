"""User hooks inside a region that write in place, and fn writing what a hook returned.

The replay does not call hooks again, which makes two programs delicate (the fuzz's ``hunt`` profile,
``XLA_CKPT_FUZZ=hunt``, draws both; its generator: ``fuzz_programs.MODULES``):
- a forward hook that writes its module's output in place and returns None: a replay that skipped the
  write would give silently wrong gradients (w.grad 25.0 off on a Linear, CPU, every policy);
- fn writing in place the tensor a hook returned: the replay's stand-in is a leaf that needs grad (a
  ``RuntimeError``), and with the write allowed the kept value would be the written one.
A hook that writes its module's inputs changes tensors fn holds outside the module call, which the
replay cannot repeat: a ``CheckpointError`` naming the hook and the module.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of, sync

POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")


class _Block(nn.Module):
    """fn around a hooked Linear: writes the module's result in place, then ops that save it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.out = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        y[0].add_(1.0)  # through a view: the hook's result is written by fn
        y.mul_(3.0)
        return self.out(y.sin() * y)


def _hooked(kind: str) -> nn.Module:
    torch.manual_seed(0)
    block = _Block()
    if kind == "writes_output":
        def hook(m, args, out):
            out.mul_(0.5)  # in place, returns None
    else:
        def hook(m, args, out):
            return out * 0.5 + 0.25
    block.lin.register_forward_hook(hook)
    return block


@pytest.mark.parametrize("verify", [False, True])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("kind", ["writes_output", "returns_output"])
def test_a_hooks_output_written_in_place_gives_the_plain_grads(device, kind, policy, verify):
    base = _hooked(kind).to(device)
    x = torch.randn(4, 8).to(device)
    runs = {}
    for name in (None, policy):
        block = copy.deepcopy(base)
        if name is not None:
            xla_ckpt.checkpointed(block, policy=name, verify=verify)
        xi = x.detach().clone().requires_grad_()
        runs[name] = grads_of(block, [xi], list(block.parameters()))
        sync(device)
    assert_same(runs[policy], runs[None])


def test_a_second_backward_reads_the_hooks_value_again():
    """retain_graph: the kept value stays as the hook returned it (fn's replayed write goes to a copy)."""
    block, ref = _hooked("returns_output"), None
    for policy in (None, "nothing_saveable"):
        b = copy.deepcopy(block)
        if policy is not None:
            xla_ckpt.checkpointed(b, policy=policy)
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1), requires_grad=True)
        loss = b(x).square().sum()
        loss.backward(retain_graph=True)
        loss.backward()
        got = [x.grad] + [p.grad for p in b.parameters()]
        if ref is None:
            ref = got
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g, r)


@pytest.mark.parametrize("where", ["pre_hook", "forward_hook_input", "identity_output"])
def test_a_hook_writing_its_modules_inputs_is_named(where):
    original = nn.Module._call_impl
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 4), nn.Identity() if where == "identity_output" else nn.Tanh(), nn.Linear(4, 4))

    def doubles(m, args, out=None):
        (args[0] if out is None else out).mul_(2.0)

    def doubles_input(m, args, out):
        args[0].mul_(2.0)

    if where == "pre_hook":
        block[1].register_forward_pre_hook(doubles)
    elif where == "forward_hook_input":
        block[1].register_forward_hook(doubles_input)
    else:  # Identity returns its input: writing the output writes the input fn still holds
        block[1].register_forward_hook(doubles)
    x = torch.randn(2, 4, requires_grad=True)
    block(x).sum().backward()  # the plain model trains
    xla_ckpt.checkpointed(block, policy="nothing_saveable")
    with pytest.raises(xla_ckpt.CheckpointError, match=r"hook 'doubles(_input)?' of module (Tanh|Identity) writes its module's"):
        block(x).sum().backward()
    assert nn.Module._call_impl is original
    assert all(type(h).__name__ != "Guard" for h in block[1]._forward_hooks.values())
    assert all(type(h).__name__ != "Guard" for h in block[1]._forward_pre_hooks.values())
