"""Tensor subclasses that wrap other tensors (DTensor, torchao's NF4 and float8 tensors, TwoTensor).

The engine keys buffers by storage and rebuilds stand-ins from specs; a wrapper subclass has no storage
of its own (``_make_wrapper_subclass``), so both go through the tensors it wraps.
"""

from __future__ import annotations

from typing import Optional

import torch

__all__ = ["wrapped", "PLAIN"]

# Types that are never wrappers: callers test ``type(t) not in PLAIN`` inline before calling ``wrapped``
# (a Python call per tensor on the engine's hot path otherwise).
PLAIN = (torch.Tensor, torch.nn.Parameter)


def wrapped(t: torch.Tensor) -> Optional[list[torch.Tensor]]:
    """The tensors inside a wrapper subclass (DTensor, torchao's NF4 and float8 tensors), else None.

    A wrapper subclass (``_make_wrapper_subclass``) has no memory of its own: its storage is a
    placeholder whose ``data_ptr()`` raises. The memory, and so the buffer identity, is that of the
    tensors ``__tensor_flatten__`` names (DTensor: its local shard).
    """
    if type(t) in PLAIN or not hasattr(t, "__tensor_flatten__"):
        return None
    names, _ = t.__tensor_flatten__()
    # Not every name is a tensor: torch 2.15's DTensor flattens to its local tensor and its DeviceMesh.
    return [x for x in (getattr(t, name) for name in names) if isinstance(x, torch.Tensor)]
