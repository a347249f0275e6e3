"""``checkpointed``: one line on a function, a module class or a module instance."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from types import FrameType
from typing import Any, Callable, Optional, TypeVar, overload

import torch
import torch.utils.checkpoint
from torch import nn

from xla_ckpt._base import compat as _compat
from xla_ckpt._api import hf as _hf
from xla_ckpt._base import modules as _modules
from xla_ckpt._base.errors import refuse_torchscript
from xla_ckpt._base.instance_forward import InstanceForward
from xla_ckpt._base.warn import warn_once
from xla_ckpt._engine.region import run
from xla_ckpt._api.forms import as_policy

__all__ = ["checkpointed", "uncheckpointed", "checkpoint_policy"]

T = TypeVar("T")


class _CheckpointedForward(InstanceForward):
    """Instance-level ``forward`` of a checkpointed module (picklable and deep-copyable with it).

    ``inner`` is an instance-level forward that was there before (e.g. ``patch_linear``'s), else None.
    """

    def __init__(self, module: nn.Module, policy: Any, inner: Optional[Callable[..., Any]],
                 verify: bool = False) -> None:
        super().__init__(module)
        self.policy = policy
        self.inner = inner
        self.verify = verify
        self.cache = _hf.cache_plan(inner if inner is not None else type(module).forward)

    @property
    def __signature__(self) -> inspect.Signature:
        # inspect.signature(module.forward) stays the model's own (HF Trainer filters columns by it).
        forward = self.inner if self.inner is not None else type(self.module).forward.__get__(self.module)
        return inspect.signature(forward)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module = self.module
        args, kwargs = _prepare(module, self.cache, args, kwargs)
        fwd = self.inner if self.inner is not None else functools.partial(type(module).forward, module)
        if self.cache is not None and self.cache.writes_cache_outside_training(module, args, kwargs):
            return fwd(*args, **kwargs)  # eval with grad and a KV cache: plainly, as HF does (_api/hf.py)
        if _compat.is_compiling():
            # Dynamo names modules itself (nn_module_stack); the eager module stack would break the graph.
            return run(fwd, args, kwargs, self.policy)
        if _in_torch_checkpoint(module):
            return fwd(*args, **kwargs)  # already checkpointed, by torch: once is enough
        with _modules.entered(module):
            return run(fwd, args, kwargs, self.policy, self.verify)


def _prepare(module: nn.Module, cache: Optional[_hf.CachePlan], args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Per call, before the region: HF's own checkpointing off (it would nest a second one inside
    ours; the flag may have been set after wrapping) and any KV cache off in training. ``cache`` was
    read from the forward's signature when it was wrapped: nothing here inspects or caches (Dynamo)."""
    if getattr(module, "gradient_checkpointing", None) is True and not _compat.is_compiling():
        # Set after wrapping (Trainer(gradient_checkpointing=True) calls gradient_checkpointing_enable() when
        # training starts): turn it off on the whole model being called, not just on this layer, and
        # name the modules from there.
        running = _modules.running_modules()
        _hf.turn_off_own_checkpointing(running[0] if running else module, "checkpointed")
    return (args, kwargs) if cache is None else cache.apply(module, args, kwargs)


# torch/utils/checkpoint.py as code objects name it (compared per frame: a set lookup).
_TORCH_CHECKPOINT = frozenset({torch.utils.checkpoint.__file__, os.path.abspath(torch.utils.checkpoint.__file__)})


def _in_torch_checkpoint(module: nn.Module) -> bool:
    """Whether this call runs inside ``torch.utils.checkpoint`` (its forward or its recompute).

    A model's own checkpointing wraps our modules when it was turned on after ``apply`` (timm's
    ``set_grad_checkpointing()`` sets a flag on the model or its stages, above the blocks we wrap;
    ``checkpoint_seq`` then runs them inside torch's checkpoint). A region of ours inside it would be
    recomputed twice (reentrant: torch's recompute runs our forward again, and our replay runs in its
    backward). The module then runs plainly, once recomputed by torch, and the flags of the running
    model are turned off (with the notice) so that from the next call on only xla_ckpt checkpoints.
    Read from the Python stack, as :func:`xla_ckpt._base.modules.running_modules` reads modules.
    """
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename not in _TORCH_CHECKPOINT:
        frame = frame.f_back
    if frame is None:
        return False
    running = _modules.running_modules()
    if _hf.turn_off_own_checkpointing(running[0] if running else module, "checkpointed"):
        return True
    # Noticed already: the model's own checkpointing, turned off by an earlier block of this forward (its
    # flag is still an attribute of a running module), or torch's recompute in backward (no model running).
    own = any(hasattr(m, flag) for m in running for flag in _hf.OWN_FLAGS)
    if not own and torch._C._current_graph_task_id() == -1:
        cls = type(module)
        warn_once(("in-torch-checkpoint", cls), (
            f"xla_ckpt: {cls.__name__} is checkpointed and was called inside torch.utils.checkpoint; it runs "
            "without xla_ckpt's checkpoint there (torch's recomputes it once; both would recompute it twice)."
        ))
    return True


def _class_policy(cls: type[nn.Module]) -> Any:
    return getattr(cls.forward, "__xla_ckpt_policy__", None)


def checkpoint_policy(module: nn.Module) -> Any:
    """The policy ``module`` is checkpointed with (instance or class level), or None."""
    fwd = module.__dict__.get("forward")
    if isinstance(fwd, _CheckpointedForward):
        return fwd.policy
    return _class_policy(type(module))


def _wrap_instance(module: nn.Module, policy: Any, verify: bool = False) -> nn.Module:
    current = checkpoint_policy(module)
    if current is not None:
        if current == policy:
            return module  # same policy: wrapping twice is a no-op
        raise ValueError(
            f"{type(module).__name__} is already checkpointed with {current!r}; call "
            f"xla_ckpt.uncheckpointed(module) before checkpointing it with {policy!r}"
        )
    _hf.turn_off_own_checkpointing(module, "checkpointed")
    module.forward = _CheckpointedForward(module, policy, module.__dict__.get("forward"), verify)
    return module


def _wrap_class(cls: type[nn.Module], policy: Any, verify: bool = False) -> type:
    current = _class_policy(cls)
    if current is not None:
        if current == policy:
            return cls
        raise ValueError(f"class {cls.__name__} is already checkpointed with {current!r}")
    original = cls.forward
    cache = _hf.cache_plan(original)

    @functools.wraps(original)
    def forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = _prepare(self, cache, args, kwargs)
        if cache is not None and cache.writes_cache_outside_training(self, args, kwargs):
            return original(self, *args, **kwargs)  # eval with grad and a KV cache: plainly, as HF does
        if _compat.is_compiling():
            return run(functools.partial(original, self), args, kwargs, policy)
        if _in_torch_checkpoint(self):
            return original(self, *args, **kwargs)  # already checkpointed, by torch: once is enough
        with _modules.entered(self):
            return run(functools.partial(original, self), args, kwargs, policy, verify)

    forward.__xla_ckpt_policy__ = policy  # type: ignore[attr-defined]
    forward.__xla_ckpt_original__ = original  # type: ignore[attr-defined]
    forward.__xla_ckpt_own__ = "forward" in cls.__dict__  # type: ignore[attr-defined]
    cls.forward = forward
    return cls


def _wrap_function(fn: Callable[..., Any], policy: Any, verify: bool = False) -> Callable[..., Any]:
    if getattr(fn, "__xla_ckpt_policy__", None) is not None:
        if fn.__xla_ckpt_policy__ == policy:  # type: ignore[attr-defined]
            return fn
        raise ValueError(f"{fn.__name__} is already checkpointed with {fn.__xla_ckpt_policy__!r}")  # type: ignore[attr-defined]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return run(fn, args, kwargs, policy, verify)

    wrapper.__xla_ckpt_policy__ = policy  # type: ignore[attr-defined]
    return wrapper


@overload
def checkpointed(obj: T, *, policy: Any = ..., verify: bool = ...) -> T: ...
@overload
def checkpointed(obj: None = ..., *, policy: Any = ..., verify: bool = ...) -> Callable[[T], T]: ...


def checkpointed(obj: Any = None, *, policy: Any = "nothing_saveable", verify: bool = False) -> Any:
    """Checkpoint a function, every instance of an ``nn.Module`` class, or one module in place.

    Args:
        obj: a function, an ``nn.Module`` subclass, or an ``nn.Module`` instance; omitted when used
            as ``@checkpointed(policy=...)``.
        policy: a policy name, a policy object or an ``(OpCall) -> Decision`` function (see
            ``xla_ckpt.policies``); or a preset name, a ``Config``, a dict or a config file whose rules use one
            policy (``"dots"``: ``dots_saveable``).
        verify: recompute saved outputs too and compare (see :func:`xla_ckpt.checkpoint`).

    Parameters, ``state_dict()`` keys, ``repr``, pickling, ``deepcopy`` and ``train()/eval()`` are
    unchanged. Wrapping twice with the same policy is a no-op; with another one, a ``ValueError``.
    :func:`uncheckpointed` undoes it.

    Example:
        >>> @xla_ckpt.checkpointed(policy="dots_saveable")
        ... class Block(nn.Module): ...
        >>> xla_ckpt.checkpointed(model.layers[0], policy="nothing_saveable")
    """
    pol = as_policy(policy, "xla_ckpt.checkpointed")
    if not isinstance(verify, bool):
        raise TypeError(f"xla_ckpt.checkpointed: verify must be True or False, got {verify!r}")
    if obj is None:
        return lambda o: checkpointed(o, policy=pol, verify=verify)
    refuse_torchscript(obj, "xla_ckpt.checkpointed")
    if isinstance(obj, nn.Module):
        return _wrap_instance(obj, pol, verify)
    if isinstance(obj, type) and issubclass(obj, nn.Module):
        return _wrap_class(obj, pol, verify)
    if callable(obj):
        return _wrap_function(obj, pol, verify)
    raise TypeError(f"xla_ckpt.checkpointed: expected a function, an nn.Module class or instance, got {obj!r}")


def uncheckpointed(obj: Any) -> Any:
    """Undo :func:`checkpointed` on a module instance, a module class or a function; returns it."""
    if isinstance(obj, nn.Module):
        fwd = obj.__dict__.get("forward")
        if isinstance(fwd, _CheckpointedForward):
            if fwd.inner is not None:
                obj.forward = fwd.inner
            else:
                del obj.__dict__["forward"]
        return obj
    if isinstance(obj, type) and issubclass(obj, nn.Module):
        fwd = obj.__dict__.get("forward")
        original = getattr(fwd, "__xla_ckpt_original__", None)
        if original is not None:
            if fwd.__xla_ckpt_own__:  # type: ignore[union-attr]
                obj.forward = original
            else:
                delattr(obj, "forward")  # it was inherited: expose the parent's again
        return obj
    return getattr(obj, "__wrapped__", obj) if getattr(obj, "__xla_ckpt_policy__", None) is not None else obj
