"""State a recomputation must reproduce or depend on: random draws, autocast, and (XLA) the gradient fence."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import torch

from xla_ckpt._base import xla as _xla

__all__ = ["Fence", "Draw", "draw_source", "autocast_state", "devices"]

# One lock per device's generators, held around every forward random op (state before, the op,
# state after) and every replayed one (set, run, check, restore). Without it two threads' replays
# interleave: thread B sets its state, thread A's op draws from it, B restores a state that equals
# A's forward "after", and A's check passes with B's numbers: a silently wrong mask (seen in CI on
# torch 2.13, 1 in ~3000 steps under load). Other code's plain draws cannot fool the check (they
# only advance the stream); only our restores could. Per device, so that threads driving different
# devices never wait on each other (a random op may run other Python inside: a mode, a tensor
# subclass). Reentrant: a random op may dispatch to another one inside.
_LOCKS: dict[tuple[str, Optional[int]], threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(source: "torch.Generator | torch.device") -> threading.RLock:
    dev = source.device if isinstance(source, torch.Generator) else source
    key = (dev.type, dev.index)
    lock = _LOCKS.get(key)
    if lock is None:
        with _LOCKS_GUARD:
            lock = _LOCKS.setdefault(key, threading.RLock())
    return lock


def devices(tensors: list[torch.Tensor]) -> list[torch.device]:
    return list(dict.fromkeys(t.device for t in tensors))


class Draw:
    """One random op's draw: which generator, and its state just before and just after the op.

    The replay puts the generator in the ``before`` state for this op alone and then back in the state
    it found, so the op draws exactly the forward's numbers whatever ran in between: other random ops
    saved by the policy, the caller's own draws, or another thread sharing the process-wide generator.
    If the state after the op differs from the forward's ``after``, a draw from the same generator
    interleaved with this op (in forward or in the replay): the caller gets an error, never other numbers.
    (A plain draw of another thread that lands inside the replay's window is undone by the restore:
    that thread sees those numbers again. Only a per-thread ``torch.Generator`` avoids it.)
    """

    __slots__ = ("source", "before", "after")

    def __init__(self, source: "torch.Generator | torch.device", before: Any, after: Any) -> None:
        self.source = source
        self.before = before
        self.after = after

    @classmethod
    def record(cls, source: "torch.Generator | torch.device", run: Callable[[], Any],
               quiet: Callable[[], Any]) -> tuple["Draw", Any]:
        """Run the forward's op ``run()``; return its draw and its result.

        ``quiet`` is a context manager under which reading the generator's state is not fn's op
        (the forward mode's own bookkeeping).
        """
        with _lock_for(source):
            with quiet():
                before = _get(source)
            out = run()
            with quiet():
                after = _get(source)
        return cls(source, before, after), out

    def replay(self, run: Callable[[], Any]) -> tuple[Any, bool]:
        """Run ``run()`` from the forward's state; return its result and whether the stream matched."""
        with _lock_for(self.source):
            now = _get(self.source)
            _set(self.source, self.before)
            try:
                out = run()
                matched = _same(_get(self.source), self.after)
            finally:
                _set(self.source, now)
        return out, matched


def draw_source(kwargs: dict, args: tuple) -> "torch.Generator | torch.device":
    """The generator a random op draws from: its ``generator=`` or the default one of its device."""
    gen = kwargs.get("generator")
    if gen is not None:
        return gen
    dev = kwargs.get("device")
    if dev is None:
        dev = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    return torch.device(dev) if dev is not None else torch.device("cpu")


def _get(source: "torch.Generator | torch.device") -> Any:
    if isinstance(source, torch.Generator):
        return source.get_state()
    if source.type == "cuda":
        return torch.cuda.get_rng_state(source)
    if source.type == "xla":
        return _xla.get_rng_state(source)
    return torch.get_rng_state()


def _set(source: "torch.Generator | torch.device", state: Any) -> None:
    if isinstance(source, torch.Generator):
        source.set_state(state)
    elif source.type == "cuda":
        torch.cuda.set_rng_state(state, source)
    elif source.type == "xla":
        _xla.set_rng_state(state, source)
    else:
        torch.set_rng_state(state)


def _same(a: Any, b: Any) -> bool:
    return bool(torch.equal(a, b)) if isinstance(a, torch.Tensor) else a == b


def autocast_state(devices: list[torch.device]) -> list[tuple[str, bool, torch.dtype]]:
    # Meta tensors (``xla_ckpt.estimate``) have no autocast state of their own.
    types = list(dict.fromkeys(["cpu"] + [d.type for d in devices if d.type != "meta"]))
    return [(t, torch.is_autocast_enabled(t), torch.get_autocast_dtype(t)) for t in types]


class Fence:
    """A zero that depends on the incoming gradient: ``where(s != s, s, 0)`` for one element ``s``.

    Added to each tensor the recomputation starts from (region inputs, replayed saved outputs), it
    makes the recompute depend on the gradient, so XLA can neither merge it with the forward (the
    operands differ) nor hoist it before the gradient arrives. Zero unless the gradient is NaN,
    where it keeps NaN (``s * 0`` would turn an infinite gradient into NaN). Cost: one scalar read
    and one elementwise add per fenced tensor. XLA:CPU drops ``optimization_barrier`` before
    scheduling (its ``cse_barrier_expander`` pass), so the barrier alone does not hold there.
    """

    def __init__(self, grad: torch.Tensor) -> None:
        s = grad.detach().reshape(-1)[0]
        self.zero = torch.where(s != s, s, torch.zeros_like(s))
        self._by_dtype: dict[torch.dtype, torch.Tensor] = {}

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point() or t.device != self.zero.device:
            # Another device's tensor (a CPU tensor made inside fn, then copied over): the add would
            # move it to XLA, and fn's copy of it would silently vanish from the replay.
            return t
        z = self._by_dtype.get(t.dtype)
        if z is None:
            z = self._by_dtype[t.dtype] = self.zero.to(t.dtype)
        return t + z
