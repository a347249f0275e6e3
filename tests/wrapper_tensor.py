"""``Pair``: a wrapper tensor subclass for the tests, as DTensor and torchao's tensors are built.

A wrapper subclass (``_make_wrapper_subclass``) holds no memory of its own: its storage is a
placeholder whose ``data_ptr()`` raises, the data lives in the tensors it wraps (``__tensor_flatten__``).
``Pair`` wraps two tensors of one shape and runs every ATen op on both. ``to_pair`` / ``from_pair``
enter and leave it differentiably (as ``DTensor.from_local`` / ``to_local`` do), so a region can hold
wrapper tensors between plain inputs and outputs; the plain run and the checkpointed one compare as
plain tensors.

On XLA torch_xla's functionalization refuses wrapper subclasses without the library too (an
``INTERNAL ASSERT`` in ``FunctionalTensorWrapper``), so these are CPU (and CUDA) tests.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import return_and_correct_aliasing
from torch.utils._pytree import tree_map_only

__all__ = ["Pair", "to_pair", "from_pair", "parts"]


class Pair(torch.Tensor):
    """Two tensors ``a`` and ``b`` of one shape; each op runs on both."""

    a: torch.Tensor
    b: torch.Tensor

    @staticmethod
    def __new__(cls, a: torch.Tensor, b: torch.Tensor, requires_grad: bool = False) -> "Pair":
        assert a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined]
            cls, a.shape, strides=a.stride(), storage_offset=a.storage_offset(), dtype=a.dtype,
            device=a.device, layout=a.layout, requires_grad=requires_grad)

    def __init__(self, a: torch.Tensor, b: torch.Tensor, requires_grad: bool = False) -> None:
        self.a, self.b = a, b

    def __repr__(self) -> str:
        return f"Pair({self.a!r}, {self.b!r})"

    def __tensor_flatten__(self) -> tuple[list[str], Any]:
        return ["a", "b"], None

    @staticmethod
    def __tensor_unflatten__(inner: dict, ctx: Any, size: Any, stride: Any) -> "Pair":
        return Pair(inner["a"], inner["b"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out_a = func(*tree_map_only(Pair, lambda t: t.a, args), **tree_map_only(Pair, lambda t: t.a, kwargs))
        out_b = func(*tree_map_only(Pair, lambda t: t.b, args), **tree_map_only(Pair, lambda t: t.b, kwargs))
        if isinstance(out_a, torch.Tensor):
            out: Any = Pair(out_a, out_b)
        elif isinstance(out_a, (tuple, list)):
            out = type(out_a)(Pair(x, y) if isinstance(x, torch.Tensor) else x for x, y in zip(out_a, out_b, strict=True))
        else:
            out = out_a
        return return_and_correct_aliasing(func, args, kwargs, out)


class _ToPair(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> Pair:
        return Pair(x.clone(), x * 2.0)

    @staticmethod
    def backward(ctx: Any, g: Pair) -> torch.Tensor:
        return g.a + 2.0 * g.b


class _FromPair(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, p: Pair) -> torch.Tensor:
        return p.a + 0.5 * p.b

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Pair:
        return Pair(g, 0.5 * g)


def to_pair(x: torch.Tensor) -> Pair:
    """``Pair(x, 2x)``, differentiable in x."""
    return _ToPair.apply(x)


def from_pair(p: Pair) -> torch.Tensor:
    """``p.a + p.b / 2``, differentiable in p."""
    return _FromPair.apply(p)


def parts(t: Any) -> list[Any]:
    """The plain tensors behind ``t`` (a Pair's two; a plain tensor itself, None as None): what to compare."""
    if isinstance(t, Pair):
        return [t.a, t.b]
    return [t]
