"""Recognise a saved tensor that is a parameter or a copy derived from one, and how to re-derive it.

Autograd tells us: a transposed / permuted / viewed / cast copy of a parameter has a grad_fn chain
of single-input view or cast nodes ending at the parameter's ``AccumulateGrad``. This holds on every
device; on XLA it is the only way, since ``t_copy`` gives the copy its own buffer and no shared storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import nn

from xla_ckpt._base import xla as _xla

__all__ = ["ParamSource", "param_source"]

Step = Callable[[torch.Tensor], torch.Tensor]


def _out_meta(node: Any) -> Any:
    """Metadata (shape, dtype) of the forward output of ``node``."""
    return node._input_metadata[0]


def _step_t(node: Any) -> Step:
    return torch.Tensor.t


def _step_transpose(node: Any) -> Step:
    d0, d1 = int(node._saved_dim0), int(node._saved_dim1)
    return lambda x: x.transpose(d0, d1)


def _step_permute(node: Any) -> Step:
    dims = tuple(int(d) for d in node._saved_dims)
    return lambda x: x.permute(dims)


def _step_to(node: Any) -> Step:
    dtype = _out_meta(node).dtype
    return lambda x: x.to(dtype)


def _step_reshape(node: Any) -> Step:
    shape = tuple(_out_meta(node).shape)
    return lambda x: x.reshape(shape)


def _step_expand(node: Any) -> Step:
    shape = tuple(_out_meta(node).shape)
    return lambda x: x.expand(shape)


def _step_alias(node: Any) -> Step:
    return lambda x: x


# Node type name -> how to replay it. Only shape/dtype-only derivations: never anything that reads
# other tensors, so re-deriving from the parameter needs nothing but the parameter.
_STEPS: dict[str, Callable[[Any], Step]] = {
    "TBackward0": _step_t,
    "TransposeBackward0": _step_transpose,
    "PermuteBackward0": _step_permute,
    "ToCopyBackward0": _step_to,
    "ViewBackward0": _step_reshape,
    "UnsafeViewBackward0": _step_reshape,
    "ReshapeAliasBackward0": _step_reshape,
    "ExpandBackward0": _step_expand,
    "AliasBackward0": _step_alias,
}


@dataclass(frozen=True)
class ParamSource:
    """``param`` and the ops (applied in order) that turn it into the saved tensor; none for the param."""

    param: nn.Parameter
    steps: tuple[Step, ...]

    def derive(self) -> torch.Tensor:
        x: torch.Tensor = self.param
        for step in self.steps:
            x = step(x)
        return x


def param_source(t: torch.Tensor) -> Optional[ParamSource]:
    """How ``t`` derives from a parameter, or None when it is not (only) a parameter's copy."""
    if isinstance(t, nn.Parameter):
        return ParamSource(t, ())
    steps: list[Step] = []
    node = t.grad_fn
    while node is not None:
        name = type(node).__name__
        if name == "AccumulateGrad":
            var = node.variable  # type: ignore[attr-defined]  # AccumulateGrad's leaf: not in the Node stub
            return ParamSource(var, tuple(reversed(steps))) if isinstance(var, nn.Parameter) and steps else None
        make = _STEPS.get(name)
        if make is None:
            return None
        steps.append(make(node))
        nexts = [f for f, _ in node.next_functions if f is not None]
        if len(nexts) != 1:
            return None
        node = nexts[0]
    # A frozen parameter has no grad_fn; on eager its views still name it as their base.
    base = t._base
    if isinstance(base, nn.Parameter) and not _xla.is_xla(t):
        size, stride, offset = tuple(t.shape), tuple(t.stride()), t.storage_offset()
        return ParamSource(base, (lambda x: x.as_strided(size, stride, offset),))
    return None
