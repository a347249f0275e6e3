"""Writes on XLA that bypass the dispatcher.

``xm.all_reduce(reduce_type, [t], scale=...)`` (the list form: tensor-parallel layers written for
torch_xla reduce so, in place) gives ``t`` a new lazy value under the same XLA tensor, through
``_XLAC`` and not an ATen op: the recorded program never saw it, and a recomputed op read ``t`` from
before the reduction. With ``nothing_saveable`` the input's gradient was off, silently. A value
written so and then read or saved inside the region is a ``CheckpointError`` naming the op and the
IR node (``_engine/forward_xla.XlaForward.ended``). Writes that keep the value stay exact: a sync (in the
recorded program; fn run again would sync again, moving torch_xla's seed: a named error there), an
optimization barrier (and on SPMD a sharding annotation, ``tests/integration/sharded``); so does the
functional form, which makes a new tensor, and a reduction of a value nothing reads again (a logged
statistic).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

import xla_ckpt
from helpers import replay_kind

pytestmark = pytest.mark.xla


def _list_form(h: torch.Tensor) -> torch.Tensor:
    import torch_xla.core.xla_model as xm

    g = h * 2
    xm.all_reduce(xm.REDUCE_SUM, [g], scale=0.5)  # in place, outside the dispatcher
    return h + g.cos()


def _input_reduced(h: torch.Tensor) -> torch.Tensor:
    import torch_xla.core.xla_model as xm

    y = h.sin()
    xm.all_reduce(xm.REDUCE_SUM, [h], scale=0.5)  # ``h`` is the region's input here (``ON_INPUT``)
    return y * h


def _functional(h: torch.Tensor) -> torch.Tensor:
    import torch_xla.core.xla_model as xm

    r = xm.all_reduce(xm.REDUCE_SUM, h * 2, scale=0.5)  # a new tensor (no grad through it, as without us)
    return h * r.cos()


def _logged(h: torch.Tensor) -> torch.Tensor:
    import torch_xla.core.xla_model as xm

    stat = h.detach().abs().mean()
    xm.all_reduce(xm.REDUCE_SUM, [stat], scale=0.5)  # reduced in place, then only logged
    _LOG.append(stat)
    return h.sin()


def _barrier(h: torch.Tensor) -> torch.Tensor:
    import torch_xla.core.xla_model as xm

    g = h.sin()
    xm.optimization_barrier_([g])
    return g * h


def _synced(h: torch.Tensor) -> torch.Tensor:
    import torch_xla

    g = h.sin()
    torch_xla.sync()  # runs g: its lazy value becomes device data, the same numbers
    return g * h


_LOG: list[torch.Tensor] = []
ON_INPUT = {_input_reduced}
# torch_xla's reduction with a scale runs an ATen ``scalar_tensor`` in the forward that ``fn`` run again
# (the general replay) does not: a CheckpointError naming the divergence there, never silent; the recorded
# program, XLA's default, is exact.
FIRST_CALL_DIFFERS = {"functional", "logged"}
REFUSED = {"list_form": (_list_form, "aten.mul.Tensor"), "input_reduced": (_input_reduced, "input #0")}
EXACT = {"functional": _functional, "logged": _logged, "barrier": _barrier, "synced": _synced}


def _run(device: torch.device, middle: Callable[[torch.Tensor], torch.Tensor], policy: Any) -> list[torch.Tensor]:
    """``fn``: a matmul, ``middle``, a matmul (``ON_INPUT``: ``middle`` on the region's input, a matmul);
    outputs and every grad."""
    import torch_xla

    gen = torch.Generator().manual_seed(1)
    w = torch.randn(6, 6, generator=gen).to(device).requires_grad_()
    v = torch.randn(6, 6, generator=gen).to(device).requires_grad_()
    x = torch.randn(5, 6, generator=gen).to(device).requires_grad_()

    def fn(t: torch.Tensor) -> torch.Tensor:
        h = middle(t) @ w if middle in ON_INPUT else middle(torch.tanh(t @ w))
        return (h @ v).sin()

    _LOG.clear()
    y = fn(x) if policy is None else xla_ckpt.checkpoint(fn, x, policy=policy)
    y.sum().backward()
    torch_xla.sync()
    return [t.detach().cpu() for t in [y, x.grad, w.grad, v.grad, *_LOG]]


@pytest.fixture
def reducing(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch_xla skips the reduction on one device (returns its input): make it run, as on a pod.
    monkeypatch.setenv("XLA_ALWAYS_ALLREDUCE", "1")


@pytest.mark.parametrize("direct", [True, False], ids=["program", "fn_again"])
@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable", "everything_saveable"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_value_written_outside_the_dispatcher_and_read_again_is_refused(xla_device, reducing, name, policy,
                                                                           direct):
    middle, what = REFUSED[name]
    ref = _run(xla_device, middle, None)
    assert all(t is not None for t in ref)
    with replay_kind(direct), pytest.raises(xla_ckpt.CheckpointError) as err:
        _run(xla_device, middle, policy)
    assert what in str(err.value) and "xla::cross_replica_sum" in str(err.value), str(err.value)
    assert "functional form" in str(err.value)


@pytest.mark.parametrize("direct", [True, False], ids=["program", "fn_again"])
@pytest.mark.parametrize("policy", ["nothing_saveable", "dots_saveable"])
@pytest.mark.parametrize("name", sorted(EXACT))
def test_writes_that_keep_the_value_or_are_never_read_again_stay_exact(xla_device, reducing, name, policy, direct):
    ref = _run(xla_device, EXACT[name], None)
    if not direct and name in FIRST_CALL_DIFFERS:
        with replay_kind(direct), pytest.raises(xla_ckpt.CheckpointError, match="aten.scalar_tensor"):
            _run(xla_device, EXACT[name], policy)
        return
    if not direct and name == "synced":
        # The values stay exact, but fn run again syncs again in backward: a sync derives torch_xla's next
        # seed, and every later draw of the step would differ from the plain step's
        # (tests/regressions/test_seed_inside_region.py): a named error there.
        with replay_kind(direct), pytest.raises(xla_ckpt.CheckpointError, match="sets torch_xla's seed itself"):
            _run(xla_device, EXACT[name], policy)
        return
    with replay_kind(direct):
        got = _run(xla_device, EXACT[name], policy)
    assert len(got) == len(ref)
    for r, g in zip(ref, got, strict=True):
        assert g is not None
        torch.testing.assert_close(g, r)
