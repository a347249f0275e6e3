"""A module hook that fn registers on each call and removes before returning.

``h = self.proj.register_forward_hook(lambda m, a, out: out + 1)`` ... ``h.remove()`` inside a checkpointed
forward (per-call adapters, a temporary probe): fn run again in backward registers another function object,
which a replay that did not recognise it as the forward's hook would not hand back what it returned: a
``CheckpointError`` ("values differ from the forward's ... was removed before backward"), CPU, every policy
that recomputes. The replay matches a hook by its code too: the forward's result, the hook called once.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of

POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")


class PerCallHook(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.log: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def shift(m, args, out):
            self.log.append(out.detach().cpu().clone())
            return out + 1

        handle = self.b.register_forward_hook(shift)
        try:
            y = self.b(self.a(x).tanh())
        finally:
            handle.remove()
        return y.sigmoid()


@pytest.mark.parametrize("policy", POLICIES)
def test_a_hook_registered_anew_in_each_forward_is_handed_back_in_the_replay(device, policy):
    torch.manual_seed(0)
    base = PerCallHook().to(device)
    x = torch.randn(4, 8).to(device)
    runs, logs = {}, {}
    for name in (None, policy):
        model = copy.deepcopy(base)
        if name is not None:
            xla_ckpt.checkpointed(model, policy=name)
        runs[name] = grads_of(model, [x.clone().requires_grad_()], list(model.parameters()))
        logs[name] = model.log
        assert not model.b._forward_hooks
    assert_same(runs[None], runs[policy])
    assert len(logs[policy]) == len(logs[None]) == 1
    torch.testing.assert_close(logs[policy][0], logs[None][0])
