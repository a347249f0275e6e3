"""Vision and diffusion models: the blocks of every stage, a model's own checkpointing off
(timm's too), never recomputed twice, and the model table of docs/vision.md exact on CPU and XLA."""

from __future__ import annotations

from helpers import ROOT_DIR

import copy
import importlib.util
import os
import sys
import warnings

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import OpCounter, loss_grads
from xla_ckpt._api.blocks import blocks_left_out
from xla_ckpt._base.warn import forgetting

sys.path.insert(0, os.path.join(ROOT_DIR, "bench"))
import vision  # noqa: E402  (bench/ is scripts, not a package)


WITHOUT = ("not installed: `pip install -e '.[vision]'` (make install does; the newest-torch venv goes without it, "
           "see pyproject.toml)")


def _need(*mods: str) -> None:
    for mod in mods:
        pytest.importorskip(mod, reason=f"{mod} {WITHOUT}")


@pytest.fixture(autouse=True)
def _fresh_warnings():
    with forgetting():
        yield


class Basic(nn.Module):
    """A ResNet basic block: two 3x3 convs with BatchNorm, a projected shortcut when the width changes."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout)
        self.short = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + self.short(x))


class Staged(nn.Module):
    """Four stages of two blocks each, every stage its own Sequential at its own width (ResNet's layout),
    and one more block of the same class held alone (``tail``): found by class, left out, reported."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        widths = [8, 8, 16, 16, 32]
        for i in range(4):
            setattr(self, f"layer{i + 1}", nn.Sequential(Basic(widths[i], widths[i + 1]),
                                                         Basic(widths[i + 1], widths[i + 1])))
        self.tail = Basic(32, 32)
        self.head = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for i in range(4):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.head(self.tail(x).mean((2, 3)))


class _Expert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(4, 8), nn.Linear(8, 4)


class _MoELayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.Linear(4, 4)
        self.experts = nn.ModuleList([_Expert() for _ in range(4)])


def _grads(model: nn.Module, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    loss, grads = loss_grads(lambda: model(x).square().mean(), list(model.parameters()), seed=5)
    assert all(g is not None for g in grads)
    return loss, grads


def test_find_blocks_takes_every_stage_and_reports_what_it_left_out():
    torch.manual_seed(0)
    model = Staged().train()
    blocks = xla_ckpt.find_blocks(model)
    assert blocks == [f"layer{s}.{i}" for s in range(1, 5) for i in range(2)], blocks  # not layer1 alone
    ref = copy.deepcopy(model)
    report = xla_ckpt.apply(model, "full")
    assert [w.name for w in report.wrapped] == blocks
    assert report.blocks_left_out == [
        "tail (Basic): not held in a ModuleList / Sequential of its class alone; select it with a 'match' rule"]
    assert "left out by blocks = true: tail (Basic)" in str(report)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    with xla_ckpt.saved_activations() as plain:
        ref_loss, ref_grads = _grads(ref, x)
    with xla_ckpt.saved_activations() as kept:
        loss, grads = _grads(model, x)
    torch.testing.assert_close(loss, ref_loss)
    for a, b in zip(ref_grads, grads, strict=True):
        torch.testing.assert_close(b, a)
    for (n, a), (_, b) in zip(ref.named_buffers(), model.named_buffers(), strict=True):
        torch.testing.assert_close(b, a, msg=n)  # BatchNorm statistics moved once
    assert kept.nbytes < 0.6 * plain.nbytes, (kept.nbytes, plain.nbytes)
    # A stack of identical blocks is the unit, not the lists inside each (MoE experts): unchanged.
    moe = nn.ModuleList([_MoELayer() for _ in range(2)])
    assert xla_ckpt.find_blocks(moe) == ["0", "1"]  # not the 8 experts


def test_find_blocks_timm_staged_models():
    _need("timm")
    import timm
    for name, count, cls in [("resnet18", 8, "BasicBlock"), ("convnext_atto", 12, "ConvNeXtBlock"),
                             ("efficientnet_b0", 15, "InvertedResidual")]:
        model = timm.create_model(name, pretrained=False)
        blocks = xla_ckpt.find_blocks(model)
        assert len(blocks) == count and {type(model.get_submodule(b)).__name__ for b in blocks} == {cls}, blocks
    left = blocks_left_out(model)  # EfficientNet's first stage holds one block of another class
    assert len(left) == 1 and left[0].startswith("blocks.0.0 (1 x DepthwiseSeparableConv)"), left


def test_timm_checkpointing_is_turned_off_by_apply():
    _need("timm")
    base, batch, loss_fn = vision.timm_vit()
    model = copy.deepcopy(base)
    model.set_grad_checkpointing(True)
    with pytest.warns(UserWarning, match=r"apply: timm gradient checkpointing was on for VisionTransformer"):
        report = xla_ckpt.apply(model, "full")
    assert model.grad_checkpointing is False and report.own_checkpointing_off == [""]
    ref = vision.step(copy.deepcopy(base), batch, loss_fn, torch.device("cpu"))
    vision.compare(ref, vision.step(model, batch, loss_fn, torch.device("cpu")))


@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non_reentrant"])
def test_checkpointed_twice_is_recomputed_once(reentrant):
    """timm's checkpointing turned on after apply: its checkpoint_seq wraps our blocks. They run plainly
    inside torch's checkpoint (recomputed once, by torch), its flag is turned off, and from the next step
    on only xla_ckpt recomputes. Matmuls in backward: no more than either alone."""
    _need("timm")
    from timm.layers import set_reentrant_ckpt, use_reentrant_ckpt

    base, batch, loss_fn = vision.timm_vit()
    mm = (torch.ops.aten.mm, torch.ops.aten.addmm, torch.ops.aten.bmm)

    def backward_matmuls(model: nn.Module) -> tuple[int, tuple]:
        torch.manual_seed(5)
        loss = loss_fn(model, batch)
        with OpCounter() as ops:
            loss.backward()
        out = (loss.detach(), [p.grad.clone() for p in model.parameters()])
        model.zero_grad()
        return ops.count(*mm), out

    before = use_reentrant_ckpt()
    set_reentrant_ckpt(reentrant)
    try:
        plain, ref = backward_matmuls(copy.deepcopy(base))
        timm_only = copy.deepcopy(base)
        timm_only.set_grad_checkpointing(True)
        by_timm, _ = backward_matmuls(timm_only)
        ours = copy.deepcopy(base)
        xla_ckpt.apply(ours, "full")
        by_us, _ = backward_matmuls(ours)
        both = copy.deepcopy(base)
        xla_ckpt.apply(both, "full")
        both.set_grad_checkpointing(True)  # after apply: seen at the first call
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first, got = backward_matmuls(both)
        second, got2 = backward_matmuls(both)
    finally:
        set_reentrant_ckpt(before)
    assert plain < by_us and plain < by_timm, (plain, by_us, by_timm)  # each recomputes something
    assert first == by_timm and second == by_us, (first, second, by_timm, by_us)
    assert both.grad_checkpointing is False
    notices = [str(w.message) for w in caught if "timm gradient checkpointing was on" in str(w.message)]
    assert len(notices) == 1 and "checkpointed:" in notices[0], [str(w.message) for w in caught]
    for out in (got, got2):
        torch.testing.assert_close(out[0], ref[0])
        for a, b in zip(ref[1], out[1], strict=True):
            torch.testing.assert_close(b, a)


@pytest.mark.slow
def test_model_table_is_exact():
    """docs/vision.md's table (bench/vision.py): ``full`` and ``megatron_selective`` on every model equal
    the unwrapped model on CPU (loss, grads, buffers: BatchNorm's cumulative average too) and keep fewer
    bytes; timm's ResNet also on XLA:CPU. ``names`` keeps what ``full`` keeps on these untagged models,
    ``fsdp_xla`` and ``dots`` run the same blocks with other policies: the table has them, this test
    leaves them out (CI time: 30 s here at load 4)."""
    _need("timm", "diffusers", "transformers")
    presets = ("full", "megatron_selective")
    for name in vision.MODELS:
        cells = vision.row(name, torch.device("cpu"), presets=presets, own=False)
        for preset in presets:
            ratio = float(cells[preset].split(" / x")[1].split(" ")[0])
            assert ratio < 1, (name, preset, cells[preset])
    if importlib.util.find_spec("torch_xla") is not None:  # conftest set it up before any backward
        import torch_xla

        cells = vision.row("timm_resnet", torch_xla.device(), presets=("full",))
        assert float(cells["full"].split(" / x")[1].split(" ")[0]) < 1, cells


def test_a_buffer_the_forward_grows_by_assignment_is_exact():
    """A buffer the forward replaces by assignment and reads (``self.seen = cat(...)``): the recompute runs
    with the tensors the module's slots held as the forward started (``_engine/members.py``), so values,
    grads and the buffer after the step equal the plain step's (a CheckpointError naming the cause before)."""

    class Growing(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("seen", torch.ones(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.seen = torch.cat([self.seen, torch.ones(1)])
            return self.lin(x).tanh() * self.seen.sum()

    torch.manual_seed(0)
    plain, x = Growing(), torch.randn(2, 4)
    model = xla_ckpt.checkpointed(copy.deepcopy(plain))
    y_ref, y = plain(x), model(x)
    y_ref.sum().backward()
    y.sum().backward()
    torch.testing.assert_close(y, y_ref)
    for (name, p), (_, q) in zip(plain.named_parameters(), model.named_parameters(), strict=True):
        assert q.grad is not None, name
        torch.testing.assert_close(q.grad, p.grad)
    torch.testing.assert_close(model.seen, plain.seen)
