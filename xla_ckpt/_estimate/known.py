"""Integer values the meta device knows exactly, so that a forward may read them (``.item()``, ``if t:``).

The meta device has shapes, not values, and reading a value raises. Some values are known without any
data: ``arange``, ``zeros``/``full`` of integers, the integer inputs a caller passed (their real values),
and whatever integer or boolean ops compute from those alone. transformers 5 reads exactly such a value
in every training call without a cache and without an ``attention_mask`` (what docs/huggingface.md
recommends): ``masking_utils.find_packed_sequence_indices`` derives packed-sequence boundaries from
``position_ids`` (``arange`` when not given) and branches on ``(mask[:, -1] == 0).all()``.

``KnownValues`` is a dispatch mode, entered only for the duration of one ``estimate``: for each op
whose output is a small integer/bool meta tensor and whose tensor inputs are all known, it runs the
same op on CPU copies and keeps the result beside the meta tensor; ``_local_scalar_dense`` of a known
meta tensor returns the real value. A value computed from anything unknown (hidden states, weights:
MoE routing, padding checks on real data) is never guessed: reading it still raises. Nothing global is
patched, so nothing leaks outside the call.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

__all__ = ["KnownValues"]

_MAX_NUMEL = 1 << 24  # shadows are CPU copies: bounded (position ids of a 64k sequence x batch 64 fit)
_aten = torch.ops.aten


def _small_exact(t: Any) -> bool:
    return (isinstance(t, torch.Tensor) and t.is_meta and not t.is_floating_point() and not t.is_complex()
            and t.numel() <= _MAX_NUMEL)


class KnownValues(TorchDispatchMode):
    """Mirror integer/bool meta ops on CPU where every input is known; answer value reads from the mirror.

    Example:
        >>> with KnownValues() as known:
        ...     pos = torch.arange(8, device="meta")
        ...     bool((pos.diff() == 1).all())   # True, instead of "cannot be called on meta tensors"
    """

    def __init__(self) -> None:
        super().__init__()
        self.shadow: WeakTensorKeyDictionary = WeakTensorKeyDictionary()

    def know(self, meta: torch.Tensor, real: torch.Tensor) -> None:
        """Record ``real``'s values (a caller's input) for its meta copy ``meta``."""
        if _small_exact(meta) and real.device.type != "meta":
            self.shadow[meta] = real.detach().to("cpu", copy=True)

    def _value(self, t: Any) -> Optional[torch.Tensor]:
        return self.shadow.get(t) if isinstance(t, torch.Tensor) and t.is_meta else None

    def _written_known(self, func: Any, args: tuple, kwargs: dict) -> bool:
        """Whether ``func`` writes into a tensor whose value is known (in place, ``out=``)."""
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = kwargs.get(arg.name, args[i] if i < len(args) else None)
            if any(self._value(t) is not None for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)):
                return True
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        kwargs = kwargs or {}
        if func is _aten._local_scalar_dense.default:
            known = self._value(args[0])
            if known is not None:
                return known.item()
        out = func(*args, **kwargs)
        flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        inputs_known = all(a.is_meta and self._value(a) is not None for a in flat_in)
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        if not inputs_known or not outs or not all(_small_exact(o) for o in outs):
            if func._schema.is_mutable and self._written_known(func, args, kwargs):
                # A known tensor (or a view of one) was written from unknown data: forget every value
                # (views share the write) rather than answer a stale one.
                self.shadow = WeakTensorKeyDictionary()
            return out
        cpu = torch.device("cpu")

        def to_cpu(a: Any) -> Any:
            if isinstance(a, torch.Tensor):
                return self._value(a)
            return cpu if isinstance(a, torch.device) and a.type == "meta" else a

        with _disable_current_modes():  # the mirror is invisible to the engine, the ledger and the flop counter
            real = func(*tree_map(to_cpu, args), **tree_map(to_cpu, kwargs))
        for o, r in zip(outs, [r for r in tree_flatten(real)[0] if isinstance(r, torch.Tensor)], strict=True):
            self.shadow[o] = r
        return out
