"""The autocast state a recomputation runs ``fn`` under: per device on/off and dtype, and the cast cache.

Autocast caches the cast of a leaf that requires grad (a weight) while any autocast context is open,
and clears the cache when the outermost one exits (a nesting count decides "outermost"). Which casts
``fn`` runs therefore depends on two things besides on/off and dtype: the nesting count ``fn`` starts
at (a block that closes its own ``torch.autocast`` clears the cache only at nesting 0, so ``fn`` casts
a weight again in each such block) and what the cache already holds (a weight cast before the region,
under the caller's autocast, is a cache hit inside it).

The recompute must run the same ops, so it starts at the forward's nesting count, with an empty cache, and
leaves no cast of its own in the caller's cache (``Autocast.restored``); the cache is one per process, so a
region that started outside any autocast leaves it alone (other threads' casts are in it). The state is set
directly, not by entering ``torch.autocast`` contexts: those add to the nesting count, so a weight cast in two
blocks of ``fn`` would be cast once in the recompute, a false ``CheckpointError``. A cast the forward found in
the cache (made before the region) is one more op in the recompute, run outside the record
(``ReplayMode._recast``). The forward never clears the cache itself: every use of one cached cast shares its
autograd node, so the weight's grad is summed in the low dtype first, and a second cast would change that
rounding.

Example:
    >>> snap = Autocast.capture([x.device])   # the forward starts
    >>> with snap.restored():                   # the recompute
    ...     fn(*args)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterable, Iterator

import torch

__all__ = ["Autocast", "autocast_state"]


def autocast_state(devices: list[torch.device]) -> list[tuple[str, bool, torch.dtype]]:
    """(device type, enabled, dtype) for the CPU and each device type in ``devices``."""
    # Meta tensors (``xla_ckpt.estimate``) have no autocast state of their own.
    return _of_types(d.type for d in devices if d.type != "meta")


def _of_types(types: Iterable[str]) -> list[tuple[str, bool, torch.dtype]]:
    return [(t, torch.is_autocast_enabled(t), torch.get_autocast_dtype(t)) for t in dict.fromkeys(["cpu", *types])]


def _nesting() -> int:
    """The autocast nesting count now (torch has no getter: one step up and back)."""
    n = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return n


def _set_nesting(n: int) -> int:
    """Set the nesting count to ``n``; return what it was."""
    was = _nesting()
    for _ in range(n - was):
        torch.autocast_increment_nesting()
    for _ in range(was - n):
        torch.autocast_decrement_nesting()
    return was


@dataclass(frozen=True)
class Autocast:
    """A snapshot of autocast when a region starts (see the module docstring)."""

    devices: tuple[tuple[str, bool, torch.dtype], ...]
    cache: bool  # torch.is_autocast_cache_enabled()
    nesting: int

    @classmethod
    def capture(cls, devices: list[torch.device]) -> "Autocast":
        return cls(tuple(autocast_state(devices)), torch.is_autocast_cache_enabled(), _nesting())

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(t for t, _, _ in self.devices)

    @contextlib.contextmanager
    def restored(self) -> Iterator[None]:
        """The forward's autocast state, nesting count and an empty cache, for ``fn`` run again."""
        before, cache_before = _of_types(self.types), torch.is_autocast_cache_enabled()
        was = _set_nesting(self.nesting)
        # Autocast's cast cache is process-wide (its on/off switch and nesting count are per thread): a
        # clear here empties every thread's cache, and another thread's forward inside autocast would cast a
        # weight twice, its own recompute once (a CheckpointError). A region that
        # started outside any autocast needs no clear: a cast there happens only inside an autocast that
        # fn opens itself, whose exit at nesting 0 clears the cache as the forward's did.
        clears = self.nesting > 0 or any(enabled for _, enabled, _ in self.devices)
        if clears:
            torch.clear_autocast_cache()
        try:
            for t, enabled, dtype in self.devices:
                torch.set_autocast_enabled(t, enabled)
                torch.set_autocast_dtype(t, dtype)
            torch.set_autocast_cache_enabled(self.cache)
            yield
        finally:
            if clears:
                torch.clear_autocast_cache()  # the recompute's own casts: not the caller's to reuse
            for t, enabled, dtype in before:
                torch.set_autocast_enabled(t, enabled)
                torch.set_autocast_dtype(t, dtype)
            torch.set_autocast_cache_enabled(cache_before)
            _set_nesting(was)
