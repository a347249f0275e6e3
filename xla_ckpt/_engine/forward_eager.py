"""The forward on eager devices (CPU, CUDA): in-place writes judged where they happen, saved tensors as aliases.

Eager tensors carry version counters and views share storage: a write to a region input takes a
copy of its value first, a write to a kept output demotes it to recompute, and what autograd saves
is held as a detached alias until the forward ends (``retain`` may keep it as a promoted output).
"""

from __future__ import annotations

import functools
from typing import Any, Optional, cast

import torch

from xla_ckpt._base.overlap import elements_apart
from xla_ckpt._base.xla import buffer_key
from xla_ckpt._engine.forward import Forward, Slot, _Unpacks, detach_unseen
from xla_ckpt._engine.hook_values import HookValue
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.opcall import Policy
from xla_ckpt._record.record import OpInfo, tensors, written
from xla_ckpt._record.spec import spec_of

__all__ = ["EagerForward"]


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
        # The alias itself (``retain`` may keep it as a promoted output); dropped when the forward ends.
        self.early.append(detach_unseen(t, self))
        key = buffer_key(t)  # inline, as below: one call less per saved tensor
        self.flow.pack(key, t)
        return Slot(self.owner, self.state.pack(t, key))

    def _early_out(self, t: torch.Tensor) -> torch.Tensor:
        return t

    def hook_wrote(self, written: list[torch.Tensor]) -> None:
        # From now on these buffers hold the hook's values, which the replay hands back as the hook's
        # result: the op that made one is recomputed (demoted) and never keeps the written value as its
        # own output (``retain``'s promotion): its recomputed output is the value before the hook.
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
