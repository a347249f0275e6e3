"""saved_activations(): exact bytes; weights_by_reference(): no parameter copies, live weights in backward."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt._hooks import saved as _saved
from xla_ckpt.models import Block, GPTConfig

B, D, H, OUT = 5, 8, 16, 4
F32 = 4
# Under autocast both runs compute in bf16 with the same ops, but weight casts re-derived in
# backward (ours) vs cached from forward (stock) may take another kernel path: bf16 precision.
AUTOCAST_TOL = dict(rtol=1.6e-2, atol=1e-2)


def _mlp(device):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, H), nn.GELU(), nn.Linear(H, OUT)).to(device)


def _no_hooks_left():
    assert _saved.state.ledgers == [] and _saved.state.by_reference == 0
    assert _saved.state.region is None and _saved.state.recompute is None
    assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None
    from torch.nn.modules import module as m

    assert not m._global_forward_pre_hooks and not m._global_forward_hooks


@pytest.mark.parametrize("variant", ["stock", "ours", "stock+by_reference"])
def test_exact_bytes(device, variant):
    model = _mlp(device)
    x = torch.randn(B, D, device=device, requires_grad=True)
    if variant == "ours":
        xla_ckpt.patch_linear(model)
    activations = F32 * (B * D + B * H + B * H)  # x, pre-GELU h, GELU output
    weight_copies = F32 * (D * H + H * OUT)  # the transposed weights stock linear saves
    with xla_ckpt.saved_activations() as report:
        if variant == "stock+by_reference":
            with xla_ckpt.weights_by_reference():
                y = model(x)
        else:
            y = model(x)
    # Eager: the transposes are views of the parameters (no memory); XLA: t_copy buffers.
    expected = activations + (weight_copies if (variant == "stock" and device.type == "xla") else 0)
    assert report.nbytes == expected, str(report)
    kinds = [e.kind for e in report.entries]
    if variant == "stock":
        assert kinds.count("parameter copy") == 2
    else:
        assert "parameter copy" not in kinds
        assert kinds.count("parameter") == 2
    copies = expected > activations
    assert report.by_module() == {
        "0": F32 * (B * D + (D * H if copies else 0)),  # Linear 0 saves x (and its weight copy)
        "1": F32 * B * H,  # GELU saves its input
        "2": F32 * (B * H + (H * OUT if copies else 0)),  # Linear 2 saves the GELU output
    }
    y.sum().backward()
    _no_hooks_left()


@pytest.mark.xla
def test_xla_stock_copies_disappear_by_reference(xla_device):
    model = _mlp(xla_device)
    x = torch.randn(B, D, device=xla_device, requires_grad=True)
    with xla_ckpt.saved_activations() as stock:
        model(x)
    copies = [e for e in stock.entries if e.kind == "parameter copy"]
    assert sorted(e.shape for e in copies) == [(D, H), (H, OUT)]
    assert all(e.grad_fn == "TBackward0" and e.device.type == "xla" for e in copies)
    with xla_ckpt.saved_activations() as ours, xla_ckpt.weights_by_reference():
        model(x)
    assert not [e for e in ours.entries if e.kind == "parameter copy"]
    assert stock.nbytes - ours.nbytes == sum(e.nbytes for e in copies) == F32 * (D * H + H * OUT)


def test_report_summaries_and_table():
    model = _mlp("cpu")
    x = torch.randn(B, D, requires_grad=True)
    with xla_ckpt.saved_activations() as report:
        xla_ckpt.tag(model[0](x), "up")
    text = str(report)
    assert "total kept for backward" in text and "by module" in text
    assert report.by_op() == {"": F32 * B * D}
    assert report.by_module() == {"": F32 * B * D}  # model[0] called directly is the root
    with xla_ckpt.saved_activations() as report:
        h = xla_ckpt.tag(model[0](x), "up")
        F.gelu(h)
    assert [e.tag for e in report.entries if e.grad_fn == "AddmmBackward0"] == ["up"]


def _transformer(device):
    torch.manual_seed(0)
    return Block(GPTConfig(d_model=32, n_head=4, seq_len=8)).to(device)


@pytest.mark.parametrize("autocast", [False, True])
def test_block_grads_by_reference(device, autocast):
    block = _transformer(device)
    x = torch.randn(2, 8, 32, device=device, requires_grad=True)
    params = list(block.parameters())

    def run(by_ref):
        def fn(inp):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                if by_ref:
                    with xla_ckpt.weights_by_reference():
                        return block(inp).float()
                return block(inp).float()

        return fn

    ref = grads_of(run(False), [x], params)
    got = grads_of(run(True), [x], params)
    assert_same(ref, got, **(AUTOCAST_TOL if autocast else {}))


@pytest.mark.parametrize("by_reference", [False, True])
def test_poisoned_weights(device, by_reference):
    """After forward every parameter gets new values: backward must use them (by reference only)."""
    model = _mlp(device)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(B, D, generator=g).to(device).requires_grad_()
    cot = torch.randn(B, OUT, generator=g).to(device)
    with xla_ckpt.weights_by_reference() if by_reference else torch.enable_grad():
        y = model(x)
    old = {n: p.detach().clone() for n, p in model.named_parameters()}
    new = {n: torch.randn(p.shape, generator=g).to(device) for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        p.data = new[n]  # FSDP-style swap of the parameter's data
    y.backward(cot)

    # Reference by hand: activations from forward (old weights), weights from backward (new).
    W1, W2 = (new if by_reference else old)["0.weight"], (new if by_reference else old)["2.weight"]
    h = F.linear(x.detach(), old["0.weight"], old["0.bias"]).requires_grad_()
    a = F.gelu(h)
    d = torch.autograd.grad(a, h, cot @ W2)[0]
    torch.testing.assert_close(model[2].weight.grad.cpu(), (cot.t() @ a.detach()).cpu())
    torch.testing.assert_close(model[0].weight.grad.cpu(), (d.t() @ x.detach()).cpu())
    torch.testing.assert_close(x.grad.cpu(), (d @ W1).cpu())
    if by_reference:
        assert not torch.equal(new["0.weight"].cpu(), old["0.weight"].cpu())


def test_hooks_removed_on_error():
    with pytest.raises(RuntimeError, match="inside"):
        with xla_ckpt.saved_activations():
            with xla_ckpt.weights_by_reference():
                raise RuntimeError("inside")
    _no_hooks_left()


def test_by_reference_holds_no_parameter_sized_tensor():
    """A packed copy keeps the parameter object and shape-only steps: no tensor of its own."""
    w = nn.Parameter(torch.randn(H, D))
    copy = w.to(torch.bfloat16).t()
    with xla_ckpt.weights_by_reference():
        packed = _saved._pack(copy)
    assert isinstance(packed, _saved._ByReference) and packed.source.param is w
    held = [c.cell_contents for step in packed.source.steps for c in (getattr(step, "__closure__", None) or ())]
    assert not any(isinstance(v, torch.Tensor) for v in held)
    del copy
    out = _saved._unpack(packed)
    assert out.dtype == torch.bfloat16 and out.shape == (D, H)
    torch.testing.assert_close(out, w.detach().to(torch.bfloat16).t())


@pytest.mark.parametrize("context", ["saved_activations", "weights_by_reference"])
def test_hooks_keep_autograds_inplace_check(context):
    """Autograd skips its version check for tensors that pass through saved-tensor hooks: ours make it,
    so a saved activation modified in place raises as in plain autograd (it returned a wrong grad)."""
    lin_a, lin_b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)
    x = torch.randn(4, 8, requires_grad=True)

    def forward():
        h = torch.sigmoid(lin_a(x))  # sigmoid saves its output...
        h.mul_(2.0)  # ...which is then written in place
        return lin_b(h)

    with pytest.raises(RuntimeError, match="modified by an inplace operation") as plain:
        forward().pow(2).sum().backward()
    with getattr(xla_ckpt, context)():
        y = forward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*SigmoidBackward0.*version 1"):
        y.pow(2).sum().backward()
    assert "version 1" in str(plain.value)


def _small_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))


@pytest.mark.parametrize("policy", [None, "nothing_saveable", "dots_saveable"])
def test_report_around_a_compiled_model(policy):
    """saved_activations() around torch.compile: no crash (the module hooks mutated a thread-local stack
    while Dynamo traced: "already tracked for mutation"); it reports what the compiled graph keeps."""
    import torch._dynamo

    x = torch.randn(4, 8, requires_grad=True)
    eager = _small_mlp()
    ref = grads_of(lambda: eager(x), [], [x, *eager.parameters()])
    model = _small_mlp()
    if policy is not None:
        xla_ckpt.checkpointed(model, policy=policy)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's "global hooks" notice, old torch's lowering one
        with xla_ckpt.saved_activations() as kept:
            got = grads_of(lambda: compiled(x), [], [x, *model.parameters()])
    assert_same(ref, got)
    # The compiled graph keeps: plain, the first Linear's and GELU's outputs (16 floats a row) and x;
    # nothing_saveable, x alone; dots_saveable, x and the first matmul's output.
    expected = {None: (16 + 16 + 8), "nothing_saveable": 8, "dots_saveable": 16 + 8}[policy] * 4 * 4
    assert kept.nbytes == expected, str(kept)
    assert set(kept.by_op()) == {"<compiled graph>"} and "<compiled graph>: kept by a torch.compile-d" in str(kept)
