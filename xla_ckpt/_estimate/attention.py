"""The attention kernel an estimate models: ``math`` SDPA or a fused ``flash`` kernel, and which a chip runs.

On meta (and on XLA, which lowers ``scaled_dot_product_attention`` through the same math composite)
SDPA runs as matmuls and a softmax, upcast to fp32 for bf16/fp16 inputs: autograd keeps the fp32
probabilities, ``4 b a s^2`` bytes a layer. A fused kernel (FlashAttention on GPUs, Pallas flash
attention on TPUs) keeps the query, key, value, output and the log-sum-exp (``4 b a s`` bytes) instead
and recomputes the scores in its backward.

``FusedAttention`` is a function mode entered for one ``estimate``: it sends every
``F.scaled_dot_product_attention`` call to the fused ATen kernel torch itself dispatches to on CUDA
(``_scaled_dot_product_flash_attention``, or ``_scaled_dot_product_efficient_attention`` with a mask,
which the flash kernel does not take), whose meta kernels and autograd formulas are torch's own; their
FLOPs are torch's counter's formulas. Models that write attention out (matmul, softmax) are unchanged.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from xla_ckpt._estimate.chips import CHIPS

__all__ = ["ATTENTION", "FusedAttention", "check_attention", "default_attention"]

# name -> what it models (fit's report prints it).
ATTENTION = {
    "math": "math SDPA: the probabilities kept (fp32 for bf16/fp16), as on XLA and the meta device",
    "flash": "a fused kernel (FlashAttention, TPU Pallas flash attention): Q, K, V, output and log-sum-exp kept",
}


def check_attention(attention: str, who: str) -> str:
    """``attention`` if it is a known kernel name, else a ValueError naming ``who``, the value and the choices."""
    if attention not in ATTENTION:
        raise ValueError(f"{who}: attention={attention!r}; allowed: {', '.join(repr(k) for k in ATTENTION)} "
                         f"({'; '.join(f'{k}: {v}' for k, v in ATTENTION.items())})")
    return attention


def default_attention(chip: Optional[str], on_xla: bool = False) -> tuple[str, str]:
    """The kernel a training step on ``chip`` runs for ``F.scaled_dot_product_attention``, and why (a phrase).

    On a GPU, PyTorch's SDPA dispatches to a fused kernel (FlashAttention, or memory-efficient attention,
    which keeps the same). On a TPU, PyTorch/XLA lowers SDPA to matmuls and a softmax and turns XLA's
    flash-attention rewrite off (``xla_tpu_enable_flash_attention=false`` in ``torch_xla/__init__.py``),
    so the probabilities are kept unless the model calls Pallas flash attention itself. With no chip
    named, math is the assumption that does not underestimate.

    Example:
        >>> default_attention("h100")[0], default_attention("v5e")[0]
        ('flash', 'math')
    """
    if chip in CHIPS and not CHIPS[chip].xla:
        return "flash", (f"the default on {chip}: PyTorch's SDPA runs a fused kernel on CUDA; "
                         "attention='math' / --attention math to estimate the math path")
    if chip in CHIPS or on_xla:
        return "math", ("assumed for an XLA chip: PyTorch/XLA lowers SDPA to matmuls and a softmax; pass "
                        "attention='flash' / --attention flash if the model calls Pallas flash attention")
    return "math", ("assumed: no chip named; pass attention='flash' / --attention flash for a fused kernel "
                    "(FlashAttention)")


def _grouped(t: torch.Tensor, heads: int) -> torch.Tensor:
    """Grouped K or V (fewer heads than the query) as the kernel's equal head count.

    The ATen kernels (and their FLOP formulas) take equal head counts, while a fused kernel reads grouped
    K/V in place (FlashAttention-2, torch's CPU flash). On meta, where there are no values, a view of the
    same storage with a head stride of 0 has the right shape and keeps exactly the grouped bytes; a real
    tensor is repeated as the math path repeats it.
    """
    if not t.is_meta:
        return t.repeat_interleave(heads // t.shape[-3], dim=-3)
    size = (*t.shape[:-3], heads, *t.shape[-2:])
    return t.as_strided(size, (*t.stride()[:-3], 0, *t.stride()[-2:]), t.storage_offset())


def _sdpa_fused(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                enable_gqa: bool = False) -> torch.Tensor:
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        key, value = _grouped(key, query.shape[-3]), _grouped(value, query.shape[-3])
    if attn_mask is None:
        return torch.ops.aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    if attn_mask.dtype == torch.bool:  # as torch's SDPA converts a boolean mask before a fused kernel
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(~attn_mask, float("-inf"))
    attn_mask = attn_mask.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, True, dropout_p, is_causal, scale=scale)[0]


class FusedAttention(TorchFunctionMode):
    """Route ``F.scaled_dot_product_attention`` (4-D inputs) to the fused kernel, for the duration of a ``with``.

    Example:
        >>> with FusedAttention():
        ...     out = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # flash kernel
    """

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention or func is torch._C._nn.scaled_dot_product_attention:
            if len(args) >= 3 and all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in args[:3]):
                return _sdpa_fused(*args, **kwargs)
        return func(*args, **kwargs)
