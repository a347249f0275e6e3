"""Whether two eager tensors on one storage share an element: pieces of one split, written in place.

``torch.unsafe_split`` / ``unsafe_chunk`` give pieces of one storage that do *not* share their base's
version counter (``nn.GRUCell`` on CPU splits its gate matmuls so and writes each gate in place): a
write to one piece leaves the others' elements and versions alone, and autograd does not object. The
engine keys buffers by storage, so it must tell such a write from one that reaches a saved tensor's
elements without autograd counting it (a ``.data`` write), which the replay cannot repeat.
``torch._C._overlaps`` answers "too hard" (so: overlapping) for any two strided pieces of one storage.
"""

from __future__ import annotations

from typing import Union

import torch

__all__ = ["elements_apart"]

# Above this many elements in either tensor, the element sets are not built: "may overlap", the safe answer
# (the caller then raises a CheckpointError rather than accepting a write it could not judge).
_MAX_ELEMENTS = 1 << 22


def _span(t: torch.Tensor) -> tuple[Union[int, torch.SymInt], Union[int, torch.SymInt]]:
    """The first and last element offset ``t`` reads in its storage (inclusive)."""
    lo = hi = t.storage_offset()
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if size > 1:
            if stride >= 0:
                hi += (size - 1) * stride
            else:
                lo += (size - 1) * stride
    return lo, hi


def _offsets(t: torch.Tensor) -> torch.Tensor:
    """Every element offset ``t`` reads in its storage, sorted (int64, on the CPU)."""
    off = torch.full((), t.storage_offset(), dtype=torch.int64)  # type: ignore[arg-type]  # a SymInt fills too
    for size, stride in zip(t.shape, t.stride(), strict=True):
        off = off.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    return off.reshape(-1).sort().values


def elements_apart(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True only when ``a`` and ``b`` (on one storage, same element size) provably share no element.

    Args:
        a, b: eager strided tensors viewing the same storage.

    Example:
        >>> g = torch.randn(2, 12)
        >>> r, z, n = torch.unsafe_split(g, 4, dim=1)
        >>> elements_apart(r, z), elements_apart(g, z)
        (True, False)
    """
    if a.numel() == 0 or b.numel() == 0:
        return True
    if a.element_size() != b.element_size() or a.layout is not torch.strided or b.layout is not torch.strided:
        return False
    (alo, ahi), (blo, bhi) = _span(a), _span(b)
    if ahi < blo or bhi < alo:
        return True
    if a.numel() > _MAX_ELEMENTS or b.numel() > _MAX_ELEMENTS:
        return False
    with torch.no_grad():
        oa, ob = _offsets(a), _offsets(b)
        found = torch.searchsorted(oa, ob).clamp_(max=oa.numel() - 1)
        return not bool((oa[found] == ob).any())
