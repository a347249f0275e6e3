"""XLA: a region that computes on the CPU and copies to XLA.

``torch.arange(32).reshape(4, 2, 4).to(xla)`` inside a region on XLA, then views of the copy. The recorded
program (XLA's default replay) names each value by its buffer, and on the CPU a view shares its base's
buffer: the program fed the un-reshaped ``arange`` to the copy. Under every policy that recomputes, the
grads were silently wrong in the fuzz's chains of views (a.grad 32 off) or a bare shape error was raised
(``Value out of range``; "Check failed: total_element_count"). A CPU tensor from outside the region viewed
twice inside it was fed the first view for both. The program names a CPU value by its storage and
its shape, strides and offset (``_engine/direct.py``), so each view is a value of its own.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import xla_ckpt
from helpers import replay_kind

pytestmark = pytest.mark.xla

_TABLE = torch.arange(32.0) - 16.0  # a CPU tensor from outside the region


def _made_on_cpu(x: torch.Tensor) -> torch.Tensor:
    t = torch.arange(32, dtype=x.dtype).reshape(4, 2, 4).to(x.device) - 16.0
    return t.flip(0).transpose(0, 2).select(1, 1)


def _outside_cpu_viewed_twice(x: torch.Tensor) -> torch.Tensor:
    return _TABLE[:16].to(x.device).reshape(4, 4) + _TABLE.reshape(4, 2, 4).to(x.device).select(1, 1)


BODIES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"made_on_cpu": _made_on_cpu,
                                                             "outside_cpu_viewed_twice": _outside_cpu_viewed_twice}


def _step(device: torch.device, body: Callable[[torch.Tensor], torch.Tensor], policy: Any) -> list[torch.Tensor]:
    import torch_xla

    gen = torch.Generator().manual_seed(0)
    w = torch.randn(4, 4, generator=gen).to(device).requires_grad_()
    a = torch.randn(4, 4, generator=gen).to(device).requires_grad_()

    def fn(a: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(F.linear(a, w))
        return x * body(x) + x

    out = fn(a) if policy is None else xla_ckpt.checkpoint(fn, a, policy=policy)
    out.sum().backward()
    torch_xla.sync()
    return [out.detach().cpu(), a.grad, w.grad]


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_cpu_values_inside_an_xla_region_replay_exactly(xla_device, name: str, policy: str) -> None:
    ref = _step(xla_device, BODIES[name], None)
    with replay_kind(True):  # the recorded program, XLA's default
        got = _step(xla_device, BODIES[name], policy)
    for what, g, r in zip(("out", "a.grad", "w.grad"), got, ref, strict=True):
        assert g is not None and r is not None, what
        torch.testing.assert_close(g.cpu(), r.cpu(), msg=lambda m, what=what: f"{name}, {policy}: {what}: {m}")
