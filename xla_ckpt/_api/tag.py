"""``tag(x, name)``: name a value by meaning, for name-based policies and for the saved-tensor report."""

from __future__ import annotations

import torch

from xla_ckpt._base import compat as _compat
from xla_ckpt._hooks import saved as _saved
from xla_ckpt._hooks.tags import remember
from xla_ckpt._compile.lowering import TAG_KEY

__all__ = ["tag"]


def tag(x: torch.Tensor, name: str) -> torch.Tensor:
    """Identity that names ``x`` (like JAX's ``checkpoint_name``); returns ``x`` itself, no copy.

    Inside :func:`xla_ckpt.checkpoint` the op that produced ``x`` carries ``name`` as
    ``OpCall.tag``, so ``policies.save_only_these_names("qkv")`` can keep it. The
    ``saved_activations()`` report shows the name.

    Args:
        x: the tensor to name.
        name: a non-empty string.

    Example:
        >>> qkv = xla_ckpt.tag(self.qkv(x), "qkv")
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"xla_ckpt.tag: name must be a non-empty str, got {name!r}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"xla_ckpt.tag: expected a Tensor to tag {name!r}, got {type(x).__name__}")
    if _compat.is_compiling():
        return _compiled_tag(x, name)
    remember(x, name)
    region = _saved.state.region  # a checkpoint region whose forward is running on this thread
    if region is not None:
        region.on_tag(x, name)
    return x


def _compiled_tag(x: torch.Tensor, name: str) -> torch.Tensor:
    # Under torch.compile a tag must never break the graph (a weak-key dict write would). With
    # torch >= 2.13 the name rides on an annotated alias the selective-checkpoint lowering sees
    # (xla_ckpt._compile.marks); older torch cannot carry it, which the lowering says once.
    if _compat.HAS_ANNOTATE and _compat.SAC_GIVES_OP_OUTPUT:
        with _compat.annotate({TAG_KEY: name}):
            return torch.ops.aten.alias.default(x)
    return x
