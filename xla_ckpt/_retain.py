"""What a region keeps once its forward has ended: planning policies, liveness, promotion, pruning.

The forward caches every output the policy keeps. At the end of forward (``_Region.finish_forward``)
the region knows everything backward can read, and keeps only that: a planning policy decides its
positions over the whole region (``plan``); outputs nothing reads are dropped, dead ops are marked
so the replay skips them, inputs backward never reads are let go (``keep_only_live``, using
``_liveness``); on eager devices an op's output replaces what recomputing it needs where that keeps
fewer bytes (``_promote``), and a multi-output op keeps only the outputs something reads.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch.utils._pytree import tree_map

from xla_ckpt import _xla
from xla_ckpt._liveness import Dataflow
from xla_ckpt._plan import RegionView, check_plan
from xla_ckpt._policy import Decision, OpCall, Policy
from xla_ckpt._record import fn_name as _name, spec_of, tensors

if TYPE_CHECKING:
    from xla_ckpt._engine import _Region

__all__ = ["Absent", "Pruned", "plan", "demote", "keep_only_live"]

SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE


class Absent:
    """Stands in the region's arguments for an input backward never reads (the region drops it)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class Pruned:
    """A cached output nothing reads: a stand-in of its shape is handed out in its place."""

    __slots__ = ("spec",)

    def __init__(self, spec: Any) -> None:
        self.spec = spec


def plan(region: "_Region", policy: Policy, positions: list[int], calls: list[Optional[OpCall]], flow: Dataflow) -> None:
    """Ask a planning policy about its positions still saved (a write inside fn demoted the others)."""
    free = [p for p in positions if p in region.cache]
    view = RegionView(calls, free, set(region.cache), flow, region.inputs, region.packed_keys, prune=not region.on_xla)
    try:
        decisions = policy.plan(view)
    except Exception as e:
        e.add_note(f"raised by the planning policy {policy!r} of the checkpointed function {_name(region.fn)}")
        raise
    for p, d in zip(free, check_plan(policy, view, decisions)):
        if d is RECOMPUTE:
            demote(region, p)
        elif d is OFFLOAD:
            region.records[p] = replace(region.records[p], decision=OFFLOAD)  # moved by _offload.move_out

def demote(region: "_Region", pos: int) -> None:
    """A cached position becomes RECOMPUTE (the replay re-runs it; eager keeps its spec for stand-ins)."""
    cached, _ = region.cache.pop(pos)
    region.records[pos] = replace(region.records[pos], decision=RECOMPUTE, spec=None if region.on_xla else spec_of(cached))

def keep_only_live(region: "_Region", flow: Dataflow, early: list[torch.Tensor]) -> Optional[frozenset[int]]:
    """Drop what backward cannot read (see ``_liveness``): cached outputs, dead ops, unread inputs.

    Returns the positions the replay runs (None: all of them).
    """
    if region.verify:
        return None  # verify recomputes every position from real inputs
    saved = set(region.cache)
    lv = flow.analyse(saved)
    if not region.on_xla:
        lv = _promote(region, flow, early, saved, lv)
    for pos in list(region.cache):
        if pos not in lv.cached:
            demote(region, pos)
    for pos, rec in enumerate(region.records):
        if pos not in lv.live and pos not in lv.cached and rec.spec is not None:
            region.records[pos] = replace(rec, live=False)
    if not region.on_xla:
        _prune_outputs(region, flow.read_keys(lv, region.packed_keys))
    if flow.shared_inputs:
        return lv.live
    for i, t in enumerate(region.inputs):
        if i not in lv.inputs and i not in region.absent:
            region.absent[i] = (t.shape, t.stride(), t.dtype, t.device, t.requires_grad, torch._is_functional_tensor(t))
    if region.absent:
        gone = {id(region.inputs[i]): i for i in region.absent}
        region.args, region.kwargs = tree_map(
            lambda a: Absent(gone[id(a)]) if isinstance(a, torch.Tensor) and id(a) in gone else a,
            (region.args, region.kwargs))
        for i in region.absent:
            region.inputs[i] = None
            region.pristine.pop(i, None)
    return lv.live

def _promote(region: "_Region", flow: Dataflow, early: list[torch.Tensor], saved: set[int], lv: Any) -> Any:
    """Keep an op's output instead of what recomputing it needs, where that keeps fewer bytes.

    A recomputed op whose whole output autograd saved (held until the end of forward) can be
    kept as it is: ``x + lora(x)`` recomputed from two saved matmuls keeps two tensors where its
    own output is one. Accepted only when the region then keeps fewer bytes; it also recomputes less.
    """
    candidates: dict[int, int] = {}
    for j, p in enumerate(flow.packed):
        rec = region.records[p] if p >= 0 else None
        if rec is None or p not in lv.live or p in candidates or j in region.dirty or rec.info.mutable:
            continue
        if rec.spec is None or not isinstance(rec.spec[0], torch.Size):
            continue  # single-tensor outputs only
        t = early[j]
        if (t.shape, t.stride(), t.dtype) == rec.spec[:3] and t.storage_offset() == 0:
            candidates[p] = j
    if not candidates:
        return lv
    best = _kept_bytes(region, lv)
    for p, j in sorted(candidates.items()):
        trial = flow.analyse(saved | {p})
        size = _kept_bytes(region, trial)
        if size < best:
            saved.add(p)
            best, lv = size, trial
            region.cache[p] = (early[j], (region.packed_versions[j],))
            region.records[p] = replace(region.records[p], decision=SAVE)
    return lv

def _kept_bytes(region: "_Region", lv: Any) -> int:
    total = 0
    for p in lv.cached:
        total += sum(_xla.shape_nbytes(t) for t in tensors(region.cache[p][0])) if p in region.cache else _meta_bytes(
            region.records[p].spec)
    for i in lv.inputs:
        t = region.inputs[i]
        total += _xla.shape_nbytes(t) if t is not None else 0
    return total

def _prune_outputs(region: "_Region", read: set[Any]) -> None:
    """A cached multi-output op keeps only the outputs something reads (layer norm's statistics...)."""
    for pos, (cached, versions) in list(region.cache.items()):
        if isinstance(cached, torch.Tensor) or not isinstance(cached, (tuple, list)):
            continue
        pruned = tuple(
            Pruned(spec_of(t)) if isinstance(t, torch.Tensor) and _xla.buffer_key(t) not in read else t
            for t in cached
        )
        if any(isinstance(t, Pruned) for t in pruned):
            region.cache[pos] = (pruned, versions)


def _meta_bytes(spec: Any) -> int:
    shape, _, dtype, _ = spec
    return math.prod(shape) * dtype.itemsize
