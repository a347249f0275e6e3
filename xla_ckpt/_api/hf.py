"""Hugging Face conventions: caches off in training, HF's own checkpointing off (diffusers' and timm's
too), block classes, hints.

Nothing here imports ``transformers``: HF models are recognised by their attributes
(``_no_split_modules``, ``gradient_checkpointing``, a ``GradientCheckpointingLayer`` base class), so
the library stays usable, and cheap to import, without it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

from xla_ckpt._base import compat as _compat
from xla_ckpt._base.warn import warn_once

__all__ = [
    "CACHE_ARGS",
    "without_cache",
    "cache_plan",
    "CachePlan",
    "turn_off_own_checkpointing",
    "refuse_our_kwargs",
    "OWN_FLAGS",
    "hf_block_classes",
    "is_gc_layer",
]

# Names a KV cache goes by in HF layer signatures (transformers 5.x: ``cache``; 4.x: ``past_key_value(s)``;
# GPT-NeoX: ``layer_past``). Mirrors transformers' own list in modeling_layers.GradientCheckpointingLayer.
CACHE_ARGS = ("cache", "past_key_values", "past_key_value", "layer_past")



@dataclass(frozen=True)
class CachePlan:
    """Where a forward takes its KV-cache arguments, read once from its signature (at wrap time).

    Under ``torch.compile`` the call-time part (:meth:`apply`) is plain tuple and dict work that
    Dynamo traces into the graph: no ``inspect`` call, no cache of signatures (a global dict that
    grows on the first call is a guard that fails on the second: a recompile), no lock, no warning
    (``warnings.warn`` is a graph break on torch 2.9).

    ``use_cache``: (positional index or None, default) when the forward names ``use_cache``;
    ``caches``: (name, positional index or None) for each of :data:`CACHE_ARGS` it names;
    ``loose``: whether it takes ``**kwargs`` (where a cache argument may also arrive).
    """

    use_cache: Optional[tuple[Optional[int], Any]]
    caches: tuple[tuple[str, Optional[int]], ...]
    loose: bool

    def apply(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """``(args, kwargs)`` with the cache off when ``module`` trains with grad (see :func:`without_cache`)."""
        if not (module.training and torch.is_grad_enabled()):
            return args, kwargs
        new_args, new_kwargs = list(args), dict(kwargs)
        changed: list[str] = []

        def slot(name: str, index: Optional[int]) -> tuple[Any, bool]:
            if name in new_kwargs:
                return new_kwargs[name], True
            if index is not None and index < len(new_args):
                return new_args[index], True
            return None, False

        def put(name: str, index: Optional[int], value: Any) -> None:
            if name not in new_kwargs and index is not None and index < len(new_args):
                new_args[index] = value
            else:
                new_kwargs[name] = value

        if self.use_cache is not None:
            index, default = self.use_cache
            use, given = slot("use_cache", index)
            if not given:
                use = default
            if use is None:
                use = getattr(getattr(module, "config", None), "use_cache", False)
            if use:
                put("use_cache", index, False)
                changed.append("use_cache=False")
        elif self.loose and new_kwargs.get("use_cache"):
            new_kwargs["use_cache"] = False
            changed.append("use_cache=False")
        named = dict(self.caches)
        for name in CACHE_ARGS:
            if name in named:
                value, _ = slot(name, named[name])
                if value is not None:
                    put(name, named[name], None)
                    changed.append(f"{name}=None")
            elif self.loose and new_kwargs.get(name) is not None:
                new_kwargs[name] = None
                changed.append(f"{name}=None")
        if not changed:
            return args, kwargs
        # Quietly, as Hugging Face's own checkpointing (GradientCheckpointingLayer) turns it off: default configs
        # train with use_cache=True, so a notice here fired on every first step and asked nothing of the user.
        return tuple(new_args), new_kwargs

    def writes_cache_outside_training(self, module: nn.Module, args: tuple, kwargs: dict) -> bool:
        """Whether this call hands ``module`` a KV cache while it builds a graph in eval mode (grad on).

        The layer writes the cache in place (transformers 5: ``DynamicCache.update`` concatenates
        the new keys onto it), so a recompute in backward would write it again. Hugging Face's own
        checkpointing is off outside training; such a call runs plainly here too (exactly as without
        the library, nothing saved), warned once per class. In training the cache is turned off
        instead (:meth:`apply`); without grad nothing is checkpointed anyway.
        """
        if module.training or not torch.is_grad_enabled():
            return False
        given = False
        for name, index in self.caches:
            if kwargs.get(name) is not None or (index is not None and index < len(args) and args[index] is not None):
                given = True
        if self.loose and any(kwargs.get(name) is not None for name in CACHE_ARGS):
            given = True
        if given and not _compat.is_compiling():
            cls = type(module)
            warn_once(("hf-eval-cache", cls), (
                f"xla_ckpt: {cls.__name__} is checkpointed and was called in eval mode with grad enabled and a "
                "key/value cache: the layer writes the cache, and a recompute in backward would write it again, "
                "so such calls run without checkpointing (as Hugging Face's own checkpointing does outside "
                "training; values and gradients are those without xla_ckpt). For evaluation use torch.no_grad(); "
                "to checkpoint, pass use_cache=False or call model.train()."
            ), stacklevel=4)
        return given


def cache_plan(fn: Any) -> Optional[CachePlan]:
    """The :class:`CachePlan` of ``fn`` (a function taken from a class, ``self`` dropped, or a callable);
    None when it takes no cache argument or has no signature. Call it once, when wrapping."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if inspect.isfunction(fn) and params and params[0].kind in (params[0].POSITIONAL_ONLY,
                                                                 params[0].POSITIONAL_OR_KEYWORD):
        params = params[1:]  # the unbound ``self``
    index: dict[str, Optional[int]] = {}
    positional = True
    for i, p in enumerate(params):
        if p.kind is p.VAR_POSITIONAL:
            positional = False
        index[p.name] = i if positional and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else None
    kinds = {p.name: p for p in params}
    loose = any(p.kind is p.VAR_KEYWORD for p in params)
    use_cache = None
    if "use_cache" in kinds and kinds["use_cache"].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                               inspect.Parameter.VAR_KEYWORD):
        default = kinds["use_cache"].default
        use_cache = (index["use_cache"], None if default is inspect.Parameter.empty else default)
    caches = tuple((n, index[n]) for n in CACHE_ARGS if n in kinds)
    if use_cache is None and not caches and not loose:
        return None
    return CachePlan(use_cache, caches, loose)


def without_cache(module: nn.Module, fn: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``(args, kwargs)`` for ``fn`` with any KV cache turned off, when ``module`` trains with grad.

    ``fn`` is the forward being wrapped: a function taken from the class (``self`` not in ``args``)
    or a bound/instance-level callable. Wrappers compute :func:`cache_plan` once and call
    ``plan.apply`` instead (traceable by Dynamo).

    The recompute in backward would append to the cache a second time (a longer ``cat``, a
    ``CheckpointError``), which is why Hugging Face's own checkpointing turns caching off too
    (transformers ``GradientCheckpointingLayer``). ``use_cache`` becomes False (also when it is left to
    ``module.config.use_cache``) and a cache argument becomes None, without a warning (a training step
    has no use for the cache; the model's returned cache stays empty, as with HF's own checkpointing). In
    eval mode or without grad nothing changes: generation keeps its cache.
    """
    plan = cache_plan(fn)
    return (args, kwargs) if plan is None else plan.apply(module, args, kwargs)


def is_gc_layer(module: nn.Module) -> bool:
    """Whether ``module`` is a transformers ``GradientCheckpointingLayer`` (found by base-class name)."""
    return any(c.__name__ == "GradientCheckpointingLayer" for c in type(module).__mro__[1:])


def turn_off_own_checkpointing(root: nn.Module, who: str) -> list[str]:
    """Turn off the model's own checkpointing on ``root`` and below, warning once per class and kind.

    Hugging Face's and diffusers' flag is ``gradient_checkpointing``; timm's is ``grad_checkpointing``
    (what ``set_grad_checkpointing(False)`` sets, on the model or on its stages). Two layers of
    checkpointing would recompute twice (timm's reentrant ``checkpoint_seq`` around our regions: each
    block recomputed by torch, then again by us), and ``torch.utils.checkpoint`` fails on XLA.

    Args:
        root: the model (every module below it is looked at).
        who: the entry point named in the notice (``"apply"``, ``"checkpointed"``).

    Returns the names of the modules whose flag was on ("" for ``root``).

    Example:
        >>> vit.set_grad_checkpointing(True)
        >>> turn_off_own_checkpointing(vit, "apply")  # warns once for VisionTransformer
        ['']
    """
    refuse_our_kwargs(root, who)  # before any flag changes
    names: list[str] = []
    for attr, kind, how in _OWN_FLAGS:
        found = []
        for name, m in root.named_modules():
            if getattr(m, attr, None) is True:
                setattr(m, attr, False)
                found.append(name)
        if found:
            cls = type(root)
            warn_once((f"own-flag-{attr}", cls), (
                f"xla_ckpt.{who}: {kind} gradient checkpointing was on for {cls.__name__} "
                f"({len(found)} modules, e.g. {_example(found, cls)}); turned it off so that each module is "
                f"checkpointed once, by xla_ckpt ({kind}'s torch.utils.checkpoint also fails on XLA). Do not call "
                f"{how} with xla_ckpt."
            ))
        names += found
    return names


# (flag attribute, whose, what turns it on). Hugging Face's flag is ``gradient_checkpointing`` under both names of
# the feature (newer transformers call it ``activation_checkpointing*``, ``gradient_checkpointing*`` its aliases).
_OWN_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("gradient_checkpointing", "Hugging Face",
     "gradient_checkpointing_enable()/activation_checkpointing_enable() or TrainingArguments("
     "gradient_checkpointing=True / activation_checkpointing=True) (or diffusers' enable_gradient_checkpointing())"),
    ("grad_checkpointing", "timm", "set_grad_checkpointing()"),
)
OWN_FLAGS = tuple(attr for attr, _, _ in _OWN_FLAGS)


# Keyword arguments of ours that a user may hand Hugging Face's checkpointing, which passes them to
# torch.utils.checkpoint (never called once xla_ckpt checkpoints the layers: they would do nothing).
_OURS = ("policy",)


def refuse_our_kwargs(root: nn.Module, who: str) -> None:
    """Raise when Hugging Face's checkpointing on ``root`` was given an argument meant for xla_ckpt.

    ``gradient_checkpointing_enable(gradient_checkpointing_kwargs={"policy": ...})`` (also
    ``activation_checkpointing_kwargs``, or the same in ``TrainingArguments``) stores the arguments in the
    layers' checkpoint function, a ``functools.partial`` of ``torch.utils.checkpoint.checkpoint``. With
    xla_ckpt that function never runs, so such a policy would silently do nothing: an error naming the
    call that does it.

    Example:
        >>> model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"policy": "dots_saveable"})
        >>> refuse_our_kwargs(model, "apply")
        Traceback (most recent call last):
        ValueError: xla_ckpt.apply: ... use xla_ckpt.apply(model, 'dots_saveable') ...
    """
    for name, m in root.named_modules():
        if getattr(m, "gradient_checkpointing", None) is not True:
            continue
        keywords = getattr(m.__dict__.get("_gradient_checkpointing_func"), "keywords", None)
        if not isinstance(keywords, dict):
            continue
        for key in _OURS:
            if key in keywords:
                value = keywords[key]
                shown = repr(value) if isinstance(value, str) else key
                raise ValueError(
                    f"xla_ckpt.{who}: Hugging Face's checkpointing of {type(root).__name__} (module "
                    f"'{name or '<root>'}') was given {key}={value!r} in gradient_checkpointing_kwargs / "
                    "activation_checkpointing_kwargs; Hugging Face hands it to torch.utils.checkpoint, not to "
                    f"xla_ckpt, so it would do nothing. Checkpoint with xla_ckpt.apply(model, {shown}) and drop "
                    "gradient_checkpointing_enable() / activation_checkpointing_enable() (or gradient_checkpointing"
                    "=True / activation_checkpointing=True and their kwargs in TrainingArguments)."
                )


def _example(names: list[str], cls: type) -> str:
    """A module to name in the notice: a real path, the model's own class when only the root had it."""
    named = [n for n in names if n]
    return f"'{named[0]}'" if named else f"the model itself ({cls.__name__})"


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
