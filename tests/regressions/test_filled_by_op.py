"""An op that fills a tensor its own autograd node saved: ``F.rrelu(training=True)``'s noise.

``rrelu_with_noise`` writes the noise it draws into an ``empty_like`` buffer that autograd saved for
backward just before the op ran; autograd does not count that write (the noise's version stays 0) and
backward reads the filled noise. The engine took the write for a later in-place change of a saved
tensor: a ``CheckpointError`` saying plain autograd raises the same, which it does not (the
differential fuzz's rrelu variant and its dropout kind draw it). Eager judges the op's own
saves by their versions, as autograd does, and the replay runs the op, and so the fill, again.

On XLA the recorded program reads the buffer from before the write (a wrong gradient when the engine
was made to accept the write there): XLA refuses it while the forward runs, a ``CheckpointError`` naming
the op and the fix, never a value.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import xla_ckpt

POLICIES = ["nothing_saveable", "dots_saveable", "everything_saveable", xla_ckpt.policies.memory_budget(0.5)]


def _fn(x: torch.Tensor, w: torch.Tensor, training: bool = True) -> torch.Tensor:
    return torch.tanh(F.rrelu(x @ w, training=training) @ w)


def _run(policy, device: torch.device, training: bool = True):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, generator=gen).to(device).requires_grad_()
    w = torch.randn(8, 8, generator=gen).to(device).requires_grad_()
    torch.manual_seed(3)
    y = _fn(x, w, training) if policy is None else xla_ckpt.checkpoint(_fn, x, w, training, policy=policy)
    (y * y).sum().backward()
    after = torch.rand(3)  # the CPU stream where the plain step leaves it
    return [y.detach(), x.grad, w.grad, after]


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_rrelu_noise_on_eager(policy):
    ref, got = _run(None, torch.device("cpu")), _run(policy, torch.device("cpu"))
    for r, g in zip(ref, got, strict=True):
        assert g is not None
        torch.testing.assert_close(g, r)


@pytest.mark.xla
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_rrelu_noise_on_xla_is_refused_by_name(xla_device, training):
    """In eval mode too: the op still takes the noise, autograd still saves it, functionalization writes it."""
    with pytest.raises(xla_ckpt.CheckpointError, match=r"aten.rrelu_with_noise.* writes a tensor autograd saved"):
        _run("nothing_saveable", xla_device, training)
        import torch_xla

        torch_xla.sync()


def _through_data(x: torch.Tensor) -> torch.Tensor:
    r = torch.relu(x * 1.5)  # relu saves its output
    r.data.mul_(2.0)  # a write autograd does not count: backward reads the doubled output, as in the plain run
    return torch.sin(r)


@pytest.mark.parametrize("policy", ["nothing_saveable", "everything_saveable"])
def test_write_through_data_after_the_saving_op(device, policy):
    """Plain autograd reads the written value without an error: so does the region (eager), or XLA names it."""
    def run(pol):
        x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
        y = _through_data(x) if pol is None else xla_ckpt.checkpoint(_through_data, x, policy=pol)
        y.sum().backward()
        return [y.detach().cpu(), x.grad.cpu()]

    ref = run(None)
    if device.type == "xla":
        with pytest.raises(xla_ckpt.CheckpointError, match="a write autograd does not count"):
            run(policy)
        return
    for r, g in zip(ref, run(policy), strict=True):
        torch.testing.assert_close(g, r)


def test_a_later_data_write_to_a_live_saved_tensor_names_the_uncounted_write():
    """A ``.data`` write ops after the save, to a saved tensor fn returns (alive at backward): autograd does
    not count it and plain backward reads the written values, which the replay cannot give. The error
    says so, instead of claiming plain autograd raises the same (it does not)."""
    def fn(x: torch.Tensor):
        y = x.exp()
        z = y.sin()
        y.data.mul_(0.5)
        return y, z

    x = torch.randn(4, requires_grad=True)
    y, z = fn(x)
    (y.sum() + z.sum()).backward()  # plain: no error
    x2 = x.detach().clone().requires_grad_()
    y, z = xla_ckpt.checkpoint(fn, x2, policy="nothing_saveable")
    with pytest.raises(xla_ckpt.CheckpointError, match="does not share its version counter"):
        (y.sum() + z.sum()).backward()
