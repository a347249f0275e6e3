"""The recorded-program replay and torch_xla state outside ATen, in process.

SPMD needs a fresh process (``tests/probes/annotate_probe.py``, ``test_sharded.py``); here the
sharding queries are stood in for, so the fast tier checks the wiring: a sharding found on a value
the program recomputes is put back on the recomputed value, and a MANUAL one sends the region to the
general replay. Grads stay exact either way.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from xla_ckpt._engine import direct as _direct
from xla_ckpt._engine import program as _program

pytestmark = pytest.mark.xla

SHARDING = object()  # what torch_xla's OpSharding would be
H = (4, 6)  # the shape of the annotated value, h = x @ w


def _fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = (x @ w).t()  # only the matmul's output has the shape H
    return (h.tanh() * h.sin()).sum()


def _run(xla_device, monkeypatch, manual: bool):
    annotated, built = [], []
    monkeypatch.setattr(_direct, "spmd", lambda: True)
    monkeypatch.setattr(_direct, "sharding_of", lambda t: SHARDING if tuple(t.shape) == H else None)
    monkeypatch.setattr(_direct, "is_manual", lambda t: manual and tuple(t.shape) == H)
    monkeypatch.setattr(_program, "annotate", lambda t, s: annotated.append((tuple(t.shape), s)))
    build = _direct.Recorder.build

    def spy(self, *a, **k):
        program = build(self, *a, **k)
        built.append((program, self.why_not))
        return program

    monkeypatch.setattr(_direct.Recorder, "build", spy)
    g = torch.Generator().manual_seed(0)
    x0, w0 = torch.randn(4, 5, generator=g), torch.randn(5, 6, generator=g)
    grads = []
    for policy in (None, "nothing_saveable"):
        x, w = x0.to(xla_device).requires_grad_(), w0.to(xla_device).requires_grad_()
        y = _fn(x, w) if policy is None else xla_ckpt.checkpoint(_fn, x, w, policy=policy)
        y.backward()
        grads.append((x.grad.cpu(), w.grad.cpu()))
    for got, ref in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(got, ref)
    return annotated, built


def test_a_sharding_on_a_recomputed_value_is_put_back(xla_device, monkeypatch):
    annotated, built = _run(xla_device, monkeypatch, manual=False)
    (program, why_not), = built
    assert program is not None, why_not
    assert list(program.shardings.values()) == [SHARDING]  # h's, and nothing else
    assert annotated == [(H, SHARDING)]  # on the recomputed h, once


def test_a_manual_sharding_sends_the_region_to_the_general_replay(xla_device, monkeypatch):
    annotated, built = _run(xla_device, monkeypatch, manual=True)
    (program, why_not), = built
    assert program is None and "manual" in why_not
    assert annotated == []
