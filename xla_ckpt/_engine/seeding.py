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
A ``torch.Generator`` fn seeds itself (``g.manual_seed(77)`` then ``rand(..., generator=g)``) is the
same failure on the caller's ``g``; the replay gives back every generator fn draws from.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

from xla_ckpt._base import xla as _xla
from xla_ckpt._ir.replay_state import generator_lock

__all__ = ["cpu_state", "moved_outside_ops", "xla_states", "xla_moved_outside_ops", "GeneratorsRestored"]

_CPU = torch.device("cpu")


def cpu_state() -> torch.Tensor:
    # Under the generators' lock: another thread's replay sets the generator to a forward's state for
    # one op (under it); read mid-window, that state would be taken, and later restored, as the caller's.
    with generator_lock(_CPU):
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


def xla_states(inputs: Iterable[Any]) -> dict[torch.device, Any]:
    """torch_xla's running seed of each XLA device among the region's inputs (none off XLA)."""
    devs = dict.fromkeys(t.device for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "xla")
    out = {}
    for dev in devs:
        with generator_lock(dev):
            out[dev] = _xla.get_rng_state(dev)
    return out


def xla_moved_outside_ops(start: dict[torch.device, Any], records: list[Any]) -> bool:
    """Whether fn set torch_xla's seed itself (``xm.set_rng_state``) in the forward: the running seed moved
    other than by the region's recorded XLA draws. fn run again would set it again in backward, and the
    seed the caller has after the step differ (the replay raises instead; its recorded program runs no
    Python and is exact)."""
    for dev, expected in start.items():
        for rec in records:
            draw = rec.draw
            if draw is None or draw.source != dev:
                continue
            if draw.before != expected:
                return True
            expected = draw.after
        with generator_lock(dev):
            if _xla.get_rng_state(dev) != expected:
                return True
    return False


class GeneratorsRestored:
    """Around fn run again: the generators as the replay found them. The CPU one only for a region that
    set it (``moved_outside_ops``); a ``torch.Generator`` fn draws from always (fn may seed it before its
    first draw, which the forward cannot see without reading every generator at every region's start;
    a generator of one's own is the documented way to be exact under threads, so no other thread's
    draws are undone by it)."""

    def __init__(self, sets_cpu: bool, records: Iterable[Any]) -> None:
        gens = {id(r.draw.source): r.draw.source for r in records
                if r.draw is not None and isinstance(r.draw.source, torch.Generator)
                and r.draw.source is not torch.default_generator}
        self.sources: list[torch.Generator] = ([torch.default_generator] if sets_cpu else []) + list(gens.values())
        self.states: list[Any] = []

    def __enter__(self) -> "GeneratorsRestored":
        if self.sources:
            with generator_lock(_CPU):
                self.states = [g.get_state() for g in self.sources]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.sources:
            with generator_lock(_CPU):
                for g, state in zip(self.sources, self.states):
                    g.set_state(state)
