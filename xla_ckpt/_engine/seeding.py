"""fn setting torch's CPU generator itself (``torch.manual_seed``, ``set_rng_state``, ``fork_rng``'s exit).

The replay gives each recomputed random op the forward's state and then puts the generator back in the
state it found (``_ir.replay_state.Draw``). A seed fn sets is no op the dispatch mode sees: where the
recompute runs fn again, fn set the generator a second time, in backward, and the per-op restores put it
back to fn's seed, not to the caller's state: after the step the caller's CPU stream was the one right
after fn's seed (a dropout region calling ``torch.manual_seed(5)``: every later draw of the step
differed from the plain run's; values and grads were exact). The forward tells whether fn moved the
generator outside its random ops (the chain start -> each CPU draw's before/after -> end is broken);
such a region's replay puts the CPU generator back, at its end, to the state it found at its start.
Only then: restoring every replay would undo another thread's plain draws that land in the window.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

__all__ = ["cpu_state", "moved_outside_ops", "CpuRestored"]

_CPU = torch.device("cpu")


def cpu_state() -> torch.Tensor:
    return torch.default_generator.get_state()


def moved_outside_ops(start: torch.Tensor, records: Iterable[Any]) -> bool:
    """Whether the CPU generator moved in the forward other than by the region's recorded CPU draws."""
    expected = start
    for rec in records:
        draw = rec.draw
        if draw is None or draw.source != _CPU:
            continue
        if not torch.equal(draw.before, expected):
            return True
        expected = draw.after
    return not torch.equal(cpu_state(), expected)


class CpuRestored:
    """Around fn run again: the CPU generator as the replay found it (only for a region that sets it)."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.state: Any = None

    def __enter__(self) -> "CpuRestored":
        if self.active:
            self.state = cpu_state()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            torch.default_generator.set_state(self.state)
