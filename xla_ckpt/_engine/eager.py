"""What only eager devices (CPU, CUDA) do: each engine step's eager algorithm, chosen once per region.

Eager tensors carry version counters and views share storage. In the forward (``EagerForward``) a write to
a region input takes a copy of its value first, a write to a kept output demotes it to recompute, and
what autograd saves is held as a detached alias until the forward ends. At its end (``EagerRetain``) an
op's output may replace what recomputing it needs where that keeps fewer bytes (``_promote``), and a
multi-output op keeps only the outputs something reads. Outside tensors are watched by the versions of
the tensors the ops read (``EagerOutside``); backward runs ``fn`` again from the region's inputs
(``EagerBackward``). ``device.py`` bundles them; XLA's counterparts are in ``forward_xla.py`` and
``xla_steps.py``.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Collection, Optional, cast

import torch
from torch import nn

from xla_ckpt._base import xla as _xla
from xla_ckpt._base.overlap import elements_apart
from xla_ckpt._base.xla import buffer_key
from xla_ckpt._engine.entries import Pruned
from xla_ckpt._engine.forward import Forward, Slot, _Unpacks, detach_unseen
from xla_ckpt._engine.hook_values import HookValue
from xla_ckpt._engine.outside import Outside, Watch, constant, namer
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.liveness import Dataflow
from xla_ckpt._record.opcall import Policy
from xla_ckpt._record.record import OpInfo, tensors, written
from xla_ckpt._record.replay_state import Fence
from xla_ckpt._record.spec import WrapperSpec, spec_nbytes, spec_of

__all__ = ["EagerForward", "EagerRetain", "EagerOutside", "EagerBackward"]


def _detached_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t``'s value, below autograd (its version counter is its own)."""
    return t.detach().clone()


class EagerForward(Forward):
    """Eager devices (CPU, CUDA): tensors carry versions and views share storage."""

    recompute_spec = staticmethod(spec_of)

    def __init__(self, state: RegionState, policy: Policy, owner: _Unpacks) -> None:
        super().__init__(state, policy, owner)
        self.cache_keys: dict[Any, int] = {}  # an in-place write to a kept output demotes it (``before_write``)
        self.hook_keys: dict[Any, list[HookValue]] = {}  # a user hook's results, by buffer (``before_write``)

    def skipped(self, func: Any, info: OpInfo, args: tuple, kwargs: dict) -> Any:
        return func(*args, **kwargs)

    def before_writes(self, info: OpInfo, args: tuple, kwargs: dict) -> None:
        self.before_write(written(info, args, kwargs), info.mutable, self.packed_before)

    def pack(self, t: torch.Tensor) -> Slot:
        # The alias itself (``EagerRetain`` may keep it as a promoted output); dropped when the forward ends.
        self.early.append(detach_unseen(t, self))
        key = buffer_key(t)  # inline, as below: one call less per saved tensor
        self.flow.pack(key, t)
        return Slot(self.owner, self.state.pack(t, key))

    def _early_out(self, t: torch.Tensor) -> torch.Tensor:
        return t

    def hook_wrote(self, written: list[torch.Tensor]) -> None:
        # From now on these buffers hold the hook's values, which the replay hands back as the hook's
        # result: the op that made one is recomputed (demoted) and never keeps the written value as its
        # own output (``EagerRetain``'s promotion): its recomputed output is the value before the hook.
        producer = self.flow.producer
        for t in written:
            key = buffer_key(t)
            self._recompute_writer(key)
            p = producer.get(key, -1)
            if p >= 0:
                self.state.hook_wrote(p)

    def hook_value(self, t: torch.Tensor) -> HookValue:
        hv = HookValue(t)  # an alias, copied only if fn writes it (``before_write``)
        self.hook_keys.setdefault(buffer_key(t), []).append(hv)
        return hv

    def before_write(self, targets: list[torch.Tensor], declared: bool = True, since: Optional[int] = None) -> None:
        """An eager in-place op is about to write ``targets``: the write is judged here, where it happens.

        A region input gets a copy of its value before the first write (the replay starts from it);
        a kept output (or the latest op's, still undecided) is demoted to recompute, so the replay
        runs the op and then the write again instead of writing twice into the forward's value.
        ``since``: slots from this index on were saved since the op before this one ended (by its node,
        or by this op's own just before it ran: rrelu's noise, which the op fills); they are judged after
        the write by their versions, as autograd judges them (``RegionState.settle_writes``); so are
        earlier slots whose elements the write provably misses (``_base.overlap``: GRU's gates, pieces of
        one ``unsafe_split`` written in place). Any other earlier slot on the written storage is stale: a
        write that reaches its elements without autograd counting it (``.data``) the replay cannot repeat.
        """
        state = self.state
        producer = self.flow.producer
        hook_keys = self.hook_keys
        for t in targets:
            key = buffer_key(t)
            if hook_keys and key in hook_keys:
                for hv in hook_keys[key]:
                    hv.before_write()  # a hook's result: the replay hands out the value it returned
            if key not in producer:  # from outside the region: a module buffer, a closure
                # The tensor itself: a detached alias made here (below autograd) has a version
                # counter of its own, and the replay must leave the caller's unchanged.
                base = t if t._base is None else t._base
                state.writing_outside(key, base, functools.partial(_detached_copy, base))
            apart = None if since is None else (lambda s, t=t: elements_apart(self.early[s], t))
            # An input fn writes is one it was given: present (None marks inputs backward skips, set later).
            later = state.writing(key, lambda i: cast(torch.Tensor, state.inputs[i]).detach().clone(), declared,
                                  since=since, apart=apart)
            if later:
                self.written_now.extend(later)
            self._recompute_writer(key)

    def _recompute_writer(self, key: Any) -> None:
        """Buffer ``key`` is written in place: the op that made it, kept or still undecided, is recomputed."""
        pos = self.cache_keys.pop(key, None)
        if pos is not None and pos in self.state.cache:
            self.state.demote(pos)
        if self.pending is not None and not self.pending_written:
            self.pending_written = any(buffer_key(o) == key for o in tensors(self.pending[0].out))


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


class EagerOutside:
    """Eager: versions live on the tensors the ops read (a view shares its base's counter)."""

    def read(self, t: torch.Tensor) -> torch.Tensor:
        return t.detach()  # a detached alias: same storage, no memory

    def view(self, views: list, i: int, base_key: Any, flow: Dataflow, module: Optional[nn.Module]) -> None:
        pass  # a view shares its base's storage: the direct read's check covers it

    def kept(self, early: torch.Tensor) -> Optional[torch.Tensor]:
        return early  # a detached alias already (the storage autograd would have kept)

    def versions(self, watch: Watch, needed: dict[Any, str], packed_at: dict[Any, int],
                 first: dict[Any, torch.Tensor], early: list[torch.Tensor], module: Optional[nn.Module]) -> None:
        for k, reader in needed.items():
            j = packed_at.get(k)
            t = early[j] if j is not None else first.get(k)
            if t is None:
                continue
            alias = t.detach() if j is None else t  # early[j] is a detached alias already
            watch.add(Outside(constant(alias), alias._version, reader, namer(module, k, alias)))


class EagerBackward:
    """Eager devices' backward: ``fn`` runs again under the replay mode, from the region's inputs."""

    fenced = False  # the recompute reads no gradient

    program: Any = None  # no recorded program: the general replay

    def fence(self) -> Optional[Fence]:
        return None

    def start(self, base: torch.Tensor) -> torch.Tensor:
        """An input's value before fn's first write to it, as the replay starts from it."""
        return base

    def visible(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def capture_grad(self, grad: torch.Tensor) -> None:
        pass

    def settle(self, program: Any) -> None:
        assert program is None  # only XLA records a program

    def kept(self, region: RegionState) -> Collection[Any]:
        """None: eager ``copy_`` writes the buffer itself, which no kept value of the region is."""
        return ()
