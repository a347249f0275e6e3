"""Module hooks inside a checkpointed region fire once, in the forward, with the forward's values.

A user's forward hook (or pre-hook, global or on one module) on a module inside a region is part of
the program the user observes, not of the computation the region recomputes: a logger, an attention
map collector, a quantisation observer, an MoE load counter. Run again in backward it would fire
twice and, where the replay hands out stand-ins for ops nothing reads, see uninitialised memory
(torch's own checkpoint re-fires such hooks with recomputed values). So while a region runs, each
user hook of a module it calls goes through a guard that asks the thread's checkpoint state:

- in the region's forward, the hook runs with the region's engine paused: its ops run as without
  the library (not recorded, not decided on, what autograd saves in them kept as autograd keeps
  it); what it returns is handed to the region, which keeps it for the replay;
- in the region's recompute, the hook is not called: the guard returns what it returned in the
  forward (None, or the forward's modified inputs / output), so the replay computes the same values;
- anywhere else (another thread, no region), the hook runs as it would.

The guards are put into a module's hook dictionaries only for the duration of that module's call
(``nn.Module._call_impl`` is wrapped while some thread runs a region: reference counted, restored
when the last region leaves, also on exceptions) and only when the module or the global registry
holds hooks other than xla_ckpt's own module tracking. FSDP2's unshard / reshard hooks are what the
recompute needs: they run in it unguarded. The module tracker of a ``FlopCounterMode`` runs in the
forward but not in a recompute that calls fn again: without the library it would not see those calls,
and its hooks register gradient hooks on the modules' inputs, leaf parameters included, in the middle
of backward (``torch.autograd.grad`` then raises "A leaf node was passed to _will_engine_execute_node").
The recomputed ops are still counted, under the modules whose
backward runs them, as a recorded program's are. A hook registered after the forward is not called by
its replay (without the library it would not have run for that forward).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import Any, Callable, Iterator, Optional

import torch
from torch import nn
from torch.nn.modules import module as _module_mod
from torch.utils.hooks import RemovableHandle

from xla_ckpt._base.modules import OWN_HOOKS
from xla_ckpt._hooks import saved as _saved

__all__ = ["guarding", "Guard"]

_ORIGINAL_CALL = nn.Module._call_impl
# Gradient hooks fn registers on a parameter (``self.weight.register_hook(scale)`` in a forward): the forward
# registered them on the module's own parameter, which the replay reads again, so fn run again in backward
# would register each a second time and it would fire twice (a scaling hook would scale the grad twice:
# silently wrong). In this thread's replay they are not registered again (``_quiet``).
_TENSOR_HOOKS = ("register_hook", "register_post_accumulate_grad_hook")
_ORIGINAL_TENSOR_HOOKS = {name: getattr(torch.Tensor, name) for name in _TENSOR_HOOKS}
_lock = threading.Lock()
_users = 0


class Skip:
    """A hook this thread's recompute does not run (a ``FlopCounterMode``'s module tracker, whose hooks return
    None); it runs as usual in any other thread (the global hook dictionaries are shared)."""

    __slots__ = ("hook",)

    def __init__(self, hook: Callable[..., Any]) -> None:
        self.hook = hook

    def __call__(self, *args: Any) -> Any:
        if _saved.state.recompute is not None:
            return None
        return self.hook(*args)


class Guard:
    """One user hook, called through the thread's checkpoint state (see the module docstring)."""

    __slots__ = ("hook", "forward")

    def __init__(self, hook: Callable[..., Any], forward: bool) -> None:
        self.hook = hook
        self.forward = forward  # a forward hook (module, inputs[, kwargs], output), else a pre-hook

    def __call__(self, *args: Any) -> Any:
        st = _saved.state
        if st.recompute is not None:
            return st.recompute.user_hook(self.hook, args)
        if st.region is not None:
            return st.region.user_hook(self.hook, args, self.forward)
        return self.hook(*args)


def _infrastructure(hook: Any) -> bool:
    """Hooks of torch's own machinery, run unguarded: FSDP2 gathers the weights the replay reads; a
    ``FlopCounterMode``'s module tracker (which the recompute skips, ``_tracker``)."""
    owner = getattr(hook, "__self__", None)
    return owner is not None and isinstance(owner, _infrastructure_types())


def _tracker(hook: Any) -> bool:
    from torch.utils.module_tracker import ModuleTracker  # noqa: PLC0415

    return isinstance(getattr(hook, "__self__", None), ModuleTracker)


_TYPES: Optional[tuple[type, ...]] = None


def _infrastructure_types() -> tuple[type, ...]:
    global _TYPES
    if _TYPES is None:
        from torch.utils.module_tracker import ModuleTracker  # noqa: PLC0415

        found: list[type] = [ModuleTracker]
        try:
            from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState  # noqa: PLC0415

            found.append(FSDPState)
        except ImportError:  # torch built without distributed
            pass
        _TYPES = tuple(found)
    return _TYPES


def _own(hook: Any) -> bool:
    # By identity (a user's hook object may be unhashable), or marked on its class: the role tags that
    # ``apply`` puts on Hugging Face projections (_api.hf_roles) are part of the computation the region sees.
    for h in OWN_HOOKS:  # a loop, not any(...): a generator per hook per module call
        if hook is h:
            return True
    return getattr(type(hook), "xla_ckpt_own", False) is True


def _guard(hooks: dict[int, Any], swapped: list, forward: bool, recompute: bool) -> None:
    for key, hook in hooks.items():
        if type(hook) in _WRAPPERS or _own(hook):
            continue
        if _infrastructure(hook):
            if not (recompute and _tracker(hook)):
                continue
            hooks[key] = Skip(hook)
        else:
            hooks[key] = Guard(hook, forward)
        swapped.append((hooks, key, hook))


_GLOBALS = (("_global_forward_pre_hooks", False), ("_global_forward_hooks", True))
_WRAPPERS = (Guard, Skip)  # what ``_guard`` puts in a hook dictionary for one call


def _call_impl(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    st = _saved.state
    if st.region is None and st.recompute is None:
        return _ORIGINAL_CALL(self, *args, **kwargs)
    if st.recompute is not None and st.recompute.state.hook_results:
        st.recompute.module_called(self, _registered(self))
    elif st.region is not None:
        st.region.module_ran(self)  # its train/eval mode, for the recompute
    swapped: list = []
    recompute = st.recompute is not None
    if self._forward_pre_hooks:
        _guard(self._forward_pre_hooks, swapped, False, recompute)
    if self._forward_hooks:
        _guard(self._forward_hooks, swapped, True, recompute)
    for name, forward in _GLOBALS:
        hooks = getattr(_module_mod, name)
        for h in hooks.values():  # the library's own global hooks alone need no guard
            if not (type(h) in _WRAPPERS or _own(h)):
                _guard(hooks, swapped, forward, recompute)
                break
    if not swapped:
        return _ORIGINAL_CALL(self, *args, **kwargs)
    try:
        return _ORIGINAL_CALL(self, *args, **kwargs)
    finally:
        # Put back what this call guarded, unless the hook was removed (or replaced) meanwhile.
        for hooks, key, hook in swapped:
            current = hooks.get(key)
            if type(current) in _WRAPPERS and current.hook is hook:
                hooks[key] = hook


def _registered(m: nn.Module) -> list[Any]:
    """The user hooks that a call of ``m`` runs now (guarded or not)."""
    hooks = [*m._forward_pre_hooks.values(), *m._forward_hooks.values(),
             *(h for name, _ in _GLOBALS for h in getattr(_module_mod, name).values())]
    return [h.hook if type(h) in _WRAPPERS else h for h in hooks]


@contextlib.contextmanager
def guarding() -> Iterator[None]:
    """User module hooks are guarded while the block runs (see the module docstring)."""
    global _users
    with _lock:
        if _users == 0:
            nn.Module._call_impl = _call_impl  # type: ignore[method-assign]
            for name in _TENSOR_HOOKS:
                setattr(torch.Tensor, name, _QUIET[name])
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                nn.Module._call_impl = _ORIGINAL_CALL  # type: ignore[method-assign]
                for name, original in _ORIGINAL_TENSOR_HOOKS.items():
                    setattr(torch.Tensor, name, original)


def _quiet(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tensor.register_hook`` (or the post-accumulate one) that a replay on this thread skips for a
    parameter: the forward registered the hook already, as the step without the library does once."""

    def register(self: torch.Tensor, hook: Callable[..., Any]) -> Any:
        if _saved.state.recompute is not None and isinstance(self, nn.Parameter):
            return RemovableHandle(OrderedDict())  # its remove() removes nothing
        return original(self, hook)

    register.__name__ = original.__name__
    register.__doc__ = original.__doc__
    return register


_QUIET = {name: _quiet(original) for name, original in _ORIGINAL_TENSOR_HOOKS.items()}
