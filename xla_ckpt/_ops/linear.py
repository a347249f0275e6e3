"""The corrected linear: autograd keeps the weight itself, never ``weight.t()`` or a cast copy.

On XLA, ``F.linear`` lowers to ``aten.t_copy`` + ``addmm`` and ``AddmmBackward0`` saves the transposed
copy: a separate device buffer that outlives FSDP's free of the full weight and that backward reads
instead of the re-gathered weight (pytorch/xla#3811). Under autocast it saves a low-precision cast
copy instead (pytorch/xla#3718). Here the weight object is saved by identity and every derived form
(transpose, cast) is re-derived in backward from the weight found there.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import nn

from xla_ckpt._base import compat as _compat
from xla_ckpt._base.warn import warn_once

__all__ = ["linear", "Linear", "patch_linear", "unpatch_linear", "linear_patched"]

# The ATen binding itself: our Function must not call ``F.linear``, which ``linear_patched`` replaces.
_aten_linear = torch._C._nn.linear


def _autocast_dtype(x: torch.Tensor) -> Optional[torch.dtype]:
    """The dtype autocast would run ``linear`` in for ``x``, or None when autocast is off."""
    device_type = x.device.type
    # Meta tensors (``xla_ckpt.estimate``) have no autocast state of their own.
    if not x.is_floating_point() or device_type == "meta" or not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def _no_autocast(device_type: str) -> Any:
    # Meta tensors (``xla_ckpt.estimate``) have no autocast to switch off.
    return contextlib.nullcontext() if device_type == "meta" else torch.autocast(device_type, enabled=False)


class _LinearFunction(torch.autograd.Function):
    """``y = x @ W.T + b`` saving ``(x, W)`` by identity; ``W`` is cast to ``dtype`` on both passes."""

    @staticmethod
    def forward(
        ctx: Any,  # autograd's ctx: saved_tensors, needs_input_grad and our own fields, none in its stub
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        dtype: Optional[torch.dtype],
    ) -> torch.Tensor:
        w = weight if dtype is None else weight.to(dtype)
        b = bias if (bias is None or dtype is None) else bias.to(dtype)
        with _no_autocast(x.device.type):
            out = _aten_linear(x, w, b)
        # Only what backward will read, as autograd's own addmm/mm node keeps it (it saves mat1 only when
        # mat2 needs a grad, and mat2 only when mat1 does): the input when the weight needs a grad, the
        # weight when the input does. A frozen weight (LoRA's base layer) keeps no input alive.
        # The weight object itself: a parameter stays a parameter (by reference for the hooks).
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        ctx.save_for_backward(x if need_w else None, weight if need_x else None)
        ctx.weight_shape = weight.shape
        ctx.weight_dtype = weight.dtype
        ctx.dtype = dtype
        ctx.bias_dtype = None if bias is None else bias.dtype
        return out

    @staticmethod
    def backward(
        ctx: Any, grad: torch.Tensor
    ) -> tuple[Optional[torch.Tensor], ...]:
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        out_features, in_features = ctx.weight_shape[0], ctx.weight_shape[-1]
        g2 = grad.reshape(-1, out_features)
        grad_x = grad_w = grad_b = None
        with _no_autocast(grad.device.type):
            if need_x:
                # Re-derive the compute-dtype weight from the weight as it is *now* (FSDP may have re-gathered it).
                w = weight if ctx.dtype is None else weight.to(ctx.dtype)
                grad_x = grad.matmul(w)
            if need_w:
                grad_w = g2.t().mm(x.reshape(-1, in_features)).to(ctx.weight_dtype)
            if need_b:
                grad_b = g2.sum(0).to(ctx.bias_dtype)
        return grad_x, grad_w, grad_b, None


def linear(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Drop-in for ``torch.nn.functional.linear`` whose autograd keeps the weight by identity.

    Args:
        input: ``(*, in_features)``, any rank >= 1, contiguous or not.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.

    Under autocast the forward runs in the autocast dtype, as ``F.linear`` does, but autograd keeps the
    original-precision weight and re-casts it in backward.

    Example:
        >>> y = xla_ckpt.linear(x, layer.weight, layer.bias)
    """
    if input.dim() < 1 or weight.dim() != 2:
        raise ValueError(
            f"xla_ckpt.linear: expected input of rank >= 1 and a 2-D weight, got input {tuple(input.shape)} "
            f"and weight {tuple(weight.shape)}"
        )
    if not _compat.is_compiling() and (_compat.func_transform() is not None or _compat.forward_ad_active()):
        # torch.func needs a Function with setup_context; what autograd keeps matters not there (it
        # holds its own levels, and no saved-tensor hooks run): the stock op, the same values. Forward
        # AD needs a ``jvp`` the Function does not have: the stock op computes the tangent.
        return F.linear(input, weight, bias)
    dtype = _autocast_dtype(input)
    if dtype is not None:
        # The input cast stays outside the Function: its grad node saves nothing, and we save the
        # cast activation (what the matmul really read), as F.linear does.
        input = input.to(dtype)
        if weight.dtype == dtype and (bias is None or bias.dtype == dtype):
            dtype = None
    elif input.dtype != weight.dtype:
        raise TypeError(
            f"xla_ckpt.linear: input dtype {input.dtype} differs from weight dtype {weight.dtype} "
            "(outside autocast both must match, as for F.linear)"
        )
    return _LinearFunction.apply(input, weight, bias, dtype)


class Linear(nn.Linear):
    """``nn.Linear`` whose forward is :func:`xla_ckpt.linear`; same parameters and state-dict keys.

    Example:
        >>> layer = xla_ckpt.Linear.from_linear(nn.Linear(16, 32))
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return linear(input, self.weight, self.bias)

    @classmethod
    def from_linear(cls, module: nn.Linear) -> "Linear":
        """A ``Linear`` sharing ``module``'s parameter objects (no copy, no re-initialisation)."""
        new = cls(module.in_features, module.out_features, bias=module.bias is not None, device="meta")
        new.weight = module.weight
        new.bias = module.bias
        new.train(module.training)
        return new


class _PatchedForward:
    """Instance-level ``forward`` of a patched ``nn.Linear``.

    A small object rather than a bound method: pickle restores a bound method by name lookup on the
    half-restored module (finding the class's forward), while this pickles and deep-copies with it.
    """

    def __init__(self, module: nn.Linear) -> None:
        self.module = module

    def __call__(self, input: torch.Tensor) -> torch.Tensor:
        return linear(input, self.module.weight, self.module.bias)


def _is_patched(m: nn.Module) -> bool:
    return isinstance(m.__dict__.get("forward"), _PatchedForward)


def patch_linear(module: nn.Module) -> nn.Module:
    """Make every ``nn.Linear`` in ``module`` (root included) use :func:`xla_ckpt.linear`, in place.

    Idempotent; parameters, state-dict keys, ``repr`` and pickling are unchanged (the patch is an
    instance attribute ``forward``). Subclasses of
    ``nn.Linear`` that override ``forward`` are left alone and named in a ``UserWarning``.

    Example:
        >>> xla_ckpt.patch_linear(model)
    """
    skipped = []
    for name, m in module.named_modules():
        if not isinstance(m, nn.Linear) or _is_patched(m):
            continue
        if type(m).forward is not nn.Linear.forward or "forward" in m.__dict__:
            skipped.append(f"{name or '<root>'} ({type(m).__qualname__})")
            continue
        m.forward = _PatchedForward(m)  # type: ignore[method-assign]
    if skipped:
        warn_once(("patch-linear-skipped", tuple(skipped)),
                  "xla_ckpt.patch_linear left these nn.Linear subclasses alone because they define their own "
                  f"forward: {', '.join(skipped)}. Call xla_ckpt.linear in their forward to correct them.")
    return module


def unpatch_linear(module: nn.Module) -> nn.Module:
    """Undo :func:`patch_linear` on every module of ``module``; a no-op where nothing was patched."""
    for m in module.modules():
        if _is_patched(m):
            del m.__dict__["forward"]
    return module


@contextlib.contextmanager
def linear_patched() -> Iterator[None]:
    """Within the block, ``torch.nn.functional.linear`` is :func:`xla_ckpt.linear`.

    Restored on exit, also when the block raises; nesting is safe (each level restores what it saw).

    Example:
        >>> with xla_ckpt.linear_patched():
        ...     loss = model(x).sum()
    """
    previous = F.linear
    F.linear = linear
    try:
        yield
    finally:
        F.linear = previous
