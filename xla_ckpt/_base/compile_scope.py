"""Global settings that hold for one ``torch.compile`` only: set while Dynamo traces, restored at its end.

Some things torch reads while compiling can only be given globally: the ``torch.<device>`` module
torch's checkpoint looks up (torch_xla 2.9 registers none), or the partitioner's
``torch._functorch.config.activation_memory_budget``. The library sets them from code Dynamo *runs*
while tracing a checkpointed region (a function marked ``torch.compiler.assume_constant_result``) and
puts every one back in Dynamo's compile-end callback (torch/_dynamo/callback.py), so no setting
outlives the compile that needed it, and nothing is patched at import.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["set_for_this_compile", "active"]

_MISSING = object()
_lock = threading.Lock()
_saved: list[tuple[Any, str, Any]] = []  # (object, attribute, value before) in the order they were set


def _restore(*_: Any) -> None:
    """Dynamo's compile-end callback: put back what this compile changed (last set, first restored)."""
    with _lock:
        while _saved:
            obj, attr, before = _saved.pop()
            if before is _MISSING:
                if hasattr(obj, attr):
                    delattr(obj, attr)
            else:
                setattr(obj, attr, before)


def set_for_this_compile(obj: Any, attr: str, value: Any) -> None:
    """``setattr(obj, attr, value)`` until the running Dynamo compile ends (restored then).

    Call it only from code Dynamo runs while compiling. Setting the same attribute twice in one
    compile keeps the first value-before, so the restore is exact.

    Example:
        >>> set_for_this_compile(torch._functorch.config, "activation_memory_budget", 0.3)
    """
    from torch._dynamo import callback_handler  # noqa: PLC0415  (only ever called while compiling)

    with _lock:
        # Looked up each time: torch._dynamo.reset() clears every registered callback.
        if _restore not in callback_handler.end_callbacks:
            callback_handler.register_end_callback(_restore)
        if not any(o is obj and a == attr for o, a, _ in _saved):
            _saved.append((obj, attr, getattr(obj, attr, _MISSING)))
        setattr(obj, attr, value)


def active() -> list[tuple[Any, str]]:
    """What is set for the running compile now (tests)."""
    with _lock:
        return [(o, a) for o, a, _ in _saved]
