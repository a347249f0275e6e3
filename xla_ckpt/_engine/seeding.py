"""fn setting torch's CPU generator itself (``torch.manual_seed``, ``set_rng_state``, ``fork_rng``'s exit).

The replay gives each recomputed random op the forward's state and then puts the generator back in the
state it found (``_record.replay_state.Draw``). A seed fn sets is no op the dispatch mode sees: where the
recompute runs fn again, fn sets the generator a second time, in backward, and the per-op restores would
put it back to fn's seed, not to the caller's state: after the step the caller's CPU stream would be the
one right after fn's seed (a dropout region calling ``torch.manual_seed(5)``: every later draw of the
step would differ from the plain run's; values and grads stay exact). The forward tells whether fn moved the
generator outside its random ops (the chain start -> each CPU draw's before/after -> end is broken);
such a region's replay puts the CPU generator back, at its end, to the state it found at its start.
Only then: restoring every replay would undo another thread's plain draws that land in the window.
A ``torch.Generator`` fn seeds itself (``g.manual_seed(77)`` then ``rand(..., generator=g)``) is the
same failure on the caller's ``g``; the replay gives back every generator fn draws from.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

import torch

from xla_ckpt._record.replay_state import generator_lock, read_state, same_state

__all__ = ["CPU", "rng_states", "hook_draws", "moved_outside_ops", "GeneratorsRestored"]

CPU = torch.device("cpu")


def rng_states(inputs: Iterable[Any]) -> dict[torch.device, Any]:
    """The state of the CPU generator and torch_xla's running seed of each XLA device among ``inputs``.

    Each read under its generators' lock: another thread's replay sets a generator to a forward's state
    for one op (under it); read mid-window, that state would be taken, and later restored, as the caller's.
    """
    sources = [CPU, *dict.fromkeys(t.device for t in inputs if isinstance(t, torch.Tensor) and t.device.type == "xla")]
    states = {}
    for source in sources:
        with generator_lock(source):
            states[source] = read_state(source)
    return states


class _Moved(NamedTuple):
    """A user module hook's draws in the forward, one link of the chain as a recorded draw is."""

    source: torch.device
    before: Any
    after: Any


class _HookLink(NamedTuple):
    draw: _Moved


def hook_draws(before: dict[torch.device, Any], at: int) -> list[tuple[int, _Moved]]:
    """The sources a user hook moved (``before``: :func:`rng_states` as it started; ``at``: how many ops the
    region had recorded). The hook runs once, in the forward (``_hooks/user_hooks.py``): its draws are no seed
    fn sets, and the replay, which does not call it, draws nothing of them again. Counted as a break of the
    chain, a hook applying dropout made XLA's general replay raise that fn sets torch_xla's seed itself."""
    moved = []
    for source, state in before.items():
        with generator_lock(source):
            now = read_state(source)
        if not same_state(now, state):
            moved.append((at, _Moved(source, state, now)))
    return moved


def _linked(records: list[Any], links: list[tuple[int, _Moved]]) -> list[Any]:
    """``records`` with each hook's draws in its place (a hook run after ``at`` records comes before record ``at``)."""
    out: list[Any] = []
    pending = sorted(links, key=lambda link: link[0])
    j = 0
    for i, rec in enumerate(records):
        while j < len(pending) and pending[j][0] <= i:
            out.append(_HookLink(pending[j][1]))
            j += 1
        out.append(rec)
    out.extend(_HookLink(m) for _, m in pending[j:])
    return out


def moved_outside_ops(start: dict[torch.device, Any], records: Iterable[Any],
                      links: Iterable[tuple[int, Any]] = ()) -> set[torch.device]:
    """The sources of ``start`` fn moved in the forward other than by the region's recorded draws and its user
    hooks' draws (``links``, :func:`hook_draws`): the chain start -> each draw's before / after -> now is
    broken: a seed fn set itself. On XLA fn run again would set it again in backward (the replay raises; the
    recorded program runs no Python and is exact)."""
    records = list(records)
    links = list(links)
    if links:
        records = _linked(records, links)
    moved = set()
    for source, expected in start.items():
        for rec in records:
            draw = rec.draw
            if draw is None or draw.source != source:
                continue
            if not same_state(draw.before, expected):
                moved.add(source)
                break
            expected = draw.after
        else:
            with generator_lock(source):
                if not same_state(read_state(source), expected):
                    moved.add(source)
    return moved


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
            with generator_lock(CPU):
                self.states = [g.get_state() for g in self.sources]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.sources:
            with generator_lock(CPU):
                for g, state in zip(self.sources, self.states, strict=True):
                    g.set_state(state)
