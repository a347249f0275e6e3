"""The corrected layer norm: F.layer_norm's values and grads, and autograd keeps the input only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt._ops.layer_norm import layer_norm

# (weight?, bias?, which of (x, weight, bias) require grad)
CASES = [(True, True, (True, True, True)), (True, False, (True, True, False)), (False, False, (True, False, False)),
         (True, True, (False, True, True)), (True, True, (True, False, False))]


def _inputs(device, affine_w, affine_b, rg):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 16, generator=g)
    w = torch.randn(16, generator=g) if affine_w else None
    b = torch.randn(16, generator=g) if affine_b else None
    return [t.to(device).requires_grad_(r) if t is not None else None for t, r in zip((x, w, b), rg, strict=True)]


@pytest.mark.parametrize("affine_w,affine_b,rg", CASES)
def test_values_and_every_grad_equal_f_layer_norm(device, affine_w, affine_b, rg):
    x, w, b = _inputs(device, affine_w, affine_b, rg)
    wanted = [t for t, r in zip((x, w, b), rg, strict=True) if t is not None and r]
    inputs, params = wanted[:1] if rg[0] else [], wanted[1:] if rg[0] else wanted
    ref = grads_of(lambda *_: F.layer_norm(x, (16,), w, b, 1e-5), inputs, params)
    got = grads_of(lambda *_: layer_norm(x, (16,), w, b, 1e-5), inputs, params)
    assert_same(ref, got)


# Grads of grads: the corrected layer norm's backward is its own formula, not F.layer_norm's, so the second
# derivative's last bits follow each formula's rounding, which the compiler's FMA contraction moves (XLA:CPU at
# LLVM -O0, the tests' setting, differs by 1.5e-5 on a value of 0.53). CPU eager and first derivatives keep the defaults.
SECOND_ORDER_TOL = dict(rtol=1e-4, atol=1e-5)


def test_double_backward_equals_f_layer_norm(device):
    """Grad mode on in backward (create_graph): the recompute stays on the saved tensors' graph."""
    x, w, b = _inputs(device, True, True, (True, True, True))
    out = []
    for fn in (F.layer_norm, layer_norm):
        y = fn(x, (16,), w, b, 1e-5)
        gx, gw = torch.autograd.grad((y * y).sum(), [x, w], create_graph=True)
        out.append(torch.autograd.grad(gx.pow(2).sum() + gw.sum(), [x, w, b]))
    tol = SECOND_ORDER_TOL if device.type == "xla" else {}
    for r, g in zip(*out, strict=True):
        torch.testing.assert_close(g.cpu(), r.cpu(), **tol)


@pytest.mark.xla
def test_on_xla_it_keeps_the_input_and_no_normalized_copy(xla_device):
    """Stock on XLA: a view of the input and x_hat (two input-sized buffers); corrected: the input."""
    x, w, b = _inputs(xla_device, True, True, (True, True, True))
    w, b = torch.nn.Parameter(w.detach()), torch.nn.Parameter(b.detach())  # parameters: not counted
    h = x * 2  # an activation (not a leaf), as a model's
    kept = {}
    for name, fn in (("stock", F.layer_norm), ("corrected", layer_norm)):
        with xla_ckpt.saved_activations() as report:
            fn(h, (16,), w, b, 1e-5)
        kept[name] = report.nbytes
    size = h.numel() * h.element_size()
    assert kept["corrected"] == size, kept
    assert kept["stock"] >= 2 * size, kept  # the bytes the correction removes (pytorch/xla's decomposition)
