"""Outside the checkpointed modules, on XLA: ``nn.Linear`` and ``nn.LayerNorm`` keep for backward what they keep on CPU.

A checkpointed region decides itself what it keeps; the modules ``apply`` leaves unwrapped (an LM head,
a final norm, an embedding projection) run as stock PyTorch/XLA, which keeps more than CPU does:

- ``nn.Linear``: ``F.linear`` lowers to ``t_copy`` + ``addmm`` and autograd keeps the transposed copy
  of the weight, a buffer of its own (pytorch/xla#3811); :func:`xla_ckpt.linear` keeps the weight.
- ``nn.LayerNorm``: the decomposition torch_xla runs keeps a view of the input and the normalized
  ``x_hat`` (:mod:`xla_ckpt._ops.layer_norm`); the corrected layer norm keeps the input.

Both give the stock values and gradients (the same operations). Off XLA, under ``torch.compile``,
``torch.func``, autocast (layer norm only), inside a checkpoint region and under a user's saved-tensor
hook pair (which transforms what autograd keeps: a lossy pair gave other grads), the stock forward runs.
Without it the default GPT under ``full`` keeps 3 MiB more on XLA than on CPU, all of it here.
The patch is an instance-level ``forward`` as :func:`xla_ckpt.patch_linear`'s (``state_dict``, ``repr``
and pickling unchanged); subclasses with a ``forward`` of their own are left alone.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import nn

from xla_ckpt._api.device_forms import modelled_device
from xla_ckpt._base import compat as _compat
from xla_ckpt._base.instance_forward import InstanceForward
from xla_ckpt._hooks import saved as _saved
from xla_ckpt._ops.layer_norm import layer_norm
from xla_ckpt._ops.linear import linear

__all__ = ["correct_outside", "uncorrect_outside"]

# The classes corrected, each with its stock forward (a subclass overriding it is left alone).
_STOCK: dict[type, Callable[..., Any]] = {nn.Linear: nn.Linear.forward, nn.LayerNorm: nn.LayerNorm.forward}


def _corrected_here(x: Any) -> bool:
    """True where the stock op keeps more than CPU's and the corrected one may run."""
    if not isinstance(x, torch.Tensor):
        return False
    if x.device.type != "xla" and not (x.is_meta and modelled_device() in ("xla", "tpu")):
        return False  # an estimate for XLA runs on meta: the corrected forward, as the real step
    if _compat.is_compiling() or _compat.func_transform() is not None or _compat.forward_ad_active():
        # A compiled graph decides what it saves; torch.func keeps its own levels; forward AD needs a
        # ``jvp`` the corrected Functions do not have (the stock ops compute the tangents).
        return False
    st = _saved.state
    if st.region is not None or st.recompute is not None:
        return False  # a region decides what it keeps, op by op
    # A user's saved-tensor pair (a lossy bf16 pack, save_on_cpu) transforms what autograd keeps: the stock
    # op must keep what it keeps there (the corrected layer norm re-derived x_hat from the packed input).
    return _saved.user_pair() is None


class _OutsideForward(InstanceForward):
    """Instance-level ``forward`` of a corrected module (picklable and deep-copyable with it)."""

    def __call__(self, input: torch.Tensor) -> torch.Tensor:
        m = self.module
        if _corrected_here(input):
            if isinstance(m, nn.Linear):
                return linear(input, m.weight, m.bias)
            # Under autocast its own casts: the stock op, not re-derived here.
            if isinstance(m, nn.LayerNorm) and not torch.is_autocast_enabled("xla"):
                return layer_norm(input, m.normalized_shape, m.weight, m.bias, m.eps)
        return type(m).forward(m, input)


def _eligible(m: nn.Module) -> bool:
    return any(isinstance(m, c) and type(m).forward is f for c, f in _STOCK.items())


def correct_outside(model: nn.Module, inside: Iterable[str]) -> list[str]:
    """Correct every stock ``nn.Linear`` / ``nn.LayerNorm`` of ``model`` not in or below a name of ``inside``.

    Args:
        model: the root module.
        inside: the qualified names of the checkpointed modules ("" is the root: nothing is outside).

    Returns the names of the modules corrected. Modules that already have an instance-level
    ``forward`` (``patch_linear``'s, a user's) are left as they are.

    Example:
        >>> correct_outside(model, ["layers.0", "layers.1"])
        ['ln_f', 'lm_head']
    """
    names = set(inside)
    # Inlined into a compiled graph as torch.nn's forwards are, never a graph of its own (see compat).
    _compat.dynamo_skips_as_root(_OutsideForward.__call__.__code__)
    if "" in names:
        return []
    prefixes = tuple(n + "." for n in names)
    done = []
    for name, m in model.named_modules():
        if name in names or name.startswith(prefixes) or not _eligible(m) or "forward" in m.__dict__:
            continue
        m.forward = _OutsideForward(m)
        done.append(name)
    return done


def uncorrect_outside(model: nn.Module) -> None:
    """Undo :func:`correct_outside` on every module of ``model``; a no-op where nothing was corrected."""
    for m in model.modules():
        if isinstance(m.__dict__.get("forward"), _OutsideForward):
            del m.__dict__["forward"]
