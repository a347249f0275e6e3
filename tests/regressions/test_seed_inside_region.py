"""fn seeding torch's CPU generator itself inside a region.

``torch.manual_seed(5)`` (or ``torch.set_rng_state``) inside a checkpointed function, before its dropout:
values and grads were exact, but after backward the CPU generator stood right after fn's seed, not where
the plain step leaves it: the replay ran fn again, fn seeded again, and each replayed random op put the
generator back to the state it found, fn's seed. Every later draw of the step (the next micro-batch's
dropout) differed, silently, under every policy. The forward tells whether fn moved the generator
outside its random ops, and such a region's replay gives the caller's state back (``_engine/seeding.py``).
A ``torch.Generator`` fn seeds and draws from was left the same way; the replay gives every one back.
XLA's general replay runs fn again too (the CPU generator it seeds); its recorded program does not.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import replay_kind


def _seed(h: torch.Tensor) -> torch.Tensor:
    torch.manual_seed(5)
    return F.dropout(h, 0.3)


_STATE = torch.Generator().manual_seed(9).get_state()


def _set_state(h: torch.Tensor) -> torch.Tensor:
    d = F.dropout(h, 0.2)
    torch.set_rng_state(_STATE)  # after its draw: the chain's end
    return d * torch.rand(h.shape[-1]).to(h.device)


_GEN = torch.Generator()


def _own_generator(h: torch.Tensor) -> torch.Tensor:
    _GEN.manual_seed(77)  # a generator of fn's own, seeded before its first draw
    return h * torch.rand(h.shape, generator=_GEN).to(h.device)


FNS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"manual_seed": _seed, "set_rng_state": _set_state,
                                                          "own_generator": _own_generator}


def _step(device: torch.device, body: Callable[[torch.Tensor], torch.Tensor], policy: Any) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    a, b = nn.Linear(8, 16), nn.Linear(16, 8)
    with torch.no_grad():
        for p in [*a.parameters(), *b.parameters()]:
            p.copy_(torch.randn(p.shape, generator=gen))
    a.to(device), b.to(device)
    x = torch.randn(8, 8, generator=gen).to(device).requires_grad_()

    def block(t: torch.Tensor) -> torch.Tensor:
        return b(body(torch.tanh(a(t))))

    torch.manual_seed(1234)
    _GEN.manual_seed(1)
    if device.type == "xla":
        import torch_xla
        import torch_xla.core.xla_model as xm

        torch_xla.sync()
        xm.set_rng_state(1234, device)
    out = block(x) if policy is None else xla_ckpt.checkpoint(block, x, policy=policy)
    between = torch.cat([torch.rand(3), torch.rand(3, generator=_GEN)])  # the caller draws between forward and backward
    out.sum().backward()
    after = [torch.get_rng_state(), torch.rand(4), _GEN.get_state()]
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    return [t.detach().cpu() for t in [out, x.grad, a.weight.grad, b.weight.grad, between]] + after


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable", "dots_saveable"])
@pytest.mark.parametrize("name", sorted(FNS))
def test_a_seed_fn_sets_leaves_the_cpu_stream_as_the_plain_step(device, name: str, policy: str) -> None:
    ref = _step(device, FNS[name], None)
    with replay_kind(device.type != "xla"):  # XLA: fn run again (its recorded program runs no Python)
        got = _step(device, FNS[name], policy)
    names = ("out", "x.grad", "a.weight.grad", "b.weight.grad", "draws between", "CPU state after", "next draw",
             "fn's generator after")
    for what, g, r in zip(names, got, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=0, msg=lambda m, what=what: f"{name}: {what}: {m}")


def _xla_seed(h: torch.Tensor) -> torch.Tensor:
    import torch_xla.core.xla_model as xm

    xm.set_rng_state(5, h.device)
    return F.dropout(h, 0.3)


def _xla_sync(h: torch.Tensor) -> torch.Tensor:
    import torch_xla

    torch_xla.sync()  # derives the next seed from the base: a seed set too
    return F.dropout(h, 0.3)


@pytest.mark.parametrize("body", [_xla_seed, _xla_sync], ids=["set_rng_state", "sync"])
def test_fn_setting_torch_xlas_seed_is_a_named_error_where_fn_runs_again(xla_device, body) -> None:
    """XLA: the general replay cannot give torch_xla's seed back (setting it moves the base seed): the
    caller's seed after the step differed from the plain step's, silently. A named error instead; the recorded
    program runs no Python and is exact."""
    ref = _step(xla_device, body, None)
    got = _step(xla_device, body, "nothing_saveable")  # the recorded program
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=0)
    with replay_kind(False), pytest.raises(xla_ckpt.CheckpointError, match=r"sets torch_xla's seed itself"):
        _step(xla_device, body, "nothing_saveable")
