"""Writes through two views of one fresh tensor, under policies that save views: the plain gradient.

On XLA functionalization writes a slice back into its base with ``slice_scatter`` (and a selected row
with ``select_scatter``). torch tags ``slice_scatter`` ``view_copy``; taken for a view of its base, its
output lost the producer of the values written into it, so with the first write's scatter saved the
liveness analysis found the region's input unread and the replay ran on a stand-in of it: ``y.grad``
8.02 off under ``everything_saveable`` and every ``memory_budget``, with the CPU exact. A view op reads
one tensor; ``_record.record.op_info`` says so from the schema.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from helpers import assert_same, grads_of
from xla_ckpt.policies import memory_budget

POLICIES = ["everything_saveable", "nothing_saveable", "dots_saveable", memory_budget(0.3), memory_budget(0.5),
            memory_budget(0.9)]
POLICY_IDS = ["everything", "nothing", "dots", "budget0.3", "budget0.5", "budget0.9"]


def _slice_then_select(y: torch.Tensor) -> torch.Tensor:
    h = y * 1.0
    h[:, 0].mul_(2.0)
    h[..., 1:3].add_(y[..., 1:3])
    return h * h


def _select_then_narrow(y: torch.Tensor) -> torch.Tensor:
    h = torch.zeros_like(y) + y
    h.select(1, 2).mul_(-1.5)
    h.narrow(2, 0, 2).add_(y.narrow(2, 2, 2))
    return h.sin()  # reads h in backward (``exp`` saves its own output: exact either way)


def _user_slice_scatter(y: torch.Tensor) -> torch.Tensor:
    """The same values written by the user's own functional scatter: no in-place op at all."""
    h = torch.select_scatter(y * 1.0, y[:, 0] * 2.0, 1, 0)
    h = torch.slice_scatter(h, h[..., 1:3] + y[..., 1:3], 2, 1, 3)
    return h.sin()


PROGRAMS = [_slice_then_select, _select_then_narrow, _user_slice_scatter]


@pytest.mark.parametrize("policy", POLICIES, ids=POLICY_IDS)
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_writes_through_two_views_give_the_plain_gradient(device, fn, policy) -> None:
    y0 = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
    ref = grads_of(fn, [y0.clone().to(device).requires_grad_()], [])
    got = grads_of(lambda y: xla_ckpt.checkpoint(fn, y, policy=policy), [y0.clone().to(device).requires_grad_()], [])
    assert_same(ref, got, names=["y.grad"])


def test_slice_scatter_is_a_position_not_a_view() -> None:
    """The classification itself: a tagged view copy reading a second tensor is an op of its own."""
    from xla_ckpt._record.record import op_info

    aten = torch.ops.aten
    assert not op_info(aten.slice_scatter.default).skipped
    assert op_info(aten.slice_copy.Tensor).skipped and op_info(aten.select_copy.int).skipped
    assert op_info(aten.unfold_copy.default).skipped and op_info(aten.view_as_complex_copy.default).skipped


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_saved_bytes_agree_across_devices(xla_device, fn) -> None:
    """The policy keeps as much on XLA as on the CPU: the scatter a position, decided like any op."""
    y0 = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
    kept = {}
    for dev in ("cpu", xla_device):
        y = y0.clone().to(dev).requires_grad_()
        with xla_ckpt.saved_activations() as k:
            out = xla_ckpt.checkpoint(fn, y, policy="nothing_saveable")
        kept[str(dev)] = k.nbytes
        out.sum().backward()
    assert kept["cpu"] == kept[str(xla_device)], kept


@pytest.mark.slow  # four compiles: minutes on two loaded cores
@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.filterwarnings("ignore:xla_ckpt under torch.compile")
@pytest.mark.parametrize("backend", ["inductor", pytest.param("openxla", marks=pytest.mark.xla)])
@pytest.mark.parametrize("fn", PROGRAMS[:2], ids=lambda f: f.__name__.strip("_"))
def test_compiled_writes_through_two_views_give_the_plain_compile(backend, fn) -> None:
    """The same programs compiled, checkpointed under a policy that saves views, against the plain compile."""
    if backend == "openxla":
        import torch_xla

        device = torch_xla.device()
    else:
        device = torch.device("cpu")
    y0 = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
    ref = grads_of(torch.compile(fn, backend=backend), [y0.clone().to(device).requires_grad_()], [])
    torch._dynamo.reset()
    wrapped = torch.compile(lambda y: xla_ckpt.checkpoint(fn, y, policy="everything_saveable"), backend=backend)
    got = grads_of(wrapped, [y0.clone().to(device).requires_grad_()], [])
    assert_same(ref, got, names=["y.grad"])
