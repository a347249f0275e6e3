"""Which module is running: fully qualified names for policies and for the saved-tensor report.

A module's name is its path from the *root*: the outermost module whose forward is running in this
thread, i.e. the model the user called. The name does not depend on the entry point (``apply``,
``checkpointed`` on an instance or a class, a function, Hugging Face's gradient-checkpointing hook,
an explicit ``checkpoint`` call inside a forward) nor on whether ``saved_activations()`` is active:

- names are looked up in the root's ``named_modules()`` (cached per root), not guessed from the
  parent/child relation, so a grandchild called from its grandparent's forward
  (``self.moe.router.gate(x)`` in a block) gets its full path;
- a thread that starts tracking inside forwards that are already running finds those modules on its
  own Python stack (frames of ``nn.Module._call_impl``), so a checkpoint region entered inside
  ``model.layers[3]`` still names its ops ``layers.3...`` from the model the user called.

All per-call state (the stack, the names, the tracking depth) is per thread. The global module hooks
are installed while some thread tracks (reference counted, removed when the last user leaves, also on
exceptions) and do nothing in threads that do not track: another thread's forward never leaves
entries on this thread's stack.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from types import CodeType, FrameType
from typing import Iterator, Optional

from torch import nn
from torch.nn.modules import module as _module_mod

from xla_ckpt._base import compat as _compat

__all__ = ["tracking", "current_name", "entered", "name_in", "in_compiled", "running_modules", "OWN_HOOKS",
           "current_module"]

# Frames of these functions run a module's forward; their ``self`` is the module.
_CALL_CODES: frozenset[CodeType] = frozenset(
    f.__code__ for f in (nn.Module._call_impl, nn.Module._wrapped_call_impl)
)


class _Local(threading.local):
    def __init__(self) -> None:
        self.depth = 0  # nested tracking() blocks in this thread
        self.stack: list[nn.Module] = []  # running modules, outermost (the root) first
        self.names: list[str] = []  # their names, in step with ``stack``
        self.pending: Optional[nn.Module] = None  # entered() while not tracking (see entered)


_local = _Local()
local = _local  # read by the forward's dispatch mode inline (``current_name`` without the call, per op)
_lock = threading.Lock()
_users = 0
_handles: list = []

# root -> (epoch, {id(module): path from root}). A hit is checked against the live tree (a module
# moved or replaced, a recycled id), so the cache can be slow, never wrong; a miss rebuilds the tree
# at most once per tracking session (a module from outside the root's tree misses every time).
_TREES: "weakref.WeakKeyDictionary[nn.Module, tuple[int, dict[int, str]]]" = weakref.WeakKeyDictionary()
_epoch = 0  # counts tracking sessions (outermost tracking() blocks) in all threads


def _walk(root: nn.Module, path: str) -> Optional[nn.Module]:
    m: Optional[nn.Module] = root
    if path:
        for part in path.split("."):
            m = m._modules.get(part) if m is not None else None
    return m


def name_in(root: nn.Module, m: nn.Module) -> Optional[str]:
    """Path of ``m`` below ``root`` ("" for the root itself), or None when ``m`` is not in its tree."""
    if m is root:
        return ""
    cached = _TREES.get(root)
    if cached is not None:
        epoch, tree = cached
        path = tree.get(id(m))
        if path is not None and _walk(root, path) is m:
            return path
        if path is None and epoch == _epoch:
            return None
    tree = {id(mod): name for name, mod in root.named_modules()}
    _TREES[root] = (_epoch, tree)
    return tree.get(id(m))


def _name_of(m: nn.Module) -> str:
    """Name of ``m`` from the root of this thread's stack (``m`` is about to be pushed)."""
    stack, names = _local.stack, _local.names
    if not stack:
        return ""  # m is the root
    path = name_in(stack[0], m)
    if path is not None:
        return path
    # Not below the root (a module held outside the root's tree): name it from the nearest running
    # module that holds it.
    for i in range(len(stack) - 1, 0, -1):
        path = name_in(stack[i], m)
        if path is not None:
            return f"{names[i]}.{path}" if names[i] and path else names[i] or path
    # Held by no running module: a function made a module at import (transformers >= 5.25 with the
    # ``kernels`` package: ``apply_rotary_pos_emb`` is a global ``nn.Module`` the attention calls). Its
    # ops are the caller's, as they were while it was a function.
    return names[-1]


def _push(m: nn.Module) -> None:
    _local.names.append(_name_of(m))
    _local.stack.append(m)


def _pre_hook(m: nn.Module, args: object) -> None:
    # Traced by Dynamo (a compiled model called while tracking): touch no thread-local state, whose
    # mutation Dynamo cannot replay (an AssertionError "already tracked for mutation"); Dynamo keeps
    # its own module stack (``nn_module_stack``).
    if not _compat.is_compiling() and _local.depth:
        _push(m)


def _post_hook(m: nn.Module, args: object, out: object) -> None:
    # always_call=True: also runs when forward raised, so the stack stays balanced.
    if _compat.is_compiling():
        return
    loc = _local
    if loc.depth and loc.stack and loc.stack[-1] is m:
        loc.stack.pop()
        loc.names.pop()


# The global module hooks ``tracking`` installs: not a user's (``_hooks.user_hooks`` leaves them alone).
OWN_HOOKS = (_pre_hook, _post_hook)


def current_module() -> Optional[nn.Module]:
    """The innermost module running in this thread (tracked), or None."""
    stack = _local.stack
    return stack[-1] if stack else None


def current_name() -> str:
    """Fully qualified name of the innermost module running in this thread ("" at top level)."""
    names = _local.names
    return names[-1] if names else ""


def in_compiled() -> bool:
    """Whether a ``torch.compile``-d module (an ``OptimizedModule``) is running in this thread (tracked).

    Its compiled graph saves its tensors as one autograd node: they reach the saved-tensor hooks with
    no ``grad_fn`` and no inner module, so the report can name them only as the compiled graph's.
    """
    return any(type(m).__name__ == "OptimizedModule" for m in _local.stack)


def running_modules() -> list[nn.Module]:
    """Modules whose forward is running in this thread, outermost first, from the Python stack."""
    found: list[nn.Module] = []
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:
        if frame.f_code in _CALL_CODES:
            m = frame.f_locals.get("self")
            if isinstance(m, nn.Module) and (not found or found[-1] is not m):
                found.append(m)
        frame = frame.f_back
    found.reverse()
    return found


@contextlib.contextmanager
def tracking() -> Iterator[None]:
    """Track the running module in this thread while the block runs (global hooks, removed on exit)."""
    global _users, _epoch
    loc = _local
    with _lock:
        if loc.depth == 0:
            _epoch += 1
        if _users == 0:
            _handles.append(_module_mod.register_module_forward_pre_hook(_pre_hook))
            _handles.append(_module_mod.register_module_forward_hook(_post_hook, always_call=True))
        _users += 1
    try:
        if loc.depth == 0:
            loc.stack.clear()
            loc.names.clear()
            running = running_modules()
            if loc.pending is not None and (not running or running[-1] is not loc.pending):
                running.append(loc.pending)
            for m in running:
                _push(m)
        loc.depth += 1
        try:
            yield
        finally:
            loc.depth -= 1
            if loc.depth == 0:
                loc.stack.clear()
                loc.names.clear()
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                for h in _handles:
                    h.remove()
                _handles.clear()


@contextlib.contextmanager
def entered(module: nn.Module) -> Iterator[None]:
    """Mark ``module`` as running, for wrappers that may be reached without its ``__call__``.

    ``module.forward(x)`` called directly runs no module hook and leaves no ``_call_impl`` frame:
    the wrapper names the module here so that its ops are still attributed to it.
    """
    loc = _local
    if not loc.depth:
        previous, loc.pending = loc.pending, module
        try:
            yield
        finally:
            loc.pending = previous
        return
    pushed = loc.stack[-1] is not module if loc.stack else True
    if pushed:
        _push(module)
    try:
        yield
    finally:
        if pushed and loc.stack and loc.stack[-1] is module:
            loc.stack.pop()
            loc.names.pop()
