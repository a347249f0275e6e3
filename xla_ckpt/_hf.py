"""Hugging Face conventions: caches off in training, HF's own checkpointing off, block classes, hints.

Nothing here imports ``transformers``: HF models are recognised by their attributes
(``_no_split_modules``, ``gradient_checkpointing``, a ``GradientCheckpointingLayer`` base class), so
the library stays usable, and cheap to import, without it.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from typing import Any, Optional

import torch
from torch import nn

__all__ = [
    "CACHE_ARGS",
    "recompute_mismatch_hint",
    "without_cache",
    "turn_off_hf_checkpointing",
    "hf_block_classes",
    "is_gc_layer",
]

# Names a KV cache goes by in HF layer signatures (transformers 5.x: ``cache``; 4.x: ``past_key_value(s)``;
# GPT-NeoX: ``layer_past``). Mirrors transformers' own list in modeling_layers.GradientCheckpointingLayer.
CACHE_ARGS = ("cache", "past_key_values", "past_key_value", "layer_past")

_lock = threading.Lock()
_warned_cache: set[type] = set()
_warned_flag: set[type] = set()
_signatures: dict[Any, Optional[inspect.Signature]] = {}


def recompute_mismatch_hint(op: object = "", module: str = "") -> str:
    """The likely causes of a recompute that does not match its forward, as one sentence to append.

    Called by the engine when a replayed op, shape or dtype differs from the forward. The usual cause
    is state that the forward changed and the recompute changes again: a key/value cache (Hugging Face
    ``use_cache=True``: each layer appends to ``cache`` / ``past_key_values`` / ``layer_past`` and the
    recompute appends a second time, so a ``cat`` comes back longer), or an argument mutated in place.

    Example:
        >>> raise CheckpointError(f"recomputation of {op} ... differs. {recompute_mismatch_hint(op, name)}")
    """
    where = f" in '{module}'" if module else ""
    first = ("A concatenation that grew on recompute is the mark of a key/value cache. " if "cat" in str(op)
             else "")
    return (
        f"{first}Likely cause{where}: state that the forward changed and the recompute changed again, such as "
        "a key/value cache (Hugging Face: use_cache=True, with cache / past_key_values / layer_past appended "
        "to once in forward and again in backward) or an argument or buffer mutated in place. Fix: call the "
        "model with use_cache=False in training (xla_ckpt.apply and xla_ckpt.checkpointed do this for a "
        "module called in train mode with grad), and do not mutate arguments inside a checkpointed function."
    )


def _signature(fn: Any) -> Optional[inspect.Signature]:
    """Signature of ``fn`` as called (``self`` dropped for a plain function taken from a class)."""
    bound = inspect.ismethod(fn)
    key = (fn.__func__, True) if bound else (fn, False)
    try:
        return _signatures[key]
    except (KeyError, TypeError):
        pass
    try:
        sig: Optional[inspect.Signature] = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and inspect.isfunction(fn):
        params = list(sig.parameters.values())
        if params and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            sig = sig.replace(parameters=params[1:])  # the unbound ``self``
    try:
        _signatures[key] = sig
    except TypeError:  # unhashable callable: not cached
        pass
    return sig


def _warn_once(seen: set[type], cls: type, message: str) -> None:
    with _lock:
        if cls in seen:
            return
        seen.add(cls)
    warnings.warn(message, UserWarning, stacklevel=4)


def without_cache(module: nn.Module, fn: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``(args, kwargs)`` for ``fn`` with any KV cache turned off, when ``module`` trains with grad.

    ``fn`` is the forward being wrapped: a function taken from the class (``self`` not in ``args``)
    or a bound/instance-level callable.

    The recompute in backward would append to the cache a second time (a longer ``cat``, a
    ``CheckpointError``), which is why Hugging Face's own checkpointing turns caching off too
    (transformers ``GradientCheckpointingLayer``). ``use_cache`` becomes False (also when it is left to
    ``module.config.use_cache``) and a cache argument becomes None; each class is warned about once.
    In eval mode or without grad nothing changes: generation keeps its cache.
    """
    if not (module.training and torch.is_grad_enabled()):
        return args, kwargs
    sig = _signature(fn)
    if sig is None:
        return args, kwargs
    params = sig.parameters
    if "use_cache" not in params and not any(n in params for n in CACHE_ARGS) and not any(
        n in kwargs for n in CACHE_ARGS
    ):
        return args, kwargs
    try:
        bound = sig.bind_partial(*args, **kwargs)
    except TypeError:
        return args, kwargs  # let the call itself raise its own error
    changed: list[str] = []
    extra = next((n for n, p in params.items() if p.kind is p.VAR_KEYWORD), None)
    values = bound.arguments
    loose = values.get(extra, {}) if extra else {}
    if "use_cache" in params:
        default = params["use_cache"].default
        use = values.get("use_cache", None if default is inspect.Parameter.empty else default)
        if use is None:
            use = getattr(getattr(module, "config", None), "use_cache", False)
        if use:
            values["use_cache"] = False
            changed.append("use_cache=False")
    elif loose.get("use_cache"):
        loose["use_cache"] = False
        changed.append("use_cache=False")
    for name in CACHE_ARGS:
        if name in params and values.get(name) is not None:
            values[name] = None
            changed.append(f"{name}=None")
        elif loose.get(name) is not None:
            loose[name] = None
            changed.append(f"{name}=None")
    if not changed:
        return args, kwargs
    cls = type(module)
    _warn_once(_warned_cache, cls, (
        f"xla_ckpt: {cls.__name__} is checkpointed and was called in training with a key/value cache; "
        f"setting {', '.join(changed)} for it (the recompute in backward would append to the cache a second "
        "time; Hugging Face's own checkpointing does the same). Pass use_cache=False to silence this."
    ))
    return bound.args, bound.kwargs


def is_gc_layer(module: nn.Module) -> bool:
    """Whether ``module`` is a transformers ``GradientCheckpointingLayer`` (found by base-class name)."""
    return any(c.__name__ == "GradientCheckpointingLayer" for c in type(module).__mro__[1:])


def turn_off_hf_checkpointing(root: nn.Module, who: str) -> list[str]:
    """Turn off HF's ``gradient_checkpointing`` flag on ``root`` and below, warning once per class.

    Two layers of checkpointing would recompute twice, and HF's (``torch.utils.checkpoint``) fails on
    XLA. Returns the names of the modules whose flag was on.
    """
    names = []
    for name, m in root.named_modules():
        if getattr(m, "gradient_checkpointing", None) is True:
            m.gradient_checkpointing = False
            names.append(name)
    if names:
        cls = type(root)
        _warn_once(_warned_flag, cls, (
            f"xla_ckpt.{who}: Hugging Face gradient checkpointing was on for {cls.__name__} "
            f"({len(names)} modules, e.g. '{names[0] or '<root>'}'); turned it off so that each module is "
            "checkpointed once, by xla_ckpt (HF's torch.utils.checkpoint also fails on XLA). Do not call "
            "gradient_checkpointing_enable()/activation_checkpointing_enable() with xla_ckpt."
        ))
    return names


def hf_block_classes(model: nn.Module) -> set[str]:
    """Class names HF lists as its repeated blocks (``_no_split_modules`` of the model and its parts)."""
    out: set[str] = set()
    for m in model.modules():
        names = getattr(type(m), "_no_split_modules", None)
        inst = m.__dict__.get("_no_split_modules")
        for group in (names, inst):
            if isinstance(group, (list, tuple, set, frozenset)):
                out.update(n for n in group if isinstance(n, str))
    return out
