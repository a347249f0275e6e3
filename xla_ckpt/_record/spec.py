"""Specs of op outputs and region inputs: what a stand-in needs to rebuild their structure.

A stand-in is an uninitialised tensor handed out where the replay needs a value's shape, never its
contents (a dead op's outputs, an input backward never reads, a pruned output). A wrapper subclass
(DTensor) gets a stand-in of its own type, built from stand-ins of the tensors it wraps.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from xla_ckpt._base.subclass import PLAIN, wrapped

__all__ = ["WrapperSpec", "spec_of", "stand_in", "spec_nbytes"]


class WrapperSpec(NamedTuple):
    """A wrapper subclass's spec (DTensor, torchao's tensors): its own, and its inner tensors' to rebuild it.

    The first four fields are a plain tensor's spec, so code reading ``spec[0]`` or ``spec[:3]`` reads
    the same; ``stand_in`` rebuilds the subclass (``__tensor_unflatten__``), not a plain tensor: fn's
    Python sees the type it saw in forward (``isinstance(h, DTensor)``, ``h.to_local()``).
    """

    shape: torch.Size
    stride: tuple
    dtype: torch.dtype
    device: torch.device
    cls: type
    ctx: Any
    inner: tuple  # (name, spec) per flattened attribute (``_Kept`` for one that is no tensor)


class _Kept(NamedTuple):
    """A wrapper's flattened attribute that is no tensor, kept as it is in its spec."""

    value: Any


def spec_of(out: Any) -> Any:
    """What :func:`stand_in` needs to rebuild ``out``'s structure; None when it is not all tensors."""
    if isinstance(out, torch.Tensor):
        inner = wrapped(out) if type(out) not in PLAIN else None
        if inner is not None:
            names, ctx = out.__tensor_flatten__()  # type: ignore[attr-defined]  # a wrapper subclass's protocol
            parts = [(n, getattr(out, n)) for n in names]  # a non-tensor (DTensor's mesh) goes back as it is
            return WrapperSpec(out.shape, out.stride(), out.dtype, out.device, type(out), ctx,
                               tuple((n, spec_of(v) if isinstance(v, torch.Tensor) else _Kept(v)) for n, v in parts))
        return (out.shape, out.stride(), out.dtype, out.device)
    if isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out):
        return tuple(spec_of(t) for t in out)
    return None


def stand_in(spec: Any) -> Any:
    """Uninitialised tensors shaped like a dead op's outputs: nothing reads them (the replay checks)."""
    if isinstance(spec, WrapperSpec):
        inner = {n: s.value if isinstance(s, _Kept) else stand_in(s) for n, s in spec.inner}
        return spec.cls.__tensor_unflatten__(  # type: ignore[attr-defined]  # a wrapper subclass's protocol
            inner, spec.ctx, spec.shape, spec.stride)
    if isinstance(spec[0], torch.Size):
        shape, stride, dtype, device = spec
        return torch.empty_strided(shape, stride, dtype=dtype, device=device)
    return tuple(stand_in(s) for s in spec)


def spec_nbytes(spec: Any) -> int:
    """Bytes of the memory a single tensor's spec stands for (a wrapper subclass: its inner tensors')."""
    if isinstance(spec, WrapperSpec):
        return sum(spec_nbytes(s) for _, s in spec.inner if not isinstance(s, _Kept))
    shape, _, dtype, _ = spec
    return math.prod(shape) * dtype.itemsize
