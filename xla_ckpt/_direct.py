"""XLA: replay a region from its recorded ATen program instead of running ``fn`` again.

The general replay (``_replay.py``) runs ``fn`` a second time under a dispatch mode and checks each
op against the forward. On XLA that second trace is most of a region's backward host time: ``fn``'s
Python (modules, hooks) and one trip through the Python mode per op, dead ones included. On a TPU
the host trace often *is* the step time.

Below functionalization every op XLA runs is functional (views are ``*_copy`` ops, in-place writes
are new values), and random ops are always saved there. So the forward's ops, with their tensor
arguments recorded as references to earlier values, are a program that can be run again exactly:
only the ops backward needs (walking back from what autograd saved), from the region inputs, the
cached outputs and the forward's outside tensors, with no Python from ``fn`` and no mode. The
recompute cannot diverge from the forward (the same ops, the same non-tensor arguments), so a
function that reads Python-side state gives the forward's gradient here instead of an error.

Work that bypasses the dispatcher is invisible to the record. The one torch_xla attaches to a value
that the program recomputes is a sharding (``xs.mark_sharding``, see ``_xla_state``): ATen ops
never set one, so each sharding found on a recorded value at the end of forward is put back on its
recomputed (or fenced) value; a MANUAL sharding cannot be put back that way, and the general replay
runs. A tensor made outside ATen (``_XLAC`` calls that return one) is no recorded value: the program
reads the forward's tensor, as it does for tensors from outside the region.

A region uses it when its forward allows (``Recorder.build`` says why not otherwise, and the
general replay runs): no in-place op inside the region (on its inputs or as a mutable op), no
``autograd.grad`` inside ``fn``, no ``verify``, and every tensor backward needs reachable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import torch

from xla_ckpt._record import LEAF_TYPES, tensors
from xla_ckpt._xla import buffer_key
from xla_ckpt._xla_state import annotate, is_manual, sharding_of, spmd

if TYPE_CHECKING:
    from xla_ckpt._engine import _Region
    from xla_ckpt._replay_state import Fence

__all__ = ["Recorder", "Program"]

# Value references: ("in", i) region input, ("out", p, j) output j of position p, ("view", v, j)
# output j of recorded view v, ("const", k) a tensor from outside the region (the forward's).
Ref = tuple


class _Arg:
    """A tensor argument in a recorded op, replaced by a reference to the value it was."""

    __slots__ = ("ref",)

    def __init__(self, ref: Ref) -> None:
        self.ref = ref


@dataclass
class _Step:
    ref: Ref  # ("out", p) or ("view", v)
    func: Any
    args: Any  # templates: tensors replaced by _Arg
    kwargs: Any


class Program:
    """The ops backward needs, in forward order, and where each saved tensor comes from."""

    def __init__(self, steps: list[_Step], slots: list[Ref], consts: list[torch.Tensor], cached: set[int],
                 starts: list[Ref], shardings: Optional[dict[Ref, Any]] = None) -> None:
        self.steps = steps
        self.slots = slots
        self.consts = consts
        self.cached = cached  # positions whose cached outputs the program reads
        self.starts = starts  # fenced before use: region inputs and cached outputs read by steps or slots
        # SPMD: value -> the sharding fn attached to it outside ATen (``xs.mark_sharding``), put back
        # on the recomputed (or fenced) value, or the partitioner recomputes it replicated.
        self.shardings = shardings or {}

    def run(self, region: "_Region", fence: Optional["Fence"], barrier: Callable[[list[torch.Tensor]], None]
            ) -> list[torch.Tensor]:
        """The tensors autograd saved, recomputed (wrappers above functionalization, no grad)."""
        env: dict[Ref, Any] = {}
        fenced: dict[Ref, Any] = {}
        records = region.records

        def value(ref: Ref) -> Any:
            v = env.get(ref)
            if v is not None:
                return v
            kind = ref[0]
            if kind == "in":
                v = region.inputs[ref[1]].detach()
            elif kind == "const":
                v = _wrap(self.consts[ref[1]])
            elif kind == "out" and ref[1] in self.cached:
                p = ref[1]
                outs = tensors(region.cached(p, records[p].op, records[p]))
                v = _wrap(outs[ref[2]])
            else:
                raise AssertionError(f"internal: {ref} used before it is computed")
            env[ref] = v
            return v

        def arg(ref: Ref) -> Any:
            v = fenced.get(ref)
            return v if v is not None else value(ref)

        with torch.no_grad():
            shardings = self.shardings
            if fence is not None:
                # The recompute starts from fenced values (see Fence), and on TPU/GPU behind a barrier.
                for ref in self.starts:
                    fenced[ref] = f = fence.apply(value(ref))
                    sharding = shardings.get(ref) if shardings else None
                    if sharding is not None and f is not env[ref]:
                        annotate(f, sharding)
                barrier(list(fenced.values()) + [fence.zero])
            for step in self.steps:
                out = step.func(*_fill(step.args, arg), **_fill(step.kwargs, arg))
                for j, t in enumerate(tensors(out)):
                    # Every value here is a functional wrapper: a factory op (no tensor argument) run
                    # under the caller's dispatch mode (a profiler around backward) comes out bare.
                    ref = step.ref + (j,)
                    t = _wrap(t)
                    env[ref] = t
                    sharding = shardings.get(ref) if shardings else None
                    if sharding is not None:
                        annotate(t, sharding)
        # Inputs and cached outputs go to backward fenced (``starts``), as the general replay hands
        # them out: unfenced, XLA may schedule backward's uses of them before the gradient exists,
        # and a value also recomputed from would stay alive beside its fenced copy.
        return [arg(ref) for ref in self.slots]


class _Unsupported(Exception):
    """An argument the program cannot hold (a container other than tuple, list or dict)."""


# Module-level, not nested: a recursive closure is a reference cycle (function -> cell -> function),
# and it would keep everything its frame saw (the forward's tensors) alive until Python's GC runs:
# on XLA they became outputs of the step graph (a compiled peak 4x no checkpointing).
def _fill(x: Any, arg: Callable[[Ref], Any]) -> Any:
    """A template with each ``_Arg`` replaced by its value."""
    tp = type(x)
    if tp is _Arg:
        return arg(x.ref)
    if tp is tuple:
        return tuple([_fill(y, arg) for y in x])
    if tp is list:
        return [_fill(y, arg) for y in x]
    if tp is dict:
        return {k: _fill(y, arg) for k, y in x.items()}
    return x


def _template(x: Any, ref_of: Callable[[torch.Tensor], Ref], refs: list[Ref]) -> Any:
    """Recorded arguments with each tensor replaced by an ``_Arg`` (its reference appended to ``refs``)."""
    if isinstance(x, torch.Tensor):
        r = ref_of(x)
        refs.append(r)
        return _Arg(r)
    tp = type(x)
    if tp is tuple:
        return tuple([_template(y, ref_of, refs) for y in x])
    if tp is list:
        return [_template(y, ref_of, refs) for y in x]
    if tp is dict:
        return {k: _template(y, ref_of, refs) for k, y in x.items()}
    if tp not in LEAF_TYPES:
        raise _Unsupported(f"an argument of type {tp.__name__}")
    return x


def _wrap(t: torch.Tensor) -> torch.Tensor:
    """A tensor from below functionalization (the mode's view), as autograd's level expects it."""
    return t if torch._is_functional_tensor(t) else torch._to_functional_tensor(t)


class Recorder:
    """Collects a region's forward ops (XLA) until the end of forward, then builds its Program."""

    def __init__(self) -> None:
        self.calls: list[Any] = []  # per position: the OpCall (op, args, kwargs, out)
        self.views: list[tuple[int, Any, tuple, dict, Any]] = []  # (position count before it, op, args, kwargs, out)
        self.why_not: Optional[str] = None

    def view(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        self.views.append((len(self.calls), func, args, kwargs, out))

    def refuse(self, why: str) -> None:
        if self.why_not is None:
            self.why_not = why

    def build(self, region: "_Region", packed_keys: list[Any], dep_keys: list[tuple[Any, ...]],
              kept: dict[int, torch.Tensor]) -> Optional[Program]:
        """The program for what backward reads, or None (with ``why_not``) when the general replay must run."""
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
                value_of.setdefault(k, ("in", i))
        producers: dict[Ref, tuple[Any, tuple, dict]] = {}
        order: dict[Ref, tuple[int, int, int]] = {}
        vi = 0
        views = self.views
        for p, call in enumerate(self.calls):
            while vi < len(views) and views[vi][0] <= p:
                self._add_view(vi, value_of, producers, order)
                vi += 1
            for j, t in enumerate(tensors(call.out)):
                k = buffer_key(t)
                if k in dep_keys[p]:
                    self.refuse(f"{call.op} returns one of its arguments")  # not functional
                    return None
                value_of[k] = ("out", p, j)
            producers[("out", p)] = (call.op, call.args, call.kwargs)
            order[("out", p)] = (p, 1, 0)
        while vi < len(views):
            self._add_view(vi, value_of, producers, order)
            vi += 1

        consts: list[torch.Tensor] = []
        const_of: dict[Any, int] = {}
        needed: set[Ref] = set()  # steps to run: ("out", p) or ("view", v)
        cached: set[int] = set()
        templates: dict[Ref, tuple[Any, Any]] = {}

        def ref_of(t: torch.Tensor) -> Ref:
            k = buffer_key(t)
            ref = value_of.get(k)
            if ref is None:  # from outside the region: the forward's tensor, as autograd would keep it
                c = const_of.get(k)
                if c is None:
                    c = const_of[k] = len(consts)
                    consts.append(t)
                return ("const", c)
            return ref

        todo: list[Ref] = []
        starts: set[Ref] = set()  # fenced: inputs and cached outputs that recomputed ops or backward read

        def need(ref: Ref) -> bool:
            kind = ref[0]
            if kind == "in":
                return region.inputs[ref[1]] is not None
            if kind == "const":
                return True
            if kind == "out" and ref[1] in region.cache:
                cached.add(ref[1])
                return True
            step = ref[:2]
            if step not in needed:
                needed.add(step)
                todo.append(step)
            return True

        slots: list[Ref] = []
        for j, k in enumerate(packed_keys):
            ref = value_of.get(k)
            if ref is None:
                t = kept.get(j)
                if t is None:
                    self.refuse(f"saved tensor #{j} is not a value of the region's forward")
                    return None
                c = const_of.get(k)
                if c is None:
                    c = const_of[k] = len(consts)
                    consts.append(t)
                ref = ("const", c)
            if not need(ref):
                self.refuse(f"saved tensor #{j} needs an input the region dropped")
                return None
            slots.append(ref)
            if ref[0] == "in" or (ref[0] == "out" and ref[1] in region.cache):
                # Fenced too, as the general replay hands them out: a saved value backward reads
                # straight from the forward lets XLA schedule its uses (transposes, copies) before
                # the gradient exists (memory_budget(0.9), default GPT: 228 MiB peak against 196).
                starts.add(ref)
        while todo:
            step = todo.pop()
            func, args, kwargs = producers[step]
            if step[0] == "out" and records[step[1]].info.random:
                self.refuse("a random op would be recomputed")
                return None
            refs: list[Ref] = []
            try:
                templates[step] = (_template(args, ref_of, refs), _template(kwargs, ref_of, refs))
            except _Unsupported as e:
                self.refuse(f"{func} takes {e}")
                return None
            for r in refs:
                if r[0] == "in" or (r[0] == "out" and r[1] in region.cache):
                    starts.add(r)
                if not need(r):
                    self.refuse(f"{func} needs an input the region dropped")
                    return None
        steps = [_Step(s, producers[s][0], *templates[s]) for s in sorted(needed, key=order.__getitem__)]
        shardings: dict[Ref, Any] = {}
        if spmd():
            for ref, t in self._values(region, needed, starts):
                if is_manual(t):
                    self.refuse("fn makes a manually sharded value (xs.enable_manual_sharding)")
                    return None
                sharding = sharding_of(t)
                if sharding is not None:
                    shardings[ref] = sharding
        return Program(steps, slots, consts, cached, sorted(starts), shardings)

    def _values(self, region: "_Region", needed: set[Ref], starts: set[Ref]) -> Any:
        """The forward's tensor behind each value the program recomputes or starts from, with its reference."""
        for ref in needed:
            out = self.calls[ref[1]].out if ref[0] == "out" else self.views[ref[1]][4]
            for j, t in enumerate(tensors(out)):
                yield ref + (j,), t
        for ref in starts:
            if ref[0] == "in":
                yield ref, region.inputs[ref[1]]
            else:
                yield ref, tensors(self.calls[ref[1]].out)[ref[2]]

    def _add_view(self, v: int, value_of: dict, producers: dict, order: dict) -> None:
        before, func, args, kwargs, out = self.views[v]
        read = {buffer_key(t) for t in tensors((args, kwargs))}
        for j, t in enumerate(tensors(out)):
            k = buffer_key(t)
            if k not in read:  # lift_fresh, alias: the same value as their argument, not a new one
                value_of.setdefault(k, ("view", v, j))
        producers[("view", v)] = (func, args, kwargs)
        order[("view", v)] = (before, 0, v)  # after position before-1, before position ``before``
