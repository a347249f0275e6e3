"""The device an estimate plans for: the forms its kernels keep for backward where devices differ.

The meta device's kernels are one device's choices; the devices differ in two places that matter for
activation memory (measured on torch 2.9 / torch_xla 2.9 with ``saved_activations()``):

- **dropout** (``F.dropout``, and the dropout inside math SDPA): CPU and XLA run ``aten::dropout``'s
  composite, ``input * noise`` with the noise kept in the input's dtype (XLA is not a device
  ``is_fused_kernel_acceptable`` admits); CUDA runs ``native_dropout`` and keeps a 1-byte bool mask.
  The meta device keeps the noise, as CPU does.
- **LayerNorm statistics** (mean, rstd per row): CPU keeps them in the input's dtype (bf16 for bf16;
  fp32 when a reduced input meets fp32 weights), CUDA and the meta kernel in fp32. XLA runs
  ``math_native_layer_norm`` above autograd: the input reshaped to ``[1, M, N]`` through
  ``native_batch_norm`` (statistics ``[M]`` in the input's dtype), then ``addcmul`` with the weight,
  which keeps the normalized output too.

``DeviceForms(device)`` is entered for one ``estimate``: a function mode that sends ``F.layer_norm`` /
``F.dropout`` / SDPA-with-dropout through the chosen device's composite, and a dispatch mode that gives
statistics the device's dtype. ``"cpu"`` and ``"xla"`` are measured (exact against a real step);
``"cuda"`` and ``"tpu"`` (XLA's forms) are modelled from the kernels' sources.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DEVICES", "MEASURED", "DeviceForms", "check_device", "modelled_device"]

_aten = torch.ops.aten

# name -> what it keeps (fit's report prints it).
DEVICES = {
    "cpu": "eager CPU: dropout keeps its noise in the input dtype, LayerNorm its statistics in the input dtype",
    "xla": "PyTorch/XLA: dropout keeps its noise in the input dtype, LayerNorm runs as batch norm "
           "(statistics in the input dtype, plus the normalized output)",
    "tpu": "PyTorch/XLA on TPU, modelled as 'xla' (XLA:CPU measured, not a TPU)",
    "cuda": "eager CUDA, modelled: dropout keeps a 1-byte mask (native_dropout), LayerNorm fp32 statistics",
}
MEASURED = ("cpu", "xla")  # exact against a real step here; the others are modelled


def check_device(device: str, who: str) -> str:
    """``device`` if it is a known name, else a ValueError naming ``who``, the value and the choices."""
    if device not in DEVICES:
        raise ValueError(f"{who}: device={device!r}; allowed: {', '.join(repr(k) for k in DEVICES)} "
                         f"({'; '.join(f'{k}: {v}' for k, v in DEVICES.items())})")
    return device


def _reduced(dtype: torch.dtype) -> bool:
    return dtype in (torch.bfloat16, torch.float16)


def _layer_norm_xla(input: torch.Tensor, normalized_shape: Any, weight: Optional[torch.Tensor] = None,
                    bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    """ATen's ``math_native_layer_norm``, which PyTorch/XLA runs above autograd (torch 2.9)."""
    n = len(normalized_shape) if isinstance(normalized_shape, (tuple, list, torch.Size)) else 1
    rows = math.prod(input.shape[:input.dim() - n])
    out = torch.native_batch_norm(input.reshape(1, rows, -1), None, None, None, None, True, 0.0, eps)[0]
    out = out.view(input.shape)
    if weight is not None and bias is not None:
        return bias.addcmul(out, weight, value=1)
    if weight is not None:
        return out.mul(weight)
    return out.add(bias) if bias is not None else out


def _dropout_cuda(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
    """``aten::dropout`` as CUDA runs it: ``native_dropout`` (a bool mask kept) where the fused kernel applies."""
    if training and not inplace and 0 < p < 1 and input.numel() > 0:
        return _aten.native_dropout(input, p, True)[0]
    return F.dropout(input, p, training, inplace)


def _sdpa_math(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
               dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
               enable_gqa: bool = False, *, dropout: Any = None) -> torch.Tensor:
    """ATen's ``_scaled_dot_product_attention_math`` (torch 2.9), its dropout CUDA's unless ``dropout`` is given.

    ``dropout=F.dropout`` is the CPU path, op for op (a test compares it with torch's own on CPU).
    """
    dtype = query.dtype
    if _reduced(dtype):  # the math path keeps q, k, v in fp32 for accuracy
        query, key, value = query.float(), key.float(), value.float()
    negative = scale is not None and scale < 0
    factor = math.sqrt(abs(scale) if scale is not None else 1.0 / math.sqrt(query.shape[-1]))
    query = query * (-factor if negative else factor)
    if is_causal:
        causal = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool, device=query.device).tril()
        attn_mask = causal
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(~attn_mask, float("-inf"))
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        key = key.repeat_interleave(query.shape[-3] // key.shape[-3], dim=-3)
        value = value.repeat_interleave(query.shape[-3] // value.shape[-3], dim=-3)
    attn = torch.matmul(query, key.transpose(-2, -1) * factor)
    if attn_mask is not None:
        attn.add_(attn_mask)
    attn = _aten._safe_softmax(attn, -1)
    if dropout_p > 0:
        attn = (dropout or _dropout_cuda)(attn, dropout_p)
    return torch.matmul(attn, value).to(dtype)


_SDPA = (F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)


class _Functions(TorchFunctionMode):
    def __init__(self, device: str) -> None:
        super().__init__()
        self.device = device

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        if self.device in ("xla", "tpu") and func in (F.layer_norm, torch.layer_norm):
            return _layer_norm_xla(*args, **kwargs)
        if self.device == "cuda":
            if func in (F.dropout, torch.dropout):
                return _dropout_cuda(*args, **kwargs)
            if func in _SDPA and (kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0) or 0.0) > 0:
                return _sdpa_math(*args, **kwargs)
        return func(*args, **kwargs)


# native_batch_norm, and what FlopCounterMode decomposes it into (torch 2.9): statistics are outputs 1 and 2.
_BATCH_NORMS = (_aten.native_batch_norm.default, _aten._native_batch_norm_legit.no_stats,
                _aten._native_batch_norm_legit.default, _aten._native_batch_norm_legit_functional.default)


class _Dtypes(TorchDispatchMode):
    """Statistics in the device's dtype: CPU LayerNorm's and XLA batch norm's (the meta kernels' are fp32)."""

    def __init__(self, device: str) -> None:
        super().__init__()
        self.device = device

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is _aten.native_layer_norm.default and self.device == "cpu":
            x, weight, bias = args[0], args[2] if len(args) > 2 else None, args[3] if len(args) > 3 else None
            mixed = _reduced(x.dtype) and any(t is not None and t.dtype == torch.float32 for t in (weight, bias))
            dtype = torch.float32 if mixed else x.dtype  # layer_norm_cpu's param_scalar_type
            return out[0], out[1].to(dtype), out[2].to(dtype)
        if func in _BATCH_NORMS and self.device in ("xla", "tpu"):
            return (out[0], out[1].to(args[0].dtype), out[2].to(args[0].dtype), *out[3:])
        return out


class _Modelled(threading.local):
    def __init__(self) -> None:
        self.device: Optional[str] = None


_modelled = _Modelled()


def modelled_device() -> Optional[str]:
    """The device the running estimate plans for on this thread (None outside an estimate).

    ``_api.outside`` asks it: on the meta device the modules ``apply`` corrects for XLA run their corrected
    forward when the estimate plans for XLA, as they do on a real XLA step.
    """
    return _modelled.device


class DeviceForms:
    """Both modes for one estimate (the function mode outside, so a fused-attention mode inside wins).

    Example:
        >>> with DeviceForms("xla"):
        ...     y = F.layer_norm(x, [64])   # kept as PyTorch/XLA keeps it
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.modes = (_Functions(device), _Dtypes(device))
        self.outer: Optional[str] = None

    def __enter__(self) -> "DeviceForms":
        for m in self.modes:
            m.__enter__()
        self.outer, _modelled.device = _modelled.device, self.device
        return self

    def __exit__(self, *exc: Any) -> None:
        _modelled.device = self.outer
        for m in reversed(self.modes):
            m.__exit__(*exc)
