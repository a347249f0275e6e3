"""A counter the policy keeps, written back by the replay (``XLA_CKPT_FUZZ=hunt`` draws it, seed 8).

On XLA a BatchNorm1d(momentum=None) reads ``num_batches_tracked`` to average (``1 / count``), and
torch_xla traces its ``add_(1)`` as a functional ``add`` whose output a policy saving ``aten.add``
keeps. The replay puts the counter back to its value before the forward; a plain ``copy_`` on XLA
writes into the XLA tensor under the counter's wrapper, the kept ``add`` output itself, so the replay
would read the count as 0 (ZeroDivisionError in backward): ``xla_state.assign`` moves the wrapper to a
new XLA tensor before the copy.
"""

from __future__ import annotations

import pytest
import torch

import xla_ckpt
from xla_ckpt import policies
from torch.ops import aten

from fuzz_programs import Step, TablePolicy
from helpers import replay_kind
from xla_ckpt._record.opcall import Decision

import fuzz_check


@pytest.mark.xla
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "general"])
def test_cumulative_batchnorm_whose_counter_add_the_policy_saves(xla_device, direct):
    """The fuzz's program: values, grads, hook records and buffers equal to the plain run's."""
    steps = (Step("outside_view", (28,), 2), Step("factory", (56,), 6476), Step("module", (30,), 3))
    spec = TablePolicy(table=((aten.add, Decision.SAVE), (aten.mul, Decision.SAVE)), default=Decision.RECOMPUTE)
    with replay_kind(direct):
        fuzz_check.check(steps, spec, xla_device, fuzz_check.XLA_TOL)


@pytest.mark.parametrize("policy", [policies.save_ops(aten.add), policies.save_ops(aten.add, aten.mm),
                                    "nothing_saveable"], ids=["add", "add_mm", "nothing"])
def test_cumulative_average_counter_kept(device, policy):
    """BatchNorm1d(momentum=None) twice in one region: both steps' grads and statistics as the plain run's."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(6, momentum=None).to(device)
    w = torch.randn(6, 6, device=device, requires_grad=True)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return bn(bn(x @ w).sin() * 2.0)

    def step(checkpointed: bool) -> list[torch.Tensor]:
        bn.reset_running_stats()
        grads = []
        for i in range(2):
            x = torch.randn(5, 6, generator=torch.Generator().manual_seed(i)).to(device).requires_grad_()
            for t in (w, bn.weight, bn.bias):
                t.grad = None
            out = xla_ckpt.checkpoint(fn, x, policy=policy) if checkpointed else fn(x)
            out.pow(2).sum().backward()
            grads += [out.detach(), x.grad, w.grad, bn.weight.grad, bn.bias.grad]
        if device.type == "xla":
            import torch_xla

            torch_xla.sync()
        return [g.cpu() for g in grads + [bn.running_mean, bn.running_var, bn.num_batches_tracked]]

    ref = step(False)
    tol = fuzz_check.XLA_TOL if device.type == "xla" else fuzz_check.EXACT
    torch.testing.assert_close(step(True), ref, **tol)
