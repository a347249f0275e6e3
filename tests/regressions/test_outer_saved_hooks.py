"""A user's ``saved_tensors_hooks`` pair opened around a checkpointed call.

torch applies only the innermost saved-tensor hook pair, and the region's own pair is inside the
user's: left so, the user's pair never sees what autograd saved inside the region. A lossy pair (saved
activations packed as bf16, the usual activation compression) gave other gradients than the plain run,
silently (w.grad 1e-3 off, every policy), and the pair's pack / unpack counts differed. So each
tensor the region hands back at unpack (kept or recomputed) passes through the user's pair then:
the plain run's values and counts (the user's pack runs in backward for the region's tensors).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, counting_bf16_pair, grads_of

POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")


def _step(model: nn.Module, x: torch.Tensor, policy, hooked_module: bool):
    pack, unpack, counts = counting_bf16_pair()

    if hooked_module:  # a user's module hook inside the region: its saves go through the pair too
        model[1].register_forward_hook(lambda m, a, out: out * out.exp())
    if policy is not None:
        xla_ckpt.checkpointed(model, policy=policy)
    x = x.detach().clone().requires_grad_()

    def run(inp):
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            return model(inp)

    return grads_of(run, [x], list(model.parameters())), counts


@pytest.mark.parametrize("hooked_module", [False, True], ids=["plain_block", "hooked_module"])
@pytest.mark.parametrize("policy", POLICIES)
def test_a_lossy_user_pack_hook_around_a_region_is_applied_as_without_the_library(device, policy, hooked_module):
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.Sigmoid()).to(device)
    x = torch.randn(4, 16).to(device)
    ref, ref_counts = _step(copy.deepcopy(base), x, None, hooked_module)
    got, got_counts = _step(copy.deepcopy(base), x, policy, hooked_module)
    assert_same(ref, got)
    assert got_counts == ref_counts, f"pack/unpack calls {got_counts}, {ref_counts} without the library"


@pytest.mark.parametrize("policy", POLICIES)
def test_save_on_cpu_around_a_region_stays_exact(policy):
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16))
    x = torch.randn(4, 16)
    runs = {}
    for name in (None, policy):
        model = copy.deepcopy(base)
        if name is not None:
            xla_ckpt.checkpointed(model, policy=name)
        xi = x.clone().requires_grad_()

        def run(inp, model=model):
            with torch.autograd.graph.save_on_cpu():
                return model(inp)

        runs[name] = grads_of(run, [xi], list(model.parameters()))
    assert_same(runs[None], runs[policy])
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None


@pytest.mark.parametrize("policy", POLICIES)
def test_a_region_inside_torch_checkpoint_keeps_what_it_saved(policy):
    """torch.utils.checkpoint's own pair is not a user's value transform: its pack run in backward broke it."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16))
    x = torch.randn(4, 16)
    runs = {}
    for name in (None, policy):
        model = copy.deepcopy(base)
        inner = model if name is None else (lambda a, model=model, name=name: xla_ckpt.checkpoint(model, a, policy=name))
        xi = x.clone().requires_grad_()
        run = lambda inp, inner=inner: torch.utils.checkpoint.checkpoint(  # noqa: E731
            lambda a: inner(a).exp(), inp, use_reentrant=False)
        runs[name] = grads_of(run, [xi], list(model.parameters()))
    assert_same(runs[None], runs[policy])
