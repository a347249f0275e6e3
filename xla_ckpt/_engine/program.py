"""The recorded program of a region (XLA): the ops backward needs, run again from references.

``direct.Recorder`` builds it at the end of forward (see there for when a region can use one); the
recompute runs it instead of ``fn``. Each step is a recorded ATen op whose tensor arguments are
references to earlier values: region inputs, cached outputs, other steps' outputs, or tensors from
outside the region (the forward's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import torch
from torch.utils._pytree import tree_map

from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._base.xla_state import annotate
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.record import tensors

if TYPE_CHECKING:
    from xla_ckpt._record.replay_state import Draw, Fence

__all__ = ["Program", "Arg", "Step", "Ref"]

# Value references: ("in", i) region input, ("out", p, j) output j of position p, ("view", v, j)
# output j of recorded view v, ("const", k) a tensor from outside the region (the forward's).
Ref = tuple


class Arg:
    """A tensor argument in a recorded op, replaced by a reference to the value it was."""

    __slots__ = ("ref",)

    def __init__(self, ref: Ref) -> None:
        self.ref = ref


class Step:
    """One recorded op of the program: ``func`` on its arguments, tensors given by reference.

    The positional arguments come split, by the one walk that made them (``direct._split``), into what
    never changes (``base``) and the holes to fill per run: an op's arguments are mostly a flat tuple of
    tensors and numbers, and the recompute runs every step of every region each backward (walking templates
    would take a third of its host time; a second walk at build time, a third of the forward's end).

    Args:
        ref: ``("out", p)`` or ``("view", v)``: which recorded value the step recomputes.
        func: the ATen op.
        base: the positional arguments, each tensor replaced by None.
        holes: ``(index, ref)`` per positional tensor.
        nested: ``(index, template)`` per positional container holding tensors (``Arg`` inside).
        kwargs: the keyword template (``Arg`` for each tensor), or the keywords themselves when
            ``static_kwargs``.
        draw: a random op: the forward's RNG state around it.
    """

    __slots__ = ("ref", "func", "base", "holes", "nested", "kwargs", "static_kwargs", "draw")

    def __init__(self, ref: Ref, func: Any, base: list, holes: list, nested: list, kwargs: Any,
                 static_kwargs: bool, draw: Optional["Draw"] = None) -> None:
        self.ref = ref
        self.func = func
        self.base = base
        self.holes = holes
        self.nested = nested
        self.kwargs = kwargs
        self.static_kwargs = static_kwargs
        self.draw = draw

    def call_args(self, arg: Callable[[Ref], Any]) -> tuple[tuple, dict]:
        """The step's arguments with each ``Arg`` replaced by its value (``arg(ref)``)."""
        a = self.base.copy()
        for i, ref in self.holes:
            a[i] = arg(ref)
        for i, tmpl in self.nested:
            a[i] = _fill(tmpl, arg)
        return tuple(a), (self.kwargs if self.static_kwargs else _fill(self.kwargs, arg))


class Program:
    """The ops backward needs, in forward order, and where each saved tensor comes from."""

    def __init__(self, steps: list[Step], slots: list[Ref], consts: list[torch.Tensor], cached: set[int],
                 starts: list[Ref], shardings: Optional[dict[Ref, Any]] = None) -> None:
        self.steps = steps
        self.slots = slots
        self.consts = consts
        self.cached = cached  # positions whose cached outputs the program reads
        self.starts = starts  # fenced before use: region inputs and cached outputs read by steps or slots
        # SPMD: value -> the sharding fn attached to it outside ATen (``xs.mark_sharding``), put back
        # on the recomputed (or fenced) value, or the partitioner recomputes it replicated.
        self.shardings = shardings or {}

    def run(self, region: RegionState, fence: Optional["Fence"], barrier: Callable[[list[torch.Tensor]], None]
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
                if step.draw is None:
                    args, kwargs = step.call_args(arg)
                    out = step.func(*args, **kwargs)
                else:
                    out = _redraw(step, arg, records[step.ref[1]].module)
                    if fence is not None:
                        # Fenced too: the draw reads only its seed and shapes, so XLA would otherwise
                        # compute the mask before the gradient arrives and hold it (default GPT with
                        # dropout 0.1, `full`: compiled peak 141 MiB against 121 fenced).
                        out = tree_map(lambda t: fence.apply(t) if isinstance(t, torch.Tensor) else t, out)
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


# Module-level, not nested: a recursive closure is a reference cycle (function -> cell -> function),
# and it would keep everything its frame saw (the forward's tensors) alive until Python's GC runs:
# on XLA they became outputs of the step graph (a compiled peak 4x no checkpointing).
def _fill(x: Any, arg: Callable[[Ref], Any]) -> Any:
    """A template with each ``Arg`` replaced by its value."""
    tp = type(x)
    if tp is Arg:
        return arg(x.ref)
    if tp is tuple:
        return tuple([_fill(y, arg) for y in x])
    if tp is list:
        return [_fill(y, arg) for y in x]
    if tp is dict:
        return {k: _fill(y, arg) for k, y in x.items()}
    return x


def _redraw(step: Step, arg: Callable[[Ref], Any], module: str) -> Any:
    """A random op run from the forward's RNG state (see ``_record.replay_state.Draw``)."""
    args, kwargs = step.call_args(arg)
    out, matched = step.draw.replay(lambda: step.func(*args, **kwargs))  # type: ignore[union-attr]
    if not matched:
        raise CheckpointError(
            f"the random numbers of {step.func} in module '{module}' cannot be reproduced: its generator "
            f"({step.draw.source}) was advanced by a draw that interleaved with this op, in the forward or in "  # type: ignore[union-attr]
            "the recomputation (another thread drawing on the same device). Keep other threads from drawing "
            "while checkpointed random ops run."
        )
    return out


def _wrap(t: torch.Tensor) -> torch.Tensor:
    """A tensor from below functionalization (the mode's view), as autograd's level expects it."""
    return t if torch._is_functional_tensor(t) else torch._to_functional_tensor(t)
