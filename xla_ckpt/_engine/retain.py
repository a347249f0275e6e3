"""What a region keeps once its forward has ended: planning policies, liveness, promotion, pruning.

The forward caches every output the policy keeps. At the end of forward (``region.py``)
the region knows everything backward can read, and keeps only that: a planning policy decides its
positions over the whole region (``plan``); outputs nothing reads are dropped, dead ops are marked
so the replay skips them, inputs backward never reads are let go (``keep_only_live``, using
``_record.liveness``); on eager devices an op's output replaces what recomputing it needs where that keeps
fewer bytes (``_promote``), and a multi-output op keeps only the outputs something reads.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Optional, cast

import torch

from xla_ckpt._base import xla as _xla
from xla_ckpt._record.liveness import INPUT, Dataflow
from xla_ckpt._policy.plan import Planner, RegionView, check_plan
from xla_ckpt._record.opcall import Decision, OpCall, Policy
from xla_ckpt._record.record import fn_name as _name, tensors
from xla_ckpt._record.spec import WrapperSpec, spec_nbytes, spec_of

from xla_ckpt._engine.entries import Pruned
from xla_ckpt._engine.state import RegionState

__all__ = ["plan", "keep_only_live", "EagerRetain", "XlaRetain"]

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

# XLA: a random op the policy keeps but backward never reads is dropped like any other output, and
# becomes a dead position (recomputed ones redraw from the forward's seed, ``_record.replay_state.Draw``): the
# general replay hands out a stand-in for it instead of running it, which would draw once more from
# torch_xla's seed. The draw itself is traced, never executed, and changes no value or gradient, but
# every later random op of the step (another micro-batch's dropout) would draw other numbers than
# without the library (after backward the seed would be one update, ``s * 214013 + 2531011``, further).
# The recomputed ops after it that read it are dead too (nothing backward reads depends on them):
# on XLA they still run lazily (XLA drops what nothing reads), their outputs marked as stand-ins, so a
# live op or a saved tensor reading one is an error, never a value.


class EagerRetain:
    """Eager devices: an op's output may replace what recomputing it needs (``_promote``), a multi-output
    op keeps only the outputs something reads, and a dropped output keeps its spec for stand-ins."""

    prunes = True  # a planner may count a multi-output op by the outputs something reads

    def demoted_spec(self, region: RegionState, pos: int) -> Any:
        return spec_of(region.cache[pos][0])

    def refine(self, region: RegionState, flow: Dataflow, early: list[torch.Tensor], saved: set[int], lv: Any) -> Any:
        return _promote(region, flow, early, saved, lv)

    def droppable(self, region: RegionState, pos: int) -> bool:
        return True

    def finish(self, region: RegionState, flow: Dataflow, lv: Any) -> None:
        _prune_outputs(region, flow.read_keys(lv, region.packed_keys))


class XlaRetain:
    """XLA: the compiler drops what nothing reads, so outputs are kept or dropped whole; a dropped random
    op becomes a dead position (see the comment above ``_undrawn``)."""

    prunes = False

    def demoted_spec(self, region: RegionState, pos: int) -> Any:
        # Only a random op's: the replay hands out a stand-in for it instead of drawing again.
        return spec_of(region.cache[pos][0]) if region.records[pos].info.random else None

    def refine(self, region: RegionState, flow: Dataflow, early: list[torch.Tensor], saved: set[int], lv: Any) -> Any:
        return lv

    def droppable(self, region: RegionState, pos: int) -> bool:
        return _undrawn(region, pos)

    def finish(self, region: RegionState, flow: Dataflow, lv: Any) -> None:
        _dead_after_undrawn(region, flow, lv)


def _undrawn(region: RegionState, pos: int) -> bool:
    """XLA: whether cached position ``pos`` may be dropped (a random op's only with a stand-in's spec)."""
    rec = region.records[pos]
    return not rec.info.random or spec_of(region.cache[pos][0]) is not None


def _dead_after_undrawn(region: RegionState, flow: Dataflow, lv: Any) -> None:
    """XLA: the recomputed positions that read a dropped random op's output or an input the region lets
    go (through others) are dead: the general replay runs them on stand-ins, and what they make is a
    stand-in too (``ReplayMode.garbage``), which a live op or autograd must never read.

    So is a recomputed random op nothing backward needs: the general replay runs it from its forward
    state without checking where its draw ends (a draw whose count depends on its inputs, the rejection
    sampling of ``_standard_gamma`` on torch's CPU generator, reads stand-ins of the inputs the region
    let go).
    """
    records = region.records
    for p, rec in enumerate(records):
        if rec.live and rec.draw is not None and p not in lv.live and p not in lv.cached:
            region.dead(p)
    dead = {p for p, rec in enumerate(records) if not rec.live}  # dropped or unneeded random ops
    if not flow.shared_inputs:  # inputs that share a buffer are all kept (``keep_only_live``)
        dead.update(INPUT - i for i, t in enumerate(region.inputs) if t is not None and i not in lv.inputs)
    if not dead:
        return
    for p in range(max(min(dead) + 1, 0), len(records)):
        if records[p].live and p not in lv.live and p not in lv.cached and not dead.isdisjoint(flow.deps[p]):
            region.dead(p)
            dead.add(p)


def _promote(region: RegionState, flow: Dataflow, early: list[torch.Tensor], saved: set[int], lv: Any) -> Any:
    """Keep an op's output instead of what recomputing it needs, where that keeps fewer bytes.

    A recomputed op whose whole output autograd saved (held until the end of forward) can be
    kept as it is: ``x + lora(x)`` recomputed from two saved matmuls keeps two tensors where its
    own output is one. Accepted only when the region then keeps fewer bytes; it also recomputes less.
    """
    candidates: dict[int, int] = {}
    for j, p in enumerate(flow.packed):
        rec = region.records[p] if p >= 0 else None
        if rec is None or p not in lv.live or p in candidates or j in region.dirty or rec.info.mutable \
                or p in region.hook_written:
            continue
        if rec.spec is None or not isinstance(rec.spec[0], torch.Size):
            continue  # single-tensor outputs only
        t = early[j]
        if type(t) is not (rec.spec.cls if isinstance(rec.spec, WrapperSpec) else torch.Tensor):
            continue  # a wrapper built in Python from p's output (``Dataflow._built``) is not p's output
        if (t.shape, t.stride(), t.dtype) == rec.spec[:3] and t.storage_offset() == 0:
            candidates[p] = j
    if not candidates:
        return lv
    sizes: dict[int, int] = {}  # bytes per kept position, counted once for every trial
    best = _kept_bytes(region, lv, sizes)
    for p, j in sorted(candidates.items()):
        trial = flow.analyse(saved | {p})
        size = _kept_bytes(region, trial, sizes)
        if size < best:
            saved.add(p)
            best, lv = size, trial
            region.promote(p, early[j], (region.packed_versions[j],))
    return lv

def _kept_bytes(region: RegionState, lv: Any, sizes: dict[int, int]) -> int:
    """Bytes ``lv`` keeps; ``sizes`` memoises each position's (a trial per candidate reads them all)."""
    total = 0
    for p in lv.cached:
        size = sizes.get(p)
        if size is None:
            size = sizes[p] = sum(_xla.shape_nbytes(t) for t in tensors(region.cache[p][0])) \
                if p in region.cache else spec_nbytes(region.records[p].spec)
        total += size
    for i in lv.inputs:
        t = region.inputs[i]
        total += _xla.shape_nbytes(t) if t is not None else 0
    return total

def _prune_outputs(region: RegionState, read: set[Any]) -> None:
    """A cached multi-output op keeps only the outputs something reads (layer norm's statistics...)."""
    for pos, (cached, _versions) in list(region.cache.items()):
        if isinstance(cached, torch.Tensor) or not isinstance(cached, (tuple, list)):
            continue
        pruned = tuple(
            Pruned(spec_of(t)) if isinstance(t, torch.Tensor) and _xla.buffer_key(t) not in read else t
            for t in cached
        )
        if any(isinstance(t, Pruned) for t in pruned):
            region.prune(pos, pruned)


class _Liveness(threading.local):
    def __init__(self) -> None:
        # False: regions whose forward ends on this thread keep every output the policy kept. The tests
        # turn it off for a block to compare the policy's own choices with another lowering's.
        self.on = True


_liveness = _Liveness()
