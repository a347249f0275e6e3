"""The library's one warn-once: a ``UserWarning`` the first time a key is seen in this process.

Every notice that must not repeat each step (an offload fallback, a Hugging Face cache turned off, a
policy torch.compile cannot mark) goes through ``warn_once``; keys are tuples starting with the
notice's kind, so two notices never share one. ``forgetting()`` gives tests a clean slate and puts
the old one back.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Hashable, Iterator

__all__ = ["warn_once", "forgetting"]

_lock = threading.Lock()
_seen: set[Hashable] = set()


def warn_once(key: Hashable, message: str, stacklevel: int = 2) -> bool:
    """Warn with ``message`` unless ``key`` was warned about before; return whether it warned.

    Args:
        key: what makes the notice the same one (e.g. ``("offload", "xla-cpu")``).
        message: the warning text.
        stacklevel: as ``warnings.warn``'s, counted from the caller of ``warn_once``.

    Example:
        >>> warn_once(("offload", "xla-cpu"), "xla_ckpt: offload on XLA:CPU keeps the values on the device")
    """
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)
    return True


@contextlib.contextmanager
def forgetting() -> Iterator[None]:
    """Within the block every notice is new again; afterwards the notices seen before are restored."""
    global _seen
    with _lock:
        before, _seen = _seen, set()
    try:
        yield
    finally:
        with _lock:
            _seen = before
