"""The module zoo's training step and its comparison with the plain step, shared by the zoo regressions.

``module_step`` builds a module afresh (same seed, same weights), runs one training step plain or with
xla_ckpt, and returns everything the first law covers: outputs, the input grads, every parameter grad,
every buffer, what user hooks recorded and the RNG streams. ``check_module`` compares the two. Example::

    check_module(lambda: nn.Linear(4, 4), [fixed_randn(2, 4)], torch.device("cpu"), "nothing_saveable")
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest
import torch
from torch import nn
from torch.utils._pytree import tree_leaves

import xla_ckpt
from helpers import seed_all, sync

POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")
# The fast tier runs each zoo case on XLA under the first policy only (every variant there is a compile of
# its own); the slow tier and the CPU case run every policy.
POLICIES_XLA_ONCE = (POLICIES[0], *(pytest.param(p, marks=pytest.mark.slow_on_xla) for p in POLICIES[1:]))
# The two policies that recompute (everything_saveable recomputes nothing), the second slow tier on XLA.
REPLAYED_XLA_ONCE = POLICIES_XLA_ONCE[:2]


def rng_state(device: torch.device) -> list[Any]:
    """The CPU generator's state and, on XLA, torch_xla's running seed (read before a sync resets it)."""
    state: list[Any] = [torch.get_rng_state()]
    if device.type == "xla":
        import torch_xla.core.xla_model as xm

        state.append(int(xm.get_rng_state(device)))  # the running seed, before the sync resets it
    return state


def module_step(make: Callable[[], nn.Module], inputs: list[torch.Tensor], device: torch.device, wrap: Any,
                hooks: Optional[Callable[[nn.Module, list], None]] = None) -> dict[str, Any]:
    """One training step of a fresh ``make()`` (``wrap`` None: plain; a str: that policy on the whole
    module; else a callable applying the library): everything the user can observe afterwards."""
    torch.manual_seed(0)
    model = make().to(device).train()
    log: list[Any] = []
    if hooks is not None:
        hooks(model, log)
    if isinstance(wrap, str):
        xla_ckpt.checkpointed(model, policy=wrap)
    elif wrap is not None:
        wrap(model)
    inputs = [t.detach().clone().to(device).requires_grad_(t.is_floating_point()) for t in inputs]
    seed_all(device, 7)
    with xla_ckpt.saved_activations() as kept:
        out = model(*inputs)
    outs = [o for o in tree_leaves(out) if isinstance(o, torch.Tensor)]
    diff = [o for o in outs if o.requires_grad]
    gen = torch.Generator().manual_seed(1)
    cot = [torch.randn(o.shape, generator=gen).to(o.device, o.dtype) for o in diff]
    torch.autograd.backward(diff, cot)
    rng = rng_state(device)
    sync(device)
    seen: dict[str, Any] = {"out": [o.detach().cpu() for o in outs], "rng": rng, "kept": kept.nbytes}
    for i, t in enumerate(inputs):
        if t.requires_grad:
            seen[f"grad of input {i}"] = t.grad.cpu() if t.grad is not None else None
    for name, p in model.named_parameters():
        seen[f"grad of {name}"] = p.grad.cpu() if p.grad is not None else None
    for name, b in model.named_buffers():
        seen[f"buffer {name}"] = b.detach().cpu().clone()
    seen["hook records"] = [r if isinstance(r, str) else r.detach().cpu() for r in log]
    return seen


# On XLA the checkpointed and the plain step compile to other graphs (the recompute fused apart, sums in
# another order): an EfficientNet MBConv's conv weight grad under dots_saveable differed by 1.7e-5 on a
# value of 2.45 (7e-6 relative, 1 element of 256), as in the fuzz's XLA_TOL.
XLA_TOL = {"rtol": 1e-5, "atol": 1e-5}


def _same(got: dict[str, Any], ref: dict[str, Any], tol: Optional[dict] = None) -> None:
    assert got.keys() == ref.keys()
    for key, r in ref.items():
        g = got[key]
        if key == "kept":
            continue
        if key == "hook records":
            assert [x for x in g if isinstance(x, str)] == [x for x in r if isinstance(x, str)], key
            assert len(g) == len(r), f"hooks recorded {len(g)} values, {len(r)} without the library"
        if key == "rng":
            torch.testing.assert_close(g[0], r[0], msg="CPU RNG state after the step")
            assert g[1:] == r[1:], f"torch_xla running seed {g[1:]}, {r[1:]} without the library"
            continue
        if r is None:
            assert g is None, f"{key}: expected no grad, got one"
            continue
        assert g is not None, f"{key} is None"
        for i, (gg, rr) in enumerate(zip(tree_leaves(g), tree_leaves(r), strict=True)):
            if isinstance(rr, str):
                continue
            torch.testing.assert_close(gg, rr, **(tol or {}), msg=lambda m, key=key, i=i: f"{key} [{i}]: {m}")


def check_module(make: Callable[[], nn.Module], inputs: list[torch.Tensor], device: torch.device, wrap: Any,
                 hooks: Optional[Callable[[nn.Module, list], None]] = None, fewer_bytes: bool = True) -> None:
    """``module_step`` plain and under ``wrap`` equal in all it observes; a whole-module policy kept fewer bytes."""
    ref = module_step(make, inputs, device, None, hooks)
    got = module_step(make, inputs, device, wrap, hooks)
    assert hooks is None or ref["hook records"], "the hooks recorded nothing"
    _same(got, ref, XLA_TOL if device.type == "xla" else None)
    if fewer_bytes and wrap in ("nothing_saveable", "full"):  # the policy did something: inputs kept only
        assert got["kept"] < ref["kept"], f"{wrap} kept {got['kept']} bytes, {ref['kept']} without the library"


def fixed_randn(*shape: int) -> torch.Tensor:
    """A normal tensor of ``shape``, the same on every call (its own generator, seed 3)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(3))
