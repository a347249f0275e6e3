"""Programs the fuzz found that still fail, kept as strict xfails so they stay visible until fixed.

Each is a raise where the plain run works, never a silently different number (the fuzz checks values
on every other path). A fix turns the xfail into an unexpected pass, which fails the run (``strict``).
"""

from __future__ import annotations

import pytest
import torch
from torch.ops import aten

import xla_ckpt
from fuzz_programs import Step, TablePolicy, resolve, run
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


@pytest.mark.xfail(strict=True, raises=xla_ckpt.CheckpointError, reason=(
    "found by the fuzz's user kinds (moe): Mixtral-style routing of a value without grad (relu of the "
    "region's input b) where one expert gets no token: torch.where on its mask gives an empty index, and "
    "backward's read of the empty x[tokens] (the expert linear's saved input) raises CheckpointError "
    "'internal: backward would read the output of an op the liveness analysis skipped'; plain autograd works. "
    "Smallest form: checkpoint(lambda x: x[(x[:, 0] > 100).nonzero()[:, 0]] @ w, b) with b needing no grad, "
    "under any policy; fine when b needs grad or the index is not empty. Not fixed yet."))
def test_routing_a_value_without_grad_to_an_expert_with_no_token():
    steps = (Step("act", (1,), 3), Step("moe", (2,), 0))
    got = run(steps, torch.device("cpu"), resolve("everything_saveable"))
    if got.error is not None:
        raise got.error
    assert test_fuzz.check(steps, "everything_saveable", torch.device("cpu"), test_fuzz.EXACT) == "exact"
