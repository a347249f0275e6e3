"""The root's forward under ``weights_by_reference()``, by a forward pre-hook and an always-called forward hook.

Why hooks and not an instance-level ``forward``: the FSDP wrappers check ``module.forward.__func__``
(torch_xla's ``SpmdFullyShardedDataParallel`` and ``XlaFullyShardedDataParallel`` refuse a callable without
it: "The module wrapped by FSDP *must define a `forward` method*"), and accelerate's mixed precision
rebinds ``model.forward.__func__`` (a method-like object whose ``__func__`` is the class's forward would be
dropped there, silently). With hooks ``model.forward`` stays the class's own bound method: its signature
(HF ``Trainer`` filters dataset columns by it), ``state_dict()`` keys, pickling and ``deepcopy`` are unchanged.

A direct ``model.forward(...)`` call skips module hooks (PEFT's tuner calls its base model so): apply the
preset to the module that is called, e.g. the PEFT model.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from torch import nn

from xla_ckpt._base import compat as _compat
from xla_ckpt._hooks.saved import weights_by_reference

__all__ = ["hook_by_reference", "by_reference_hooked", "unhook_by_reference"]


class _Open(threading.local):
    def __init__(self) -> None:
        # (module, its open weights_by_reference()) per call in flight on this thread, innermost last
        self.calls: list[tuple[nn.Module, contextlib.AbstractContextManager[None]]] = []


_open = _Open()


def _enter(module: nn.Module, args: Any) -> None:
    if _compat.is_compiling() or _compat.func_transform() is not None:
        # A compiled graph keeps parameters as its inputs (the partitioner decides what else it saves);
        # saved-tensor hooks would be a graph break on torch 2.9. torch.func has no saved-tensor hooks.
        # ``_exit`` finds no entry of this call to close.
        return None
    ctx = weights_by_reference()
    ctx.__enter__()
    _open.calls.append((module, ctx))
    return None


def _exit(module: nn.Module, args: Any, output: Any) -> None:
    # Always called (``always_call=True``): after a forward that raised too, so the mode never outlives it.
    if _compat.is_compiling():
        return None
    calls = _open.calls
    # Only our own entry: a pre-hook that ran before ours and raised left none to close.
    if calls and calls[-1][0] is module:
        calls.pop()[1].__exit__(None, None, None)
    return None


def by_reference_hooked(module: nn.Module) -> bool:
    """True if ``module``'s calls already run under ``weights_by_reference()`` (:func:`hook_by_reference`)."""
    return any(h is _enter for h in module._forward_pre_hooks.values())


def hook_by_reference(module: nn.Module) -> None:
    """Run every call of ``module`` under ``weights_by_reference()``; its ``forward`` is left untouched.

    Args:
        module: the root module (usually). A second call on the same module is a no-op.

    Example:
        >>> hook_by_reference(model)
        >>> model.forward.__func__ is type(model).forward
        True
    """
    if by_reference_hooked(module):
        return
    # Entered before the pre-hooks registered so far; closed after the forward hooks registered so far.
    module.register_forward_pre_hook(_enter, prepend=True)
    module.register_forward_hook(_exit, always_call=True)


def unhook_by_reference(module: nn.Module) -> None:
    """Remove what :func:`hook_by_reference` added (``apply`` applied again replaces an earlier one)."""
    for hooks, fn, extra in ((module._forward_pre_hooks, _enter, ()),
                             (module._forward_hooks, _exit, (module._forward_hooks_always_called,))):
        for key in [k for k, h in hooks.items() if h is fn]:
            del hooks[key]
            for d in extra:
                d.pop(key, None)
