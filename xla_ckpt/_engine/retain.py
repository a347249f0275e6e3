"""What a region keeps once its forward has ended: planning policies, liveness, promotion, pruning.

The forward caches every output the policy keeps. At the end of forward (``region.py``)
the region knows everything backward can read, and keeps only that: a planning policy decides its
positions over the whole region (``plan``); outputs nothing reads are dropped, dead ops are marked
so the replay skips them, inputs backward never reads are let go (``keep_only_live``, using
``_record.liveness``). What differs per device is the device's ``Retain`` (``eager.EagerRetain``: promotion and
pruning of multi-output ops; ``xla_steps.XlaRetain``: dead positions after a dropped draw).
"""

from __future__ import annotations

import sys
import threading
from typing import Optional, cast

import torch

from xla_ckpt._record.liveness import Dataflow
from xla_ckpt._policy.plan import Planner, RegionView, check_plan
from xla_ckpt._record.opcall import Decision, OpCall, Policy
from xla_ckpt._record.record import fn_name as _name
from xla_ckpt._record.spec import spec_of

from xla_ckpt._engine.state import RegionState

__all__ = ["plan", "keep_only_live"]

SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE


def plan(region: RegionState, policy: Policy, positions: list[int], calls: list[Optional[OpCall]],
         flow: Dataflow) -> None:
    """Ask a planning policy about its positions still saved (a write inside fn demoted the others)."""
    free = [p for p in positions if p in region.cache]
    view = RegionView(calls, free, set(region.cache), flow, region.inputs, region.packed_keys,
                      prune=region.device.retain.prunes)
    try:
        decisions = cast(Planner, policy).plan(view)  # the forward kept only planners' positions here
    except Exception as e:
        if sys.version_info >= (3, 11):  # no notes on Python 3.10: the error goes up as it is
            e.add_note(f"raised by the planning policy {policy!r} of the checkpointed function {_name(region.fn)}")
        raise
    for p, d in zip(free, check_plan(policy, view, decisions), strict=True):
        if d is RECOMPUTE:
            _demote(region, p)
        elif d is OFFLOAD:
            region.to_host(p)  # moved by offload.move_out


def _demote(region: RegionState, pos: int) -> None:
    """A cached position becomes RECOMPUTE (the replay re-runs it; see ``demoted_spec``)."""
    region.demote(pos, region.device.retain.demoted_spec(region, pos))


def keep_only_live(region: RegionState, flow: Dataflow, early: list[torch.Tensor]) -> Optional[frozenset[int]]:
    """Drop what backward cannot read (see ``_record.liveness``): cached outputs, dead ops, unread inputs.

    Returns the positions the replay runs (None: all of them).
    """
    if region.verify or not _liveness.on:
        return None  # verify recomputes every position from real inputs
    rules = region.device.retain
    saved = set(region.cache)
    lv = rules.refine(region, flow, early, saved, flow.analyse(saved))
    for pos in list(region.cache):
        if pos not in lv.cached and rules.droppable(region, pos):
            _demote(region, pos)
    for pos, rec in enumerate(region.records):
        if pos not in lv.live and pos not in lv.cached and rec.spec is not None:
            region.dead(pos)
    rules.finish(region, flow, lv)
    if flow.shared_inputs:
        return lv.live
    unread = {i: (spec_of(t), region.input_grad[i], torch._is_functional_tensor(t))
              for i, t in enumerate(region.inputs) if t is not None and i not in lv.inputs}
    if unread:
        region.drop_inputs(unread)
    return lv.live

class _Liveness(threading.local):
    def __init__(self) -> None:
        # False: regions whose forward ends on this thread keep every output the policy kept. The tests
        # turn it off for a block to compare the policy's own choices with another lowering's.
        self.on = True


_liveness = _Liveness()
