"""What a region's cache and arguments hold besides tensors: stand-ins for what it dropped or moved away.

``RegionState`` (``state.py``) owns them; ``retain.py`` prunes, ``offload.py`` moves entries away and
``recompute.py`` hands ``Absent`` inputs back. ``written`` tells whether a tensor whose versions were
taken when it was cached was written in place since.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch


__all__ = ["Absent", "Pruned", "Away", "Versions", "written"]

Versions = tuple[tuple[weakref.ref, int], ...]


class Absent:
    """Stands in the region's arguments for an input backward never reads (the region drops it)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class Pruned:
    """A cached output nothing reads: a stand-in of its shape is handed out in its place."""

    __slots__ = ("spec",)

    def __init__(self, spec: Any) -> None:
        self.spec = spec


class Away:
    """A cache entry held elsewhere than on the device (the host tier, ``offload.py``)."""

    __slots__ = ()

    def fetch(self) -> Any:
        """The cached structure back on its device."""
        raise NotImplementedError

    def host_tensors(self) -> list[torch.Tensor]:
        """The copies held away (what the saved-tensor report shows)."""
        raise NotImplementedError


def written(versions: Versions) -> bool:
    """Whether any still-alive tensor of ``versions`` was modified in place since its version was taken."""
    for ref, v in versions:
        t = ref()  # ``_base.compat.deref``, inline: this is the per-op path
        if t is not None:
            fix = getattr(t, "_fix_weakref", None)
            if fix is not None:
                fix()
            if t._version != v:
                return True
    return False
