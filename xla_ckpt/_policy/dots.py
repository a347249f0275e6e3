"""Matmul-class ops and their batch size, read from the call's shapes (JAX's ``dot_general`` view).

"No batch dims" is a property of the contraction, not of the op's name: ``torch.einsum("ij,jk->ik")``
runs as an ``aten.bmm`` of batch 1 on CPU (its composite reshapes both operands to 3-D), which is a
projection like ``aten.mm``. A contraction counts as batched only when its batch size is above 1.

Example:
    >>> dot_batch(torch.ops.aten.bmm.default, (a, b))   # a: [1, 3, 4] -> 1 (a projection)
    >>> dot_batch(torch.ops.aten.gelu.default, (a,))    # not a matmul -> None
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch

__all__ = ["DOT_PACKETS", "dot_batch", "einsum_batch"]

aten = torch.ops.aten


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else ()


def _no_batch(args: tuple[Any, ...]) -> int:
    return 1


def _leading(i: int) -> Callable[[tuple[Any, ...]], int]:
    def batch(args: tuple[Any, ...]) -> int:
        shape = _shape(args[i]) if len(args) > i else ()
        return shape[0] if shape else 1

    return batch


def _attention(args: tuple[Any, ...]) -> int:
    # (batch, heads, seq, head_dim) queries: every dimension but the last two is a batch dimension.
    shape = _shape(args[0]) if args else ()
    return math.prod(shape[:-2]) if len(shape) > 2 else 1


def einsum_batch(equation: str, operands: list[Any]) -> Optional[int]:
    """Batch size of a two-operand einsum (product of the dims in both inputs and the output), else None.

    One operand (a transpose, trace or sum) or three and more (a chain, which torch contracts pairwise
    into ops seen separately) is not one matmul: None.
    """
    if len(operands) != 2 or not isinstance(equation, str):
        return None
    eq = equation.replace(" ", "")
    lhs, _, out = eq.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != 2:
        return None
    if not _:
        # Implicit output: the letters that appear once, sorted, after the ellipsis (numpy's rule).
        letters = lhs.replace(",", "").replace(".", "")
        out = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    sizes: dict[str, int] = {}
    ellipsis: list[tuple[int, ...]] = []
    for sub, op in zip(inputs, operands, strict=True):
        shape = _shape(op)
        if "..." in sub:
            head, tail = sub.split("...")
            n_ell = len(shape) - len(head) - len(tail)
            ellipsis.append(shape[len(head) : len(head) + n_ell])
            # Not strict: the equation is the caller's, and a malformed one is for torch's einsum to reject.
            dims = list(zip(head, shape[: len(head)], strict=False))
            dims += zip(tail, shape[len(shape) - len(tail) :], strict=False)
        else:
            dims = list(zip(sub, shape, strict=False))
        for c, n in dims:
            sizes[c] = max(sizes.get(c, 1), n)
    batch = math.prod(sizes[c] for c in set(inputs[0]) & set(inputs[1]) & set(out) if c.isalpha())
    if len(ellipsis) == 2 and "..." in out:
        # Dims under "..." in both operands are broadcast batch dims.
        a, b = ellipsis
        n = max(len(a), len(b))
        a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
        batch *= math.prod(max(x, y) for x, y in zip(a, b, strict=True))
    return batch


def _einsum(args: tuple[Any, ...]) -> int:
    eq, operands = (args[0], list(args[1])) if len(args) > 1 else ("", [])
    batch = einsum_batch(eq, operands)
    # More than two operands: torch contracts them pairwise; as one op it is a batched contraction
    # at worst. Treat it as batched unless its shapes say otherwise.
    return batch if batch is not None else 2


def _packets(*names: str) -> list[Any]:
    # Some attention kernels exist only in some builds: take the ones this torch has.
    return [getattr(aten, n) for n in names if hasattr(aten, n)]


_BATCH: dict[Any, Callable[[tuple[Any, ...]], int]] = {
    aten.mm: _no_batch,
    aten.addmm: _no_batch,
    aten.convolution: _no_batch,  # a projection per pixel, as mm's (docs/correctness.md: the JAX row)
    aten.bmm: _leading(0),
    aten.baddbmm: _leading(1),
    aten.einsum: _einsum,  # seen as one op where a backend does not decompose it
    **{p: _attention for p in _packets(
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward",
        "_efficient_attention_forward",
    )},
}

DOT_PACKETS: frozenset[Any] = frozenset(_BATCH)
"""Matmul-class ops (packets): mm, addmm, bmm, baddbmm, einsum, convolution, attention kernels."""


def dot_batch(op: Any, args: tuple[Any, ...]) -> Optional[int]:
    """Batch size of a matmul-class call (1: no batch dims), or None when ``op`` is not one."""
    batch = _BATCH.get(op.overloadpacket)
    return None if batch is None else batch(args)
