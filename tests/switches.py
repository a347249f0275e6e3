"""The library's paths turned on or watched for one block, for tests that prove each path matters.

The library ships no switch for tests: each helper here sets one private seam of the library (or wraps
the function it watches) and puts it back when the block ends, even when the block raises.

- ``general_replay()``: XLA regions run ``fn`` again instead of their recorded program
  (the thread-local flag in ``xla_ckpt/_engine/direct.py``), so both replays are tested on XLA.
- ``liveness_off()``: regions keep every output the policy kept, before liveness drops what backward
  never reads (the thread-local flag in ``xla_ckpt/_engine/retain.py``), to compare the policy's own choices.
- ``lowered_regions()``: the regions ``torch.compile`` lowered while the block ran
  (``xla_ckpt._compile.lowering.Lowering``), to read what the policy decided per op.
- ``planned_regions()``: the plans of the budget regions a compile planned (``_compile.budget.plan_joint``).

Example::

    with general_replay():
        loss = model(x).sum()
    loss.backward()  # recomputed by running the regions' functions again
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def _set(flags: Any, name: str, value: Any) -> Iterator[None]:
    """``flags.name = value`` for the block (a library's thread-local flag), then what it was."""
    was = getattr(flags, name)
    setattr(flags, name, value)
    try:
        yield
    finally:
        setattr(flags, name, was)


@contextlib.contextmanager
def general_replay() -> Iterator[None]:
    """XLA regions whose forward starts in this block (on this thread) replay by running ``fn`` again,
    never their recorded program. Example: ``with general_replay(): loss = model(x).sum()``."""
    from xla_ckpt._engine import direct

    with _set(direct._replay, "program", False):
        yield


@contextlib.contextmanager
def liveness_off() -> Iterator[None]:
    """Regions whose forward ends in this block (on this thread) keep every output the policy kept.
    Example: ``with xla_ckpt.saved_activations() as report, liveness_off(): loss = model(x).sum()``."""
    from xla_ckpt._engine import retain

    with _set(retain._liveness, "on", False):
        yield


@contextlib.contextmanager
def lowered_regions() -> Iterator[list[Any]]:
    """Every ``Lowering`` (one region traced under ``torch.compile``) made while the block runs, in order.

    Example::

        with lowered_regions() as regions:
            torch.compile(model)(x).sum().backward()
        [(d.call.op, d.decision) for r in regions for d in r.decided]
    """
    from xla_ckpt._compile.lowering import Lowering

    regions: list[Any] = []
    init = Lowering.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        regions.append(self)

    Lowering.__init__ = recording  # type: ignore[method-assign]
    try:
        yield regions
    finally:
        Lowering.__init__ = init  # type: ignore[method-assign]


@contextlib.contextmanager
def planned_regions() -> Iterator[list[Any]]:
    """Every ``RegionPlan`` (a budget region planned on a compile's joint graph) made while the block runs.

    Example::

        with planned_regions() as plans:
            torch.compile(model)(x).sum().backward()
        [p.saved for p in plans]
    """
    from xla_ckpt._compile import budget

    plans: list[Any] = []
    plan_joint = budget.plan_joint

    def recording(*args: Any, **kwargs: Any) -> Any:
        out = plan_joint(*args, **kwargs)
        plans.extend(out)
        return out

    budget.plan_joint = recording
    try:
        yield plans
    finally:
        budget.plan_joint = plan_joint
