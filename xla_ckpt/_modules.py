"""Which module is running: fully qualified names for the saved-tensor report and for policies.

Global module hooks are installed only while some feature needs them (reference counted) and are
removed when the last user leaves, also on exceptions: nothing outlives the call that installed it.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Iterator

from torch import nn
from torch.nn.modules import module as _module_mod

__all__ = ["tracking", "current_name", "entered", "register_names"]

# Names set by apply()/checkpointed() from the model root: they win over names guessed at run time.
_REGISTERED: "weakref.WeakKeyDictionary[nn.Module, str]" = weakref.WeakKeyDictionary()


class _Local(threading.local):
    def __init__(self) -> None:
        self.stack: list[nn.Module] = []


_local = _Local()
_lock = threading.Lock()
_users = 0
_handles: list = []
# Names guessed during one tracking session (from the first module seen downwards); cleared after it.
_session: "weakref.WeakKeyDictionary[nn.Module, str]" = weakref.WeakKeyDictionary()


def register_names(root: nn.Module, prefix: str = "") -> None:
    """Record the fully qualified name of every module under ``root`` (weakly)."""
    for name, m in root.named_modules(prefix=prefix, remove_duplicate=False):
        _REGISTERED[m] = name


def _name_of(m: nn.Module, parent_pos: int) -> str:
    """Name of ``m``, whose parent (if any) is ``_local.stack[parent_pos]`` (-1: no parent)."""
    name = _REGISTERED.get(m)
    if name is None:
        name = _session.get(m)
    if name is None:
        name = ""
        if parent_pos >= 0:
            parent = _local.stack[parent_pos]
            prefix = _name_of(parent, parent_pos - 1)
            for child_name, child in parent.named_children():
                _session.setdefault(child, f"{prefix}.{child_name}" if prefix else child_name)
            name = _session.get(m, "")
        _session[m] = name
    return name


def _pre_hook(m: nn.Module, args: object) -> None:
    _name_of(m, len(_local.stack) - 1)  # name it while its parent is on top of the stack
    _local.stack.append(m)


def _post_hook(m: nn.Module, args: object, out: object) -> None:
    # always_call=True: also runs when forward raised, so the stack stays balanced.
    stack = _local.stack
    if stack and stack[-1] is m:
        stack.pop()


def current_name() -> str:
    """Fully qualified name of the innermost module running ("" at top level or untracked)."""
    stack = _local.stack
    return _name_of(stack[-1], len(stack) - 2) if stack else ""


@contextlib.contextmanager
def tracking() -> Iterator[None]:
    """Track the running module while the block runs (global hooks, removed on exit)."""
    global _users
    with _lock:
        if _users == 0:
            _handles.append(_module_mod.register_module_forward_pre_hook(_pre_hook))
            _handles.append(_module_mod.register_module_forward_hook(_post_hook, always_call=True))
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                for h in _handles:
                    h.remove()
                _handles.clear()
                _session.clear()


@contextlib.contextmanager
def entered(module: nn.Module) -> Iterator[None]:
    """Mark ``module`` as running (for wrappers that run inside its ``__call__``, after the hooks)."""
    stack = _local.stack
    pushed = not stack or stack[-1] is not module
    if pushed:
        stack.append(module)
    try:
        yield
    finally:
        if pushed and stack and stack[-1] is module:
            stack.pop()
