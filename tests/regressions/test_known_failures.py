"""Programs the fuzz found that still fail, kept as strict xfails so they stay visible until fixed.

Each is a raise where the plain run works, never a silently different number (the fuzz checks values
on every other path). A fix turns the xfail into an unexpected pass, which fails the run (``strict``).
"""

from __future__ import annotations

import pytest
import torch
from torch.ops import aten

from fuzz_programs import Step, TablePolicy
from helpers import replay_kind
from xla_ckpt._ir.opcall import Decision

import test_fuzz


@pytest.mark.xla
@pytest.mark.xfail(strict=True, raises=ZeroDivisionError, reason=(
    "found by XLA_CKPT_FUZZ=hunt (seed 8): on XLA a BatchNorm1d(momentum=None) inside a region whose policy "
    "saves aten.add (torch_xla traces num_batches_tracked.add_(1) as a functional add) reads "
    "num_batches_tracked as 0 in the general replay: ZeroDivisionError in backward. Also on the engine before "
    "this wave (commit 6581291); nothing_saveable gives the expected CheckpointError. Not fixed yet."))
def test_cumulative_batchnorm_whose_counter_add_the_policy_saves(xla_device):
    steps = (Step("outside_view", (28,), 2), Step("factory", (56,), 6476), Step("module", (30,), 3))
    spec = TablePolicy(table=((aten.add, Decision.SAVE), (aten.mul, Decision.SAVE)), default=Decision.RECOMPUTE)
    with replay_kind(True):
        test_fuzz.check(steps, spec, xla_device, test_fuzz.XLA_TOL)
