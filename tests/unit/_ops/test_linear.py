"""The corrected linear: same results as F.linear, and autograd keeps the weight itself."""

from __future__ import annotations

import copy
import itertools
import pickle
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import OpCounter, assert_same, grads_of

aten = torch.ops.aten

# Under autocast both F.linear and ours compute the weight grad in the low-precision dtype and cast
# it up; the two may block the same dot products differently, so agreement is to the low dtype's
# precision, not fp32's.
AUTOCAST_TOL = dict(rtol=1.6e-2, atol=1e-3)

RANKS = [1, 2, 3, 4]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (bias?, (input, weight, bias) requires_grad): every combination where something needs a grad.
BIAS_RG = [
    (bias, rg)
    for bias in (True, False)
    for rg in itertools.product([True, False], repeat=3)
    if (rg[0] or rg[1] or (bias and rg[2])) and (bias or not rg[2])
]


def _make(device, rank, bias, dtype, rg, noncontig=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = [3, 2, 5][: rank - 1] + [6]
    # Non-contiguous: every other element of a wider tensor (stride 2 in the last dim).
    x = torch.randn(shape + [2] if noncontig else shape, generator=g)
    w = torch.randn(4, 6, generator=g)
    b = torch.randn(4, generator=g) if bias else None
    x = x.to(device, dtype)
    if noncontig:
        x = x[..., 0]
        assert device.type == "xla" or not x.is_contiguous()
    x.requires_grad_(rg[0])
    w = nn.Parameter(w.to(device, dtype), requires_grad=rg[1])
    if b is not None:
        b = nn.Parameter(b.to(device, dtype), requires_grad=rg[2])
    return x, w, b


def _check(device, rank, bias, dtype, rg, noncontig=False):
    x, w, b = _make(device, rank, bias, dtype, rg, noncontig)
    tensors = [t for t in (x, w, b) if t is not None]
    ref = grads_of(lambda *_: F.linear(x, w, b), [], tensors)
    got = grads_of(lambda *_: xla_ckpt.linear(x, w, b), [], tensors)
    assert_same(ref, got, names=["input", "weight", "bias"][: len(tensors)])


@pytest.mark.parametrize("rank", RANKS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "bias, rg", BIAS_RG, ids=lambda v: v if isinstance(v, bool) else "rg" + "".join("1" if x else "0" for x in v)
)
def test_matches_f_linear_cpu(rank, bias, dtype, rg):
    _check(torch.device("cpu"), rank, bias, dtype, rg)


@pytest.mark.xla
@pytest.mark.parametrize("rank", RANKS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_f_linear_xla(xla_device, rank, bias, dtype):
    _check(xla_device, rank, bias, dtype, (True, True, True))


@pytest.mark.xla
@pytest.mark.parametrize("rg", [(False, True, True), (True, False, False), (True, True, False)], ids=str)
def test_requires_grad_combos_xla(xla_device, rg):
    _check(xla_device, 3, True, torch.float32, rg)


@pytest.mark.parametrize("rank", [2, 3, 4])
def test_non_contiguous_input(device, rank):
    _check(device, rank, True, torch.float32, (True, True, True), noncontig=True)


@pytest.mark.parametrize(
    "rg, expected_mm",
    [((True, True, True), 2), ((True, False, True), 1), ((False, True, True), 1), ((False, False, True), 0)],
)
def test_no_wasted_grad_work(rg, expected_mm):
    x, w, b = _make(torch.device("cpu"), 3, True, torch.float32, rg)
    y = xla_ckpt.linear(x, w, b)
    with OpCounter() as counter:
        y.backward(torch.ones_like(y))
    assert counter.count(aten.mm, aten.matmul, aten.bmm, aten.addmm) == expected_mm
    assert (x.grad is None) != rg[0] and (w.grad is None) != rg[1] and (b.grad is not None)


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("bias, rg", BIAS_RG)
def test_keeps_what_f_linear_keeps(rank, bias, rg):
    """Autograd keeps the input only when the weight needs a grad and the weight only when the input does
    (addmm/mm save mat1 for mat2's grad and mat2 for mat1's). A frozen weight (a LoRA base layer) keeps no
    input: the same bytes as F.linear, entry by entry (bytes, kind)."""
    x, w, b = _make(torch.device("cpu"), rank, bias, torch.float32, rg)

    def kept(f):
        with xla_ckpt.saved_activations() as report:
            f(x, w, b)
        # (bytes, is a parameter) per entry: F.linear keeps a rank-3 input as its 2-D view, the same buffer.
        return report.nbytes, sorted((e.nbytes, e.kind != "activation") for e in report.entries)

    ref, got = kept(F.linear), kept(xla_ckpt.linear)
    assert got[0] == ref[0], f"kept {got[0]} bytes, F.linear {ref[0]}"
    if not rg[1]:
        assert got[0] == 0 and all(kind for _, kind in got[1]), got  # frozen weight: no activation kept
    assert [s for s, k in got[1] if not k] == [s for s, k in ref[1] if not k]


def _saved_weight_stock(y):
    """What stock F.linear's grad node keeps in place of the weight."""
    node = y.grad_fn
    while node is not None and not hasattr(node, "_saved_mat2"):
        node = node.next_functions[0][0]
    return node._saved_mat2


def test_saves_the_weight_itself(device):
    lin = nn.Linear(6, 4).to(device)
    x = torch.randn(5, 6, device=device, requires_grad=True)
    y_stock = lin(x)
    stock = _saved_weight_stock(y_stock)
    # Stock: a transposed tensor of shape (in, out), not the parameter object.
    assert stock is not lin.weight and tuple(stock.shape) == (6, 4)
    if device.type == "xla":
        import torch_xla

        # On XLA it is a separate tensor with its own id: its own device buffer.
        ids = torch_xla._XLAC._xla_get_tensor_id
        assert ids(stock) != ids(lin.weight)
    y = xla_ckpt.linear(x, lin.weight, lin.bias)
    saved = y.grad_fn.saved_tensors
    assert saved[1] is lin.weight


@pytest.mark.parametrize("impl", ["stock", "ours"])
def test_fsdp_free_and_regather(device, impl):
    """After forward, free the weight and restore different values: backward must use the new ones."""
    g = torch.Generator().manual_seed(1)
    lin = nn.Linear(6, 4).to(device)
    x = torch.randn(5, 6, generator=g).to(device).requires_grad_()
    new_w = torch.randn(4, 6, generator=g)
    fn = lin if impl == "stock" else xla_ckpt.Linear.from_linear(lin)
    y = fn(x)
    full = lin.weight.data
    lin.weight.data = full.new_zeros(1)  # FSDP frees the full weight after forward
    lin.weight.data = new_w.to(device)  # ... and re-gathers it (here: other values) before backward
    cot = torch.ones(5, 4)
    y.backward(cot.to(device))
    expected = cot @ new_w
    if impl == "stock":
        # The observed upstream bug: backward reads the stale transposed copy saved in forward.
        torch.testing.assert_close(x.grad.cpu(), cot @ full.cpu())
    else:
        torch.testing.assert_close(x.grad.cpu(), expected)


@pytest.mark.parametrize("rank", [2, 3])
def test_autocast_keeps_full_precision_weight(device, rank):
    dtype = torch.bfloat16
    g = torch.Generator().manual_seed(0)
    lin = nn.Linear(6, 4).to(device)
    x = torch.randn([3, 5, 6][-rank:], generator=g).to(device).requires_grad_()
    tensors = [x, lin.weight, lin.bias]
    with torch.autocast(device.type, dtype=dtype):
        y = xla_ckpt.linear(x, lin.weight, lin.bias)
        y_ref = F.linear(x, lin.weight, lin.bias)
    assert y.dtype == y_ref.dtype == dtype
    saved = y.grad_fn.saved_tensors
    assert saved[1] is lin.weight and saved[1].dtype == torch.float32
    assert not any(s.dtype == dtype and tuple(s.shape) == tuple(lin.weight.shape) for s in saved)

    def run(f):
        with torch.autocast(device.type, dtype=dtype):
            return f(x, lin.weight, lin.bias)

    ref = grads_of(lambda: run(F.linear), [], tensors)
    got = grads_of(lambda: run(xla_ckpt.linear), [], tensors)
    assert_same(ref, got, names=["input", "weight", "bias"], **AUTOCAST_TOL)


def test_double_backward(device):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 5, 6, generator=g).to(device).requires_grad_()
    w = torch.randn(4, 6, generator=g).to(device).requires_grad_()
    b = torch.randn(4, generator=g).to(device).requires_grad_()
    cot = torch.randn(3, 5, 4, generator=g).to(device)

    def second_order(f):
        y = f(x, w, b)
        (gx, gw) = torch.autograd.grad((y * cot).sum(), (x, w), create_graph=True)
        penalty = (gx**2).sum() + (gw**3).sum()
        return torch.autograd.grad(penalty, (x, w, b), allow_unused=True)

    ref = second_order(F.linear)
    got = second_order(xla_ckpt.linear)
    for name, r, o in zip("xwb", ref, got, strict=True):
        if r is None:
            assert o is None or torch.count_nonzero(o.cpu()) == 0, name
        else:
            assert o is not None, name
            torch.testing.assert_close(o.cpu(), r.cpu(), msg=lambda m, n=name: f"{n}: {m}")


class Custom(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Sequential(nn.Linear(8, 8), Custom(8, 4)))


def test_patch_linear_in_place():
    model = _model()
    keys = list(model.state_dict())
    x = torch.randn(3, 6)
    ref = grads_of(model, [x], list(model.parameters()))
    with pytest.warns(UserWarning, match=r"2\.1 \(.*Custom\)"):
        assert xla_ckpt.patch_linear(model) is model
    assert list(model.state_dict()) == keys
    y = model[0](x)
    assert type(y.grad_fn).__name__.startswith("_LinearFunction")
    got = grads_of(model, [x], list(model.parameters()))
    assert_same(ref, got)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # idempotent: nothing re-wrapped, the same notice not repeated
        xla_ckpt.patch_linear(model)
    clone = copy.deepcopy(model)
    assert clone[0].forward.module is clone[0]
    restored = pickle.loads(pickle.dumps(model))
    assert type(restored[0](x).grad_fn).__name__.startswith("_LinearFunction")
    xla_ckpt.unpatch_linear(model)
    assert "forward" not in model[0].__dict__
    assert type(model[0](x).grad_fn).__name__ == "AddmmBackward0"


def test_patch_root_linear():
    lin = nn.Linear(3, 2)
    xla_ckpt.patch_linear(lin)
    assert type(lin(torch.randn(1, 3)).grad_fn).__name__.startswith("_LinearFunction")


def test_from_linear_shares_parameters():
    lin = nn.Linear(6, 4)
    ours = xla_ckpt.Linear.from_linear(lin)
    assert ours.weight is lin.weight and ours.bias is lin.bias
    assert list(ours.state_dict()) == list(lin.state_dict())
    x = torch.randn(2, 6)
    torch.testing.assert_close(ours(x), lin(x))


def test_linear_patched_restores_even_on_error():
    original = F.linear
    with pytest.raises(RuntimeError, match="boom"):
        with xla_ckpt.linear_patched():
            assert F.linear is xla_ckpt.linear
            with xla_ckpt.linear_patched():
                assert F.linear is xla_ckpt.linear
            assert F.linear is xla_ckpt.linear
            raise RuntimeError("boom")
    assert F.linear is original
    lin = nn.Linear(3, 2)
    with xla_ckpt.linear_patched():
        assert type(lin(torch.randn(1, 3)).grad_fn).__name__.startswith("_LinearFunction")
    assert type(lin(torch.randn(1, 3)).grad_fn).__name__ == "AddmmBackward0"


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="2-D weight"):
        xla_ckpt.linear(torch.randn(3), torch.randn(3))
