"""The names ``xla_ckpt.tag`` gave to tensors, weakly: what the saved-tensor report shows beside a value."""

from __future__ import annotations

from typing import Optional

import torch
from torch.utils.weak import WeakTensorKeyDictionary

__all__ = ["remember", "tag_of"]

_TAGS = WeakTensorKeyDictionary()


def remember(x: torch.Tensor, name: str) -> None:
    """``x`` is called ``name`` from now on (until it is freed)."""
    _TAGS[x] = name


def tag_of(t: torch.Tensor) -> Optional[str]:
    """The tag of ``t`` or of the tensor it is a view of, else None."""
    name = _TAGS.get(t)
    if name is None and t._base is not None:
        name = _TAGS.get(t._base)
    return name
