"""Tensors from outside a region modified or replaced between forward and backward (``_engine.outside``).

Plain autograd raises for a tensor it saved and then saw modified; a region's recompute reads the
tensor again, so without a check it would silently use the new value. Each case: the same error
as plain autograd, or the plain run's gradients exactly, or a CheckpointError naming the tensor and
the op that reads it; never other numbers. The differential fuzz draws the same class (``AFTER``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import xla_ckpt
from helpers import assert_same, grads_of, sync
from switches import general_replay

# XLA:CPU compiles the checkpointed and the plain step into different graphs (fusion rounding).
XLA_TOL = {"rtol": 1e-5, "atol": 1e-5}


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)).sin()


def _step(block: Block, x: torch.Tensor, policy: str | None, modify: str, device: torch.device):
    """Forward (checkpointed under ``policy``, or plain), modify ``lin.<modify>`` in place, backward."""
    y = block(x) if policy is None else xla_ckpt.checkpoint(block, x, policy=policy)
    with torch.no_grad():
        getattr(block.lin, modify).mul_(2.0)
    y.sum().backward()
    sync(device)
    return [x.grad.cpu()] + [p.grad.cpu() for p in block.parameters()]


def _fresh(device: torch.device) -> tuple[Block, torch.Tensor]:
    torch.manual_seed(0)
    return Block().to(device), torch.randn(4, 8).to(device).requires_grad_()  # the CPU generator: same x


@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
def test_a_saved_weight_modified_after_forward_raises_as_plain_autograd_does(device, policy):
    block, x = _fresh(device)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _step(block, x, None, "weight", device)  # plain autograd: addmm saved the weight
    block, x = _fresh(device)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"parameter 'lin\.weight'.*modified in place after the forward"):
        _step(block, x, policy, "weight", device)


def test_a_bias_read_by_a_recomputed_op_raises_naming_it(device):
    """Plain autograd never saved the bias, but the recompute of addmm would read its new value."""
    block, x = _fresh(device)
    plain = _step(block, x, None, "bias", device)
    assert all(g is not None for g in plain)
    block, x = _fresh(device)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"parameter 'lin\.bias', read by aten\.addmm"):
        _step(block, x, "nothing_saveable", "bias", device)


def test_a_bias_only_a_saved_op_read_keeps_the_plain_gradients(device):
    """dots_saveable keeps addmm's output: nothing in backward reads the bias, so no error."""
    block, x = _fresh(device)
    plain = _step(block, x, None, "bias", device)
    block, x = _fresh(device)
    got = _step(block, x, "dots_saveable", "bias", device)
    for i, (g, r) in enumerate(zip(got, plain, strict=True)):
        torch.testing.assert_close(g, r, msg=lambda m, i=i: f"grad {i}: {m}",
                                   **(XLA_TOL if device.type == "xla" else {}))


def test_unmodified_parameters_pass_and_a_second_backward_still_works(device):
    block, x = _fresh(device)
    ref = grads_of(block, [x], list(block.parameters()))
    block, x = _fresh(device)
    y = xla_ckpt.checkpoint(block, x, policy="nothing_saveable")
    y.sum().backward(retain_graph=True)
    y.sum().backward()  # replays again: the versions it checks are still the forward's
    sync(device)
    block2, x2 = _fresh(device)
    got = grads_of(lambda t: xla_ckpt.checkpoint(block2, t, policy="nothing_saveable"), [x2], list(block2.parameters()))
    assert_same(ref, got, **(XLA_TOL if device.type == "xla" else {}))
    assert x.grad is not None


class Shifted(nn.Module):
    """Reads a plain tensor attribute (no parameter, no buffer): a cache the caller may replace."""

    def __init__(self, device: torch.device, value: float = 0.5) -> None:
        super().__init__()
        self.shift = torch.full((8,), value, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x + self.shift)  # add saves nothing: only the recompute reads the shift


def _replaced(device: torch.device, value: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x.grad of the plain run, and of the checkpointed run whose shift is replaced by ``value`` after forward."""
    grads = []
    for policy in (None, "nothing_saveable"):
        torch.manual_seed(0)
        m = Shifted(device)
        x = torch.randn(4, 8).to(device).requires_grad_()
        y = m(x) if policy is None else xla_ckpt.checkpoint(m, x, policy=policy)
        m.shift = torch.full((8,), value, device=device)  # replaced, not modified: no version moves
        y.sum().backward()
        sync(device)
        grads.append(x.grad.cpu())
    return grads[0], grads[1]


def test_a_replaced_outside_tensor_is_an_error_not_a_new_value(device):
    """Eager replays fn, which reads the new tensor: an error. XLA replays the recorded program
    (``_engine.direct``), which reads the forward's tensor as autograd would: the plain gradient."""
    if device.type == "xla":
        plain, got = _replaced(device, 2.0)
        torch.testing.assert_close(got, plain, **XLA_TOL)
        return
    with pytest.raises(xla_ckpt.CheckpointError, match=r"aten\.add.*values differ from the forward's"):
        _replaced(device, 2.0)


@pytest.mark.xla
def test_the_general_replay_on_xla_also_refuses_a_replaced_tensor(xla_device):
    with pytest.raises(xla_ckpt.CheckpointError, match=r"aten\.add.*values differ from the forward's"), general_replay():
        _replaced(xla_device, 2.0)


def test_an_outside_tensor_replaced_by_equal_values_is_accepted(device):
    """A constant made afresh with the same values (``torch.tensor([...])`` in fn) is no error."""
    plain, got = _replaced(device, 0.5)
    torch.testing.assert_close(got, plain, **(XLA_TOL if device.type == "xla" else {}))


def test_a_saved_constant_built_from_changing_python_state_is_the_forwards():
    """``torch.tensor([k])`` from a counter, saved by index_select's backward: the gradient goes to
    the row the forward selected (autograd's saved tensor), not the one a replay would build."""
    for policy in (None, "nothing_saveable"):
        calls = iter(range(100))

        def fn(x: torch.Tensor, calls=calls) -> torch.Tensor:
            idx = torch.tensor([next(calls) % 4])
            return torch.sin(x.index_select(0, idx))

        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
        (fn(x) if policy is None else xla_ckpt.checkpoint(fn, x, policy=policy)).sum().backward()
        assert x.grad is not None and x.grad[0].abs().sum() > 0 and x.grad[1:].abs().sum() == 0, policy


def test_a_norm_writing_its_own_running_statistics_is_not_an_error(device):
    """fn's own in-place writes to a buffer (BatchNorm's running statistics) are not the caller's."""
    torch.manual_seed(0)
    bn = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)).to(device).train()
    x = torch.randn(4, 8).to(device).requires_grad_()
    ref = grads_of(bn, [x], list(bn.parameters()))
    got = grads_of(lambda t: xla_ckpt.checkpoint(bn, t, policy="nothing_saveable"), [x], list(bn.parameters()))
    assert_same(ref, got, **(XLA_TOL if device.type == "xla" else {}))


def test_modules_wrapped_by_apply_name_their_parameters(device):
    """``apply`` checkpoints ``partial(type(m).forward, m)``: the parameters are still the module's."""
    model = nn.Sequential(Block()).to(device)
    xla_ckpt.apply(model, {"checkpoint": [{"match": ["0"], "policy": "nothing_saveable"}]})
    x = torch.randn(4, 8).to(device).requires_grad_()
    y = model(x)
    with torch.no_grad():
        model[0].lin.bias.add_(1.0)
    with pytest.raises(xla_ckpt.CheckpointError, match=r"parameter 'lin\.bias'.*checkpointed function 'Block\.forward'"):
        y.sum().backward()
        sync(device)


VIEWS = {"view": lambda c: c.view(1, 8), "expand": lambda c: c.expand(4, 8), "slice_of_t": lambda c: c.t()[1:].sum(0)}


def _closure_read_through(device: torch.device, view: str, scale: float, replay) -> tuple[torch.Tensor, torch.Tensor]:
    """x.grad plain and checkpointed, fn reading a closure tensor through ``view`` in an op autograd
    saves nothing of, the tensor multiplied by ``scale`` in place after the forward (1: left alone)."""
    grads = []
    for policy in (None, "nothing_saveable"):
        torch.manual_seed(0)
        c = torch.randn(8, 8 if view == "slice_of_t" else 1).squeeze(-1).to(device)
        x = torch.randn(4, 8).to(device).requires_grad_()

        def fn(t: torch.Tensor, c=c) -> torch.Tensor:
            return torch.sin(t + VIEWS[view](c))

        with replay():
            y = fn(x) if policy is None else xla_ckpt.checkpoint(fn, x, policy=policy)
            if scale != 1.0:
                with torch.no_grad():
                    c.mul_(scale)
            y.sum().backward()
            sync(device)
        grads.append(x.grad.cpu())
    return grads[0], grads[1]


def _replays(device: torch.device) -> list:
    """Every replay a region on ``device`` can take: XLA's recorded program and fn run again; eager: fn."""
    import contextlib

    if device.type != "xla":
        return [contextlib.nullcontext]
    return [contextlib.nullcontext, general_replay]


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_an_outside_tensor_read_through_a_view_and_modified_after_forward_is_never_its_new_value(device, view):
    """On XLA a view is a new buffer: fn run again read the closure's new value unchecked (a wrong grad,
    1.7 off). Each replay gives the plain gradient (the recorded program reads the forward's tensor) or raises."""
    for i, replay in enumerate(_replays(device)):
        if device.type == "xla" and i == 0:  # the recorded program reads the forward's tensor
            plain, got = _closure_read_through(device, view, 3.0, replay)
            torch.testing.assert_close(got, plain, **XLA_TOL)
            continue
        with pytest.raises(xla_ckpt.CheckpointError, match="after the forward"):
            _closure_read_through(device, view, 3.0, replay)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_an_unmodified_outside_tensor_read_through_a_view_passes_every_replay(device, view):
    for replay in _replays(device):
        plain, got = _closure_read_through(device, view, 1.0, replay)
        torch.testing.assert_close(got, plain, **(XLA_TOL if device.type == "xla" else {}))


@pytest.mark.xla
def test_a_constant_from_changing_python_state_read_by_a_recomputed_op_raises_in_the_general_replay(xla_device):
    """``torch.tensor(...)`` reaches an XLA region through ``lift_fresh`` (a view to the dataflow): the
    replay's new constant selected other rows, and a linear after it got a wrong weight gradient (CI)."""
    calls = iter(range(100))
    w = torch.randn(8, 8).to(xla_device).requires_grad_()

    def fn(x: torch.Tensor) -> torch.Tensor:
        idx = torch.tensor([next(calls) % 4, 2, 1, 0], device=x.device)
        return torch.nn.functional.linear(x.index_select(0, idx), w)

    x = torch.randn(4, 8).to(xla_device).requires_grad_()
    with general_replay(), pytest.raises(xla_ckpt.CheckpointError, match=r"index_select.*values differ"):
        xla_ckpt.checkpoint(fn, x, policy="dots_saveable").sum().backward()


@pytest.mark.xla
def test_a_module_weight_gathered_again_for_backward_is_read_without_holding_the_forwards(xla_device):
    """XLA FSDP frees a weight after forward and gathers it again for backward: another buffer, the
    same values. The general replay accepts the module's current tensor, and holds the forward's
    weakly (a strong reference would keep the full weight alive: pytorch/xla 3811)."""
    import torch_xla

    block, x = _fresh(xla_device)
    plain = grads_of(block, [x], list(block.parameters()))
    block, x = _fresh(xla_device)
    with general_replay():
        y = xla_ckpt.checkpoint(block, x, policy="nothing_saveable")
        w = block.lin.weight
        full = w.detach().clone()
        torch_xla._XLAC._replace_xla_tensor(w, w.new_zeros(1))  # freed, as XLA FSDP does after forward
        torch_xla._XLAC._replace_xla_tensor(w, full)  # gathered again before backward
        torch.autograd.backward([y], [torch.randn(y.shape, generator=torch.Generator().manual_seed(0)).to(xla_device)])
        sync(xla_device)
    assert_same(plain, ([y.detach()], [x.grad] + [p.grad for p in block.parameters()]), **XLA_TOL)
