"""XLA: record a region's forward and build the ATen program its recompute runs instead of ``fn``.

The general replay (``_engine/replay.py``) runs ``fn`` a second time under a dispatch mode and checks each
op against the forward. On XLA that second trace is most of a region's backward host time: ``fn``'s
Python (modules, hooks) and one trip through the Python mode per op, dead ones included. On a TPU
the host trace often *is* the step time.

Below functionalization every op XLA runs is functional (views are ``*_copy`` ops, in-place writes
are new values), and a recomputed random op draws from the forward's seed (``_record.replay_state.Draw``).
So the forward's ops, with their tensor arguments recorded as references to earlier values, are a
program that can be run again exactly:
only the ops backward needs (walking back from what autograd saved), from the region inputs, the
cached outputs and the forward's outside tensors, with no Python from ``fn`` and no mode. The
recompute cannot diverge from the forward (the same ops, the same non-tensor arguments), so a
function that reads Python-side state gives the forward's gradient here instead of an error.

Work that bypasses the dispatcher is invisible to the record. The one torch_xla attaches to a value
that the program recomputes is a sharding (``xs.mark_sharding``, see ``_base.xla_state``): ATen ops
never set one, so each sharding found on a recorded value at the end of forward is put back on its
recomputed (or fenced) value; a MANUAL sharding cannot be put back that way, and the general replay
runs. A tensor made outside ATen (``_XLAC`` calls that return one) is no recorded value: the program
reads the forward's tensor, as it does for tensors from outside the region.

A region uses it when its forward allows (``Recorder.build`` says why not otherwise, and the
general replay runs): no in-place op inside the region (on its inputs or as a mutable op), no
``autograd.grad`` inside ``fn``, no ``verify``, and every tensor backward needs reachable.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import torch

from xla_ckpt._base.xla import buffer_key
from xla_ckpt._base.xla_state import is_manual, sharding_of, spmd
from xla_ckpt._engine.program import (Arg, Const, In, Out, OutStep, Program, Ref, Step, StepRef, ViewOut, ViewStep,
                                      start_order)
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.record import LEAF_TYPES, draws, tensors

__all__ = ["Recorder", "direct_replay"]


class _Replay(threading.local):
    def __init__(self) -> None:
        # False: XLA regions whose forward starts on this thread run fn again, as a region the program
        # cannot serve does. The tests turn it off for a block to prove the general replay on XLA too.
        self.program = True


_replay = _Replay()


def direct_replay() -> bool:
    """Whether XLA regions whose forward starts now may replay their recorded program."""
    return _replay.program


def _value_key(t: torch.Tensor) -> Any:
    """A value's name in the program: its buffer on XLA (every view is a buffer of its own there).

    Elsewhere (a CPU tensor inside an XLA region: ``torch.arange(n).reshape(...).to(xla)``) a view shares
    its base's storage, so its shape, strides and offset join the key; by buffer alone the program would feed the
    un-reshaped base to the copy (silently wrong grads).
    """
    k = buffer_key(t)
    return k if t.is_xla else (k, tuple(t.shape), t.stride(), t.storage_offset())  # type: ignore[attr-defined]


class _Unsupported(Exception):
    """An argument the program cannot hold (a container other than tuple, list or dict)."""


def _template(x: Any, ref_of: Callable[[torch.Tensor], Ref], refs: list[Ref]) -> Any:
    """Recorded arguments with each tensor replaced by an ``Arg`` (its reference appended to ``refs``)."""
    if isinstance(x, torch.Tensor):
        r = ref_of(x)
        refs.append(r)
        return Arg(r)
    tp = type(x)
    if tp is tuple or tp is list:
        # One walk, no call per size, dim or tensor element (an op's arguments are mostly these).
        out = []
        for y in x:
            if type(y) in LEAF_TYPES:
                out.append(y)
            elif isinstance(y, torch.Tensor):
                r = ref_of(y)
                refs.append(r)
                out.append(Arg(r))
            else:
                out.append(_template(y, ref_of, refs))
        return tuple(out) if tp is tuple else out
    if tp is dict:
        return {k: _template(y, ref_of, refs) for k, y in x.items()}
    if tp not in LEAF_TYPES:
        raise _Unsupported(f"an argument of type {tp.__name__}")
    return x


def _split(args: Any, ref_of: Callable[[torch.Tensor], Ref], refs: list[Ref]) -> tuple[list, list, list]:
    """An op's positional arguments as ``Step`` takes them: (base, holes, nested), in one walk."""
    base: list = []
    holes: list = []
    nested: list = []
    for i, y in enumerate(args):
        if type(y) in LEAF_TYPES:
            base.append(y)
        elif isinstance(y, torch.Tensor):
            r = ref_of(y)
            refs.append(r)
            holes.append((i, r))
            base.append(None)
        else:
            n = len(refs)
            t = _template(y, ref_of, refs)
            if len(refs) > n:  # a container of tensors: filled per run
                nested.append((i, t))
                base.append(None)
            else:
                base.append(t)
    return base, holes, nested


class Recorder:
    """Collects a region's forward ops (XLA) until the end of forward, then builds its Program."""

    def __init__(self) -> None:
        self.views: list[tuple[int, Any, tuple, dict, Any]] = []  # (position count before it, op, args, kwargs, out)
        self.why_not: Optional[str] = None

    def view(self, before: int, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """A view op ran after the region's first ``before`` ops."""
        self.views.append((before, func, args, kwargs, out))

    def refuse(self, why: str) -> None:
        if self.why_not is None:
            self.why_not = why

    def build(self, region: RegionState, calls: list[Any], packed_keys: list[Any], dep_keys: list[tuple[Any, ...]],
              kept: dict[int, torch.Tensor]) -> Optional[Program]:
        """The program for what backward reads, or None (with ``why_not``) when the general replay must run.

        ``calls``: the forward's OpCall at each position.
        """
        if self.why_not is not None:
            return None
        if region.pristine:
            self.refuse("fn writes to one of its inputs")
            return None
        records = region.records
        if any(r.info.mutable for r in records):
            self.refuse("fn runs a mutable op")
            return None
        value_of: dict[Any, Ref] = {}
        for k, i in region.input_keys.items():
            if region.inputs[i] is not None:
                value_of.setdefault(k, In(i))
        vi = 0
        views = self.views
        for p, call in enumerate(calls):
            while vi < len(views) and views[vi][0] <= p:
                self._add_view(vi, value_of)
                vi += 1
            for j, t in enumerate(tensors(call.out)):
                k = buffer_key(t)
                if k in dep_keys[p]:
                    self.refuse(f"{call.op} returns one of its arguments")  # not functional
                    return None
                value_of[k if t.is_xla else _value_key(t)] = Out(p, j)  # type: ignore[attr-defined]
        while vi < len(views):
            self._add_view(vi, value_of)
            vi += 1

        consts: list[torch.Tensor] = []
        const_of: dict[Any, int] = {}
        needed: set[StepRef] = set()  # steps to run
        cached: set[int] = set()
        templates: dict[StepRef, tuple[Any, list, list, list, Any, bool]] = {}

        def ref_of(t: torch.Tensor) -> Ref:
            k = buffer_key(t)
            if not t.is_xla:  # type: ignore[attr-defined]  # ``_value_key``, inline: a call per tensor argument
                k = (k, tuple(t.shape), t.stride(), t.storage_offset())
            ref = value_of.get(k)
            if ref is None:  # from outside the region: the forward's tensor, as autograd would keep it
                c = const_of.get(k)
                if c is None:
                    c = const_of[k] = len(consts)
                    consts.append(t)
                return Const(c)
            return ref

        todo: list[StepRef] = []
        starts: set[Ref] = set()  # fenced: inputs and cached outputs that recomputed ops or backward read

        def need(ref: Ref) -> bool:
            """Whether the program can have ``ref`` (a step to run is queued; what it starts from is fenced).

            Inputs and cached outputs are fenced also where backward reads them straight from the forward,
            as the general replay hands them out: unfenced, XLA schedules their uses (transposes, copies)
            before the gradient exists (memory_budget(0.9), default GPT: 228 MiB peak against 196).
            """
            if isinstance(ref, In):
                starts.add(ref)
                return region.inputs[ref.i] is not None
            if isinstance(ref, Const):
                return True
            if isinstance(ref, Out) and ref.pos in region.cache:
                starts.add(ref)
                cached.add(ref.pos)
                return True
            step: StepRef = OutStep(ref.pos) if isinstance(ref, Out) else ViewStep(ref.view)
            if step not in needed:
                needed.add(step)
                todo.append(step)
            return True

        slots: list[Ref] = []
        for j, k in enumerate(packed_keys):
            ref = value_of.get(k)
            if ref is None:
                saved = kept.get(j)
                if saved is None:
                    self.refuse(f"saved tensor #{j} is not a value of the region's forward")
                    return None
                c = const_of.get(k)
                if c is None:
                    c = const_of[k] = len(consts)
                    consts.append(saved)
                ref = Const(c)
            if not need(ref):
                self.refuse(f"saved tensor #{j} needs an input the region dropped")
                return None
            slots.append(ref)
        while todo:
            step = todo.pop()
            func, args, kwargs = self._producer(calls, step)
            if isinstance(step, OutStep) and records[step.pos].info.random and records[step.pos].draw is None and draws(
                    records[step.pos].info, args, kwargs):
                self.refuse("a random op whose draw was not recorded would be recomputed")
                return None
            refs: list[Ref] = []
            try:
                base, holes, nested = _split(args, ref_of, refs)
                n = len(refs)
                kw = _template(kwargs, ref_of, refs) if kwargs else kwargs
                templates[step] = (func, base, holes, nested, kw, len(refs) == n)
            except _Unsupported as e:
                self.refuse(f"{func} takes {e}")
                return None
            for r in refs:
                if not need(r):
                    self.refuse(f"{func} needs an input the region dropped")
                    return None
        # Forward order, a view after position ``before`` - 1 (keys in one comprehension: no call per step).
        order = sorted([((s[0], 1, 0) if isinstance(s, OutStep) else (views[s[0]][0], 0, s[0]), s) for s in needed])
        steps = [Step(s, *templates[s], records[s.pos].draw if isinstance(s, OutStep) else None) for _, s in order]
        shardings: dict[Ref, Any] = {}
        if spmd():
            for ref, t in self._values(region, calls, needed, starts):
                if is_manual(t):
                    self.refuse("fn makes a manually sharded value (xs.enable_manual_sharding)")
                    return None
                sharding = sharding_of(t)
                if sharding is not None:
                    shardings[ref] = sharding
        return Program(steps, slots, consts, cached, sorted(starts, key=start_order), shardings)

    def _values(self, region: RegionState, calls: list[Any], needed: set[StepRef], starts: set[Ref]) -> Any:
        """The forward's tensor behind each value the program recomputes or starts from, with its reference."""
        for step in needed:
            out = calls[step[0]].out if isinstance(step, OutStep) else self.views[step[0]][4]
            for j, t in enumerate(tensors(out)):
                yield step.value(j), t
        for ref in starts:
            if isinstance(ref, In):
                yield ref, region.inputs[ref.i]
            elif isinstance(ref, Out):
                yield ref, tensors(calls[ref.pos].out)[ref.j]

    def _producer(self, calls: list[Any], step: StepRef) -> tuple[Any, tuple, dict]:
        """The recorded op behind ``step`` (``calls``: the forward's OpCall at each position): (op, args, kwargs)."""
        if isinstance(step, OutStep):
            call = calls[step.pos]
            return call.op, call.args, call.kwargs
        return self.views[step[0]][1:4]

    def _add_view(self, v: int, value_of: dict) -> None:
        _, _, args, kwargs, out = self.views[v]
        # A view's tensor argument is its base (args[0] for every ATen view op).
        base = args[0] if args and isinstance(args[0], torch.Tensor) else None
        read = {_value_key(t) for t in tensors((args, kwargs))} if base is None else (_value_key(base),)
        if type(out) is torch.Tensor:
            k = _value_key(out)
            if k not in read:  # lift_fresh, alias: the same value as their argument, not a new one
                value_of.setdefault(k, ViewOut(v, 0))
        else:
            for j, t in enumerate(tensors(out)):
                k = _value_key(t)
                if k not in read:
                    value_of.setdefault(k, ViewOut(v, j))
