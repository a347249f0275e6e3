"""The recorded program of a region (XLA): the ops backward needs, run again from references.

``direct.Recorder`` builds it at the end of forward (see there for when a region can use one); the
recompute runs it instead of ``fn``. Each step is a recorded ATen op whose tensor arguments are
references to earlier values: region inputs, cached outputs, other steps' outputs, or tensors from
outside the region (the forward's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Union

import torch

from xla_ckpt._base.xla_state import annotate
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.record import tensors

if TYPE_CHECKING:
    from xla_ckpt._record.replay_state import Draw, Fence

__all__ = ["Program", "Arg", "Step", "Ref", "In", "Out", "ViewOut", "Const", "OutStep", "ViewStep", "StepRef"]


# Value references. Each kind is a tuple of its own fields and its kind last (a default), so references of
# two kinds never compare or hash equal: they key the same dictionaries (``In(3)`` is not ``Const(3)``).
class In(NamedTuple):
    """Region input ``i``."""

    i: int
    kind: str = "in"


class Out(NamedTuple):
    """Output ``j`` of the op at position ``pos``."""

    pos: int
    j: int
    kind: str = "out"


class ViewOut(NamedTuple):
    """Output ``j`` of recorded view ``view``."""

    view: int
    j: int
    kind: str = "view"


class Const(NamedTuple):
    """Tensor ``k`` from outside the region: the forward's."""

    k: int
    kind: str = "const"


class OutStep(NamedTuple):
    """The op at position ``pos``, run again: its outputs are ``Out(pos, j)``."""

    pos: int
    kind: str = "out step"

    def value(self, j: int) -> Out:
        return Out(self.pos, j)


class ViewStep(NamedTuple):
    """Recorded view ``view``, run again: its outputs are ``ViewOut(view, j)``."""

    view: int
    kind: str = "view step"

    def value(self, j: int) -> ViewOut:
        return ViewOut(self.view, j)


Ref = Union[In, Out, ViewOut, Const]
StepRef = Union[OutStep, ViewStep]


def start_order(ref: Ref) -> tuple[int, int, int]:
    """A fixed order of the values a recompute starts from (inputs, then cached outputs): the fence's adds
    are traced in it, and one order keeps the step's graph (and XLA's compile cache hit) the same."""
    return (0, ref.i, 0) if isinstance(ref, In) else (1, ref[0], ref[1])  # type: ignore[return-value]


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
        ref: ``OutStep(p)`` or ``ViewStep(v)``: which recorded op the step runs again.
        func: the ATen op.
        base: the positional arguments, each tensor replaced by None.
        holes: ``(index, ref)`` per positional tensor.
        nested: ``(index, template)`` per positional container holding tensors (``Arg`` inside).
        kwargs: the keyword template (``Arg`` for each tensor), or the keywords themselves when
            ``static_kwargs``.
        draw: a random op: the forward's RNG state around it.
    """

    __slots__ = ("ref", "func", "base", "holes", "nested", "kwargs", "static_kwargs", "draw")

    def __init__(self, ref: StepRef, func: Any, base: list, holes: list, nested: list, kwargs: Any,
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
            if isinstance(ref, In):
                t = region.inputs[ref.i]
                assert t is not None  # a program never reads a dropped input (``Recorder.build`` refuses it)
                v = t.detach()
            elif isinstance(ref, Const):
                v = _wrap(self.consts[ref.k])
            elif isinstance(ref, Out) and ref.pos in self.cached:
                p = ref.pos
                outs = tensors(region.cached(p, records[p].op, records[p]))
                v = _wrap(outs[ref.j])
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
                args, kwargs = step.call_args(arg)
                if step.draw is None:
                    out = step.func(*args, **kwargs)
                else:
                    # Only ops draw (an OutStep's first field is its position), never views.
                    out = step.draw.redraw(step.func, args, kwargs, records[step.ref[0]].module)
                    if fence is not None:
                        out = fence.apply_all(out)
                for j, t in enumerate(tensors(out)):
                    # Every value here is a functional wrapper: a factory op (no tensor argument) run
                    # under the caller's dispatch mode (a profiler around backward) comes out bare.
                    ref = step.ref.value(j)
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


def _wrap(t: torch.Tensor) -> torch.Tensor:
    """A tensor from below functionalization (the mode's view), as autograd's level expects it."""
    return t if torch._is_functional_tensor(t) else torch._to_functional_tensor(t)
