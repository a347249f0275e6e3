"""``CompiledOpCall``: an ``OpCall`` seen while Dynamo / AOTAutograd trace, with sizes from metadata."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
from torch.utils._pytree import tree_map

from xla_ckpt._record.opcall import OpCall

__all__ = ["CompiledOpCall", "skipped"]

aten = torch.ops.aten
_IGNORED = frozenset({aten.detach, aten.lift_fresh, aten.lift_fresh_copy, aten._unsafe_view})


def skipped(op: Any) -> bool:
    """Ops a policy is never asked about: views (``_unsafe_view`` included), detach and lift_fresh."""
    return isinstance(op, torch._ops.OpOverload) and (op.is_view or op.overloadpacket in _IGNORED)


@dataclass(frozen=True, eq=False)
class CompiledOpCall(OpCall):
    """An ``OpCall`` seen while tracing: ``nbytes`` / ``flops`` from metadata when ``out`` is None."""

    @cached_property
    def _sized_out(self) -> Any:
        if self.out is not None:
            return self.out
        return _meta_run(self.op, self.args, self.kwargs)


def _meta_run(op: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``op`` on meta copies of its tensor arguments, outside every mode: shapes only, no trace."""
    from torch.utils._python_dispatch import _disable_current_modes  # noqa: PLC0415

    def to_meta(t: Any) -> Any:
        if isinstance(t, torch.Tensor):
            return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
        return t

    try:
        with _disable_current_modes():
            margs, mkwargs = tree_map(to_meta, (args, kwargs))
            return op(*margs, **mkwargs)
    except Exception:  # no meta kernel, or symbolic shapes: unknown size
        return None
