"""The RNG stream after a checkpointed step equals the plain step's, on the CPU and on XLA.

A random op on XLA is kept from the forward or, when the policy says so, recomputed from the forward's
seed. A kept random output that backward never
reads is dropped at the end of forward, and the general replay (``fn`` run again: a region with
dropout always takes it, since dropout writes in place) ran the op again: one more draw from
torch_xla's seed, traced but never executed. Values and grads stayed exact; torch_xla's running seed
after backward was one update further (``s * 214013 + 2531011``) and every later random op of the
step (the next micro-batch's dropout) drew other numbers. ``verify=True`` redrew a kept random op
too, and reported it as non-determinism. The seed is read before the sync: a sync derives the next
seed from the base seed alone, so after it the two runs agree again and the difference hides.
XLA regions here run the general replay (``general_replay``): the recorded program never ran the
unread op, and whether a region with dropout gets one depends on how torch_xla traces dropout.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xla_ckpt
from helpers import replay_kind
from xla_ckpt import Decision, OpCall

aten = torch.ops.aten
# XLA:CPU compiles the checkpointed and the plain step into different graphs (see fuzz_check.XLA_TOL).
XLA_TOL = {"rtol": 1e-5, "atol": 1e-5}


class ByPosition:
    """The issue's policy: save mm, the second add, div and mul; recompute the rest (counted per op)."""

    def __init__(self) -> None:
        self.seen: dict[Any, int] = {}

    def __call__(self, call: OpCall) -> Decision:
        packet = call.op.overloadpacket
        n = self.seen[packet] = self.seen.get(packet, 0) + 1
        if packet in (aten.mm, aten.div, aten.mul) or (packet is aten.add and n == 2):
            return Decision.SAVE
        return Decision.RECOMPUTE


def by_value(call: OpCall) -> Decision:
    """Saves an output whose mean is positive (reads the value: on XLA, a graph runs mid-forward)."""
    out = call.out
    if isinstance(out, torch.Tensor) and out.is_floating_point():
        return Decision.SAVE if float(out.detach().mean()) > 0 else Decision.RECOMPUTE
    return Decision.RECOMPUTE


def _rng(device: torch.device) -> Any:
    if device.type == "xla":
        import torch_xla.core.xla_model as xm

        return xm.get_rng_state(device)  # the running seed: reading it draws nothing
    return torch.get_rng_state()


def _step(device: torch.device, policy: Any = None, verify: bool = False) -> dict[str, Any]:
    """The issue's program, one step (plain when ``policy`` is None): values, grads and the RNG stream
    after backward (the state, a dropout mask drawn then, the state after the sync)."""
    gen = torch.Generator().manual_seed(3)
    block = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    block.to(device)
    x = torch.randn(2, 4, 8, generator=gen).to(device).requires_grad_()
    unused = torch.randn(5, generator=gen).to(device)
    ids = torch.arange(4).to(device)
    torch.manual_seed(1234)
    if device.type == "xla":
        import torch_xla
        import torch_xla.core.xla_model as xm

        torch_xla.sync()
        xm.set_rng_state(1234, device)

    def fn(x: torch.Tensor, unused: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return F.dropout(block(x), 0.3)

    out = fn(x, unused, ids) if policy is None else xla_ckpt.checkpoint(fn, x, unused, ids, policy=policy,
                                                                         verify=verify)
    out.sum().backward()
    got = {"state": _rng(device), "next mask": F.dropout(torch.ones(64, device=device), 0.5)}
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
        got["state after sync"] = _rng(device)
    got.update({"out": out.detach(), "x.grad": x.grad})
    got.update({f"{n}.grad": p.grad for n, p in block.named_parameters()})
    return {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in got.items()}


def _same(device: torch.device, policy: Any, verify: bool = False, direct: bool = False) -> None:
    ref = _step(device)
    with replay_kind(direct):
        got = _step(device, policy, verify)
    tol = XLA_TOL if device.type == "xla" else {"rtol": 0.0, "atol": 0.0}
    for name, r in ref.items():
        g = got[name]
        assert g is not None, f"{name} is None"
        if name.startswith("state"):
            assert torch.equal(g, r) if isinstance(r, torch.Tensor) else g == r, f"the RNG {name} differs: {g} vs {r}"
        else:
            torch.testing.assert_close(g, r, msg=lambda m, name=name: f"{name} differs: {m}",
                                       **(tol if name != "next mask" else {"rtol": 0.0, "atol": 0.0}))


POLICIES = {"by_position": ByPosition, "by_value": lambda: by_value, "everything": lambda: "everything_saveable",
            "nothing": lambda: "nothing_saveable"}


@pytest.mark.parametrize("name", list(POLICIES))
def test_rng_stream_after_a_step_equals_the_plain_step(device, name):
    """A saved dropout mask backward never reads is not drawn again in the replay (XLA)."""
    _same(device, POLICIES[name]())
    if device.type == "xla" and name == "by_position":
        _same(device, POLICIES[name](), direct=True)  # and the recorded program, where the region has one


def test_verify_keeps_an_xla_random_op_instead_of_redrawing_it(device):
    """verify=True recomputed a kept random op on XLA (no draw to replay there): other numbers, and a
    false "not deterministic" error."""
    _same(device, "everything_saveable", verify=True)


def test_the_checker_sees_one_extra_draw(device, monkeypatch):
    """The comparison is not vacuous: one more draw after the checkpointed backward fails it."""
    original = xla_ckpt.checkpoint

    def drawing(*args: Any, **kwargs: Any) -> Optional[torch.Tensor]:
        out = original(*args, **kwargs)
        torch.rand(1, device=out.device)
        return out

    monkeypatch.setattr(xla_ckpt, "checkpoint", drawing)
    with pytest.raises(AssertionError, match="RNG state differs"):
        _same(device, "nothing_saveable")
