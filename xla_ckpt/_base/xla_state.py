"""torch_xla state kept outside the dispatcher, which a dispatch mode or a recorded ATen program cannot see.

Three kinds matter to a region: the functionalization wrapper that gives an XLA tensor's views their
meaning (a dispatch mode's factory ops come back without it), the sharding that ``xs.mark_sharding``
attaches to a value (a recorded program that recomputes the value drops it), and a new
lazy value that a torch_xla call gives a tensor in place (``xm.all_reduce``'s list form: the recorded
program recomputes the value from before it).
torch_xla is imported lazily: through ``_base.xla``, and ``torch_xla.runtime`` inside :func:`spmd`.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Callable, Collection, Hashable, Optional

import torch

from xla_ckpt._base import xla as _xla

__all__ = ["lift", "made_above_functionalization", "functional", "assign", "spmd", "sharding_of", "is_manual",
           "annotate", "ir_identity", "ir_root", "KEEPS_VALUE"]


# --------------------------------------------------------------------------- functionalization

# torch_xla gives views their meaning through functionalization: a plain XLA tensor reports
# contiguous strides whatever view made it, so a view of a view taken on one outside
# functionalization reads the wrong elements (``arange(24).reshape(3, 2, 4).permute(2, 1, 0)[1]``
# returns rows of the unpermuted tensor). Outside any dispatch mode torch_xla wraps each new
# tensor in a functional wrapper itself (``bridge::AtenFromXlaTensor``), unless the Functionalize key
# is excluded; inside a ``TorchDispatchMode`` it always is (the Python fallback excludes every key
# above Python), so an op that reached the mode without passing through functionalization (a
# factory op: ``arange``, ``zeros``, ``full``, ``eye``, ``rand``; a copy from the CPU) returns a
# plain tensor, and every view of it in ``fn`` is then wrong. The region's modes wrap such outputs
# as torch_xla would have.


def made_above_functionalization(reads: list[torch.Tensor]) -> bool:
    """True when an op that reached a dispatch mode with these tensor arguments, on an XLA region,
    did not pass through functionalization: none of them is an XLA tensor (functionalization hands
    the mode the XLA tensors under its wrappers; an op without one never met it)."""
    for t in reads:
        if t.is_xla:  # type: ignore[attr-defined]
            return False
    return True


def lift(out: Any, reads: list[torch.Tensor]) -> Any:
    """``out`` of an op a region's mode ran, as ``fn`` must get it: a plain XLA tensor made without
    passing through functionalization (no XLA tensor among ``reads``, its tensor arguments) wrapped
    as torch_xla wraps it outside any mode. Any region: one whose inputs are on the CPU may make XLA
    tensors too. Cost on the per-op path: one device check per output, then one per argument."""
    if isinstance(out, torch.Tensor):
        return _wrap(out) if made_above_functionalization(reads) else out
    if isinstance(out, (tuple, list)) and any(
            isinstance(t, torch.Tensor) and t.is_xla for t in out  # type: ignore[attr-defined]
    ) and made_above_functionalization(reads):
        return functional(out)
    return out


def functional(out: Any) -> Any:
    """``out`` with each plain XLA tensor wrapped for functionalization (as torch_xla wraps new tensors)."""
    if isinstance(out, torch.Tensor):
        return _wrap(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_wrap(t) if isinstance(t, torch.Tensor) else t for t in out)
    return out


def _wrap(t: torch.Tensor) -> torch.Tensor:
    if t.is_xla and not torch._is_functional_tensor(t):  # type: ignore[attr-defined]
        return torch._to_functional_tensor(t)
    return t


def _computed(value: torch.Tensor) -> torch.Tensor:
    """``value`` as an op's result, never a bare device buffer (any dtype)."""
    return torch.where(torch.ones((), dtype=torch.bool, device=value.device), value, value)


def assign(t: torch.Tensor, value: torch.Tensor, kept: Collection[Hashable] = ()) -> None:
    """``t.copy_(value)`` (grad mode off; ``t`` resized to ``value``'s shape first), leaving the XLA
    tensor under ``t``'s wrapper as it was when its buffer is among ``kept`` (buffer keys others hold).

    torch_xla's ``copy_`` on a functional tensor writes into the XLA tensor below the wrapper, where
    an in-place op gives the wrapper a new one. A region may keep that XLA tensor as an op's output (a
    BatchNorm counter's ``add_(1)``, traced as ``add``, whose output the policy saves): the copy
    overwrote the kept value, and the replay read the counter as 0 (ZeroDivisionError in backward).
    A ``zero_`` first moves the wrapper to a new XLA tensor, which the copy then fills. Only then: a
    plain ``copy_`` keeps the XLA tensor ``t`` holds, so a replayed op that reads ``t`` matches the
    forward's read by buffer (``_engine.outside.check_read``) instead of comparing values on the device.
    On XLA the copy is of a computed value: ``copy_`` from a bare device buffer (the value before the
    forward) makes the XLA tensor under ``t`` that buffer, and the step's graph then donates it to the
    buffer's new value (``XLA_ENABLE_PARAM_ALIASING``). A deep copy of a model shares its buffers with
    the original until they are written: the original's buffer was deleted (the module zoo's probe).
    """
    if kept and t.is_xla and torch._is_functional_tensor(t) and (  # type: ignore[attr-defined]
            _xla.buffer_key(torch._from_functional_tensor(t)) in kept):
        t.zero_()
    if t.shape != value.shape:
        # fn resized it (an observer's ``empty(0)`` buffer, ``resize_``d at its first call: torch.ao's
        # per-channel QAT observers): the replay must find the shape it started from, and backward the
        # one it ended with.
        t.resize_(value.shape)
    t.copy_(_computed(value) if t.is_xla else value)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- sharding

# ``xs.mark_sharding`` is no ATen op: it attaches an ``OpSharding`` to the XLA tensor itself
# (``_XLAC._xla_mark_sharding``), so a dispatch mode never sees it and a recorded ATen program that
# recomputes the tensor drops it. The SPMD partitioner would then recompute an annotated activation
# replicated (f32[256,4096] per device instead of f32[256,1024], 1.66x the peak of no checkpointing).
# ATen ops never set one on their outputs: a sharding on a recorded op's output comes from a call
# outside the dispatcher, and the replay carries it (``_engine.direct``).


def spmd() -> bool:
    """True when torch_xla runs in SPMD mode (``xr.use_spmd()``); never imports torch_xla itself."""
    if "torch_xla" not in sys.modules:
        return False
    import torch_xla.runtime as xr  # noqa: PLC0415

    return bool(xr.is_spmd())


def sharding_of(t: torch.Tensor) -> Optional[Any]:
    """The ``OpSharding`` attached to XLA tensor ``t`` (``xs.mark_sharding``), or None."""
    xlac = _xla._xlac()
    if not t.is_xla or not xlac._get_xla_sharding_spec(t):  # type: ignore[attr-defined]
        return None
    return xlac._get_xla_op_sharding(t)


_MANUAL = 4  # torch_xla.distributed.spmd.ShardingType.MANUAL


def is_manual(t: torch.Tensor) -> bool:
    """True when ``t``'s sharding is MANUAL (``xs.enable_manual_sharding``): not one ``mark_sharding`` re-attaches."""
    return t.is_xla and _xla._xlac()._get_xla_sharding_type(t) == _MANUAL  # type: ignore[attr-defined]


def annotate(t: torch.Tensor, sharding: Any) -> None:
    """Attach ``sharding`` to ``t`` as ``xs.mark_sharding`` does (a custom-sharding node on a computed value)."""
    _xla._xlac()._xla_mark_sharding(t, sharding)


# ------------------------------------------------------------------ writes that bypass the dispatcher

# Root IR nodes that change a lazy tensor's IR outside the dispatcher and keep its value: the
# annotations torch_xla attaches in place (``xs.mark_sharding``) and the barrier (``optimization_barrier_``,
# the engine's own fence included). Anything else (``xm.all_reduce(..., [t])``'s ``cross_replica_sum``)
# gives the tensor another value that no ATen op made.
# A sync that ran it leaves device data (``xla::device_data``, or no IR at all): the value it had.
KEEPS_VALUE = frozenset({"xla::custom_sharding", "xla::optimization_barrier", "xla::device_data"})


def ir_identity() -> Callable[[torch.Tensor], Any]:
    """The function telling what a tensor's lazy value is now (its IR node and output, or its device
    data): cheap (about 0.4 us), no execution. Returned itself, to be called per op without a wrapper.

    Any op through the dispatcher makes a new XLA tensor; a change under the same tensor is a write
    that bypassed it (a collective on a list, a sharding annotation, a barrier, a sync that ran it).

    Example:
        >>> ident = ir_identity()
        >>> before = ident(t); xm.all_reduce(xm.REDUCE_SUM, [t]); ident(t) != before  # on a pod
        True
    """
    return _xla._xlac()._unique_id_for_ir_and_data


def ir_root(t: torch.Tensor) -> Optional[str]:
    """The name of the IR node ``t``'s value comes from now (``"xla::cross_replica_sum"``), None when it
    is device data (a sync ran it); read from torch_xla's debug text, so only where a change was seen."""
    for line in _xla._xlac()._get_xla_tensor_debug_info(t).splitlines():
        line = line.strip()
        if line.startswith("IR:"):
            if line[3:].strip() == "None":
                return None
            # "IR: [] xla::cross_replica_sum, num_outputs=2, ...": the node's name after its location
            found = _NODE.search(line)
            return found.group(0) if found else line[3:].strip()
    return "an unknown node"


_NODE = re.compile(r"\b(?:xla|aten|prim)::[\w.]+")
