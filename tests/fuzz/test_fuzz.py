"""Differential fuzz test: random programs, checkpointed under random policies, against the plain run.

The property (the first law): the checkpointed program gives exactly the plain program's forward
values (each output), loss, input grad, every parameter grad, final input values and both RNG states
after backward (the CPU generator's, and on XLA torch_xla's seed read before the sync: a sync derives
the next seed from the base seed alone and hides a draw too many); or it raises a
``CheckpointError`` where it must (the plain run itself failed, or the program reads Python-side
state that changes between forward and recompute). Never a different number.

CPU is compared bitwise. XLA compiles the two programs into different graphs (fusion changes the
rounding of float32 reductions), so it is compared with ``XLA_TOL``.

Example counts come from the hypothesis profile ``XLA_CKPT_FUZZ`` selects (tests/conftest.py): ``fast``
(the default, `make test`: 25 CPU programs, 5 on XLA) or ``full`` (`make test-all`: 200 CPU, 40 XLA).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import xla_ckpt
from helpers import replay_kind
from fuzz_check import EXACT, XLA_TOL, check, fuzz, same
from fuzz_programs import (AFTER, BACKWARD, FRESH_KINDS, HOOKS, OUTER, Step, focused_programs, policy_specs, programs,
                           reads_region, resolve, run)
from fuzz_user_kinds import USER_KINDS

@fuzz()
@given(steps=programs(), spec=policy_specs(), hooks=st.sampled_from(HOOKS), after=st.sampled_from(AFTER),
       thread=st.booleans(), outer=st.sampled_from(OUTER), backward=st.sampled_from(BACKWARD))
def test_fuzz_cpu(steps, spec, hooks, after, thread, outer, backward):
    # Under forward AD a region runs plainly: its draws are those of code outside any checkpoint, which
    # a replay in another thread makes a CheckpointError there (docs/correctness.md), not this check's.
    assume(not (thread and hooks == "forward_ad"))
    check(steps, spec, torch.device("cpu"), EXACT, hooks, after, thread, outer, backward)


@pytest.mark.xla
@fuzz(0.2)
@given(steps=programs(), spec=policy_specs(), after=st.sampled_from(AFTER), direct=st.booleans(),
       outer=st.sampled_from(OUTER), backward=st.sampled_from(BACKWARD),
       hooks=st.sampled_from(("none", "autocast", "forward_ad")))
def test_fuzz_xla(xla_device, steps, spec, after, direct, outer, backward, hooks):
    """XLA, through both replays: the recorded program where a region allows it, and fn run again."""
    # torch_xla's HLO verifier refuses the MoE scatter under bf16 autocast in the plain run too ("mixed
    # precision is disallowed"), and the process is unusable after it ("Check failed: tensor_data").
    assume(hooks != "autocast" or not any(s.kind == "moe" for s in steps))
    # XLA:CPU has no bf16 all-reduce: the plain run of a "bypass" step under bf16 autocast fails ("AllReduce
    # for datatype 'bf16' is not supported") and leaves the process unusable.
    assume(hooks != "autocast" or not any(s.kind == "bypass" for s in steps))
    # torch_xla 2.9 cannot lower a slice or select assignment from a dual tensor into a fresh one under
    # forward AD (``t[1:3] = dual``: "aten::as_strided ... Check failed: storage_offset + slice_size <=
    # input_element_count (16 vs. 0)"), without the library too, and the process is unusable after it.
    assume(hooks != "forward_ad" or not any(s.kind == "index_put_fresh" and s.variant >= 2 for s in steps))
    # The same lowering fails for a write through a view of a fresh tensor that reads a region value under
    # forward AD (``view_writes`` with a read: "Error while lowering: aten::as_strided ... storage_offset +
    # slice_size <= input_element_count (16 vs. 0)"), in the plain run too, and the process is unusable after it.
    assume(hooks != "forward_ad" or not any(s.kind == "view_writes" and reads_region(s.variant) for s in steps))
    with replay_kind(direct):
        check(steps, spec, xla_device, XLA_TOL, hooks=hooks, after=after, outer=outer, backward=backward)


# A dispatch mode around backward (on XLA the replay's stand-ins must stay in functionalization under
# it, or a dropout raises a false CheckpointError), custom ops returning (Tensor, int) (a saved one must
# not run again).
MODES = ("pair", "pair_saved", "dropout", "rand_mask", "linear", "act", "add", "view", "inplace_last")


@fuzz(0.3)
@given(steps=focused_programs(MODES), spec=policy_specs(), outer=st.sampled_from(OUTER[1:]))
def test_fuzz_outer_modes_and_non_tensor_outputs_cpu(steps, spec, outer):
    check(steps, spec, torch.device("cpu"), EXACT, outer=outer)


@pytest.mark.xla
@fuzz(0.15)
@given(steps=focused_programs(MODES), spec=policy_specs(), outer=st.sampled_from(OUTER[1:]), direct=st.booleans())
def test_fuzz_outer_modes_and_non_tensor_outputs_xla(xla_device, steps, spec, outer, direct):
    with replay_kind(direct):
        check(steps, spec, xla_device, XLA_TOL, outer=outer)


# Every module switched to eval mode between forward and backward (``AFTER``'s "eval": an evaluation
# pass before ``loss.backward()``): BatchNorm and dropout modules among ordinary ops. Plain autograd
# differentiates the forward's graph; the recompute ran them in eval mode (a CheckpointError).
MODED = ("module", "linear", "act", "dropout", "add")


@fuzz(0.15)
@given(steps=focused_programs(MODED), spec=policy_specs(), hooks=st.sampled_from(HOOKS))
def test_fuzz_eval_before_backward_cpu(steps, spec, hooks):
    check(steps, spec, torch.device("cpu"), EXACT, hooks=hooks, after="eval")


@pytest.mark.xla
@fuzz(0.1)
@given(steps=focused_programs(MODED), spec=policy_specs(), direct=st.booleans())
def test_fuzz_eval_before_backward_xla(xla_device, steps, spec, direct):
    with replay_kind(direct):
        check(steps, spec, xla_device, XLA_TOL, after="eval")


# Tensors made inside the region (factory ops, a copy from the CPU, index_put on a fresh tensor) and
# chains of views over them and over the region's values, among a few ordinary ops.
FRESH = FRESH_KINDS + ("linear", "act", "matmul", "add")


@fuzz(0.3)
@given(steps=programs(only=FRESH), spec=policy_specs())
def test_fuzz_fresh_tensors_cpu(steps, spec):
    check(steps, spec, torch.device("cpu"), EXACT)


@pytest.mark.xla
@fuzz(0.125)
@given(steps=programs(only=FRESH), spec=policy_specs(), direct=st.booleans(), verify=st.booleans())
def test_fuzz_fresh_tensors_xla(xla_device, steps, spec, direct, verify):
    """XLA: a factory op under the region's dispatch mode can return a tensor outside functionalization,
    whose views read the wrong elements: wrong forward values under every policy."""
    with replay_kind(direct):
        ref = run(steps, xla_device)
        got = run(steps, xla_device, resolve(spec), verify=verify)
        same(ref, got, xla_device, XLA_TOL, spec=True, steps=steps)


# Writes through several views of one fresh tensor, some reading views of region values, with the
# policies that save views (a *_scatter op on XLA) drawn often: everything_saveable and memory budgets.
VIEW_WRITES = ("view_writes", "view_writes", "act", "add")
SAVES_VIEWS = st.one_of(st.sampled_from(["everything_saveable", "nothing_saveable"]), policy_specs(),
                        st.sampled_from([0.3, 0.5, 0.9]).map(lambda f: xla_ckpt.policies.memory_budget(f)))


@fuzz(0.2)
@given(steps=focused_programs(VIEW_WRITES), spec=SAVES_VIEWS)
def test_fuzz_writes_through_views_cpu(steps, spec):
    check(steps, spec, torch.device("cpu"), EXACT)


@pytest.mark.xla
@fuzz(0.2)
@given(steps=focused_programs(VIEW_WRITES), spec=SAVES_VIEWS, direct=st.booleans())
def test_fuzz_writes_through_views_xla(xla_device, steps, spec, direct):
    with replay_kind(direct):
        check(steps, spec, xla_device, XLA_TOL)


# Tensors from outside fn (closure parameters, constants built from Python state) read through views
# by recomputed ops, modified after the forward, with in-place ops that send XLA regions to the
# general replay: on XLA each view is a new buffer, and fn run again read a new value unchecked (a
# wrong w.grad, 2.67 off).
OUTSIDE_KINDS = ("outside_view", "state_index", "linear", "add", "act", "inplace_last", "index")


@fuzz(0.2)
@given(steps=focused_programs(OUTSIDE_KINDS), spec=policy_specs(), after=st.sampled_from(AFTER))
def test_fuzz_outside_tensors_cpu(steps, spec, after):
    check(steps, spec, torch.device("cpu"), EXACT, after=after)


@pytest.mark.xla
@fuzz(0.15)
@given(steps=focused_programs(OUTSIDE_KINDS), spec=policy_specs(), after=st.sampled_from(AFTER),
       direct=st.booleans(), verify=st.booleans())
def test_fuzz_outside_tensors_xla(xla_device, steps, spec, after, direct, verify):
    with replay_kind(direct):
        ref = run(steps, xla_device, after=after)
        got = run(steps, xla_device, resolve(spec), verify=verify, after=after)
        same(ref, got, xla_device, XLA_TOL, spec=True, steps=steps, after=after)


# Writes that bypass the dispatcher (XLA: ``xm.all_reduce``'s list form) among ops the recorded program
# recomputes: recomputing the value from before the write would give silently wrong grads.
BYPASS_KINDS = ("bypass", "linear", "act", "add", "matmul", "view", "dropout")


@pytest.mark.xla
@fuzz(0.4)
@given(steps=focused_programs(BYPASS_KINDS), spec=policy_specs())
def test_fuzz_bypassed_writes_xla(xla_device, steps, spec):
    check(steps, spec, xla_device, XLA_TOL)


# What users train (fuzz_user_kinds): MoE top-k routing, a custom autograd.Function, a no_grad amax
# scaling, LoRA over a frozen weight, a nested checkpoint; among ordinary ops, in-place ops and dropout.
USER = USER_KINDS + ("linear", "act", "add", "dropout", "inplace_last", "tag_last")


@fuzz(0.2)
@given(steps=focused_programs(USER), spec=policy_specs(), hooks=st.sampled_from(HOOKS), after=st.sampled_from(AFTER))
def test_fuzz_user_kinds_cpu(steps, spec, hooks, after):
    check(steps, spec, torch.device("cpu"), EXACT, hooks, after)


@pytest.mark.xla
@fuzz(0.1)
@given(steps=focused_programs(USER), spec=policy_specs(), after=st.sampled_from(AFTER), direct=st.booleans())
def test_fuzz_user_kinds_xla(xla_device, steps, spec, after, direct):
    with replay_kind(direct):
        check(steps, spec, xla_device, XLA_TOL, after=after)


@fuzz(0.3)
@given(steps=programs(allow_state=False), name=st.sampled_from(["dots_saveable", "everything_saveable"]))
def test_fuzz_verify_mode_passes_deterministic_programs(steps, name):
    """verify=True recomputes every saved output too: deterministic programs still match exactly."""
    ref = run(steps, torch.device("cpu"))
    got = run(steps, torch.device("cpu"), resolve(name), verify=True)
    if ref.error is None:
        if ref.aliased_written and got.error is not None:
            # fn wrote an input sharing memory with another: refused by name, as ``same`` accepts.
            assert isinstance(got.error, xla_ckpt.CheckpointError) and "share memory" in str(got.error), repr(got.error)
            return
        assert got.error is None, repr(got.error)
        for r, g in zip(ref.values, got.values, strict=True):
            assert (r is None) == (g is None)
            if r is not None:
                torch.testing.assert_close(g, r, equal_nan=True, **EXACT)  # NaN where the plain run has it


def test_checker_catches_a_corrupted_saved_value(monkeypatch):
    """The comparison is not vacuous: corrupt every value handed out at a SAVE position and it fails."""
    from xla_ckpt._engine.state import RegionState

    original = RegionState.cached

    def corrupted(self, pos, func, rec):
        return torch.utils._pytree.tree_map(
            lambda t: t + 1e-3 if isinstance(t, torch.Tensor) and t.is_floating_point() else t,
            original(self, pos, func, rec))

    steps = (Step("linear", (0,), 0), Step("act", (2,), 0), Step("matmul", (3, 2), 0))
    assert check(steps, "everything_saveable", torch.device("cpu"), EXACT) == "exact"
    monkeypatch.setattr(RegionState, "cached", corrupted)
    with pytest.raises(AssertionError, match="differs"):
        check(steps, "everything_saveable", torch.device("cpu"), EXACT)


@pytest.mark.slow  # a check of the generator (40 programs); the fast tier fuzzes with it above
def test_outcomes_are_mostly_exact():
    """Most generated programs run and compare (the generator is not dominated by error cases)."""
    kinds: dict[str, int] = {}

    @settings(max_examples=40)  # fixed: the share of exact outcomes needs enough programs in every profile
    @given(steps=programs(), spec=policy_specs())
    def probe(steps, spec):
        k = check(steps, spec, torch.device("cpu"), EXACT)
        kinds[k] = kinds.get(k, 0) + 1

    probe()
    assert kinds.get("exact", 0) >= 20, kinds


@pytest.mark.xla
def test_verify_on_xla_accepts_the_recomputes_own_rounding(xla_device):
    """XLA compiles the recompute into another graph (9.5e-7 off on an fp32 add), which verify must not
    take for non-determinism: it compares with dtype tolerances on XLA (``XLA_VERIFY_TOL``)."""
    steps = (Step("linear", (0,), 0), Step("factory", (0,), 0))
    with replay_kind(False):
        ref = run(steps, xla_device)
        got = run(steps, xla_device, resolve("all_of"), verify=True)
    assert same(ref, got, xla_device, XLA_TOL, spec=True, steps=steps) == "exact"


# What a user observes around recompute: hooks inside the region fire once with the forward's
# values (a second call in backward would read the replay's stand-ins), buffers a forward writes end the
# step as without the library (BatchNorm's statistics move once), and a cumulative average or a counter
# that reads the buffer it just wrote replays exactly (no false error).
OBSERVED = ("module", "linear", "act", "add", "dropout", "inplace_last", "view", "alias_input")


@fuzz(0.3)
@given(steps=focused_programs(OBSERVED), spec=policy_specs(), outer=st.sampled_from(OUTER))
def test_fuzz_hooks_and_buffers_cpu(steps, spec, outer):
    check(steps, spec, torch.device("cpu"), EXACT, outer=outer)


@pytest.mark.xla
@fuzz(0.15)
@given(steps=focused_programs(OBSERVED), spec=policy_specs(), direct=st.booleans())
def test_fuzz_hooks_and_buffers_xla(xla_device, steps, spec, direct):
    with replay_kind(direct):
        check(steps, spec, xla_device, XLA_TOL)
