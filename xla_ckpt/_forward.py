"""Forward of a checkpoint region: the dispatch mode that sees each ATen op ``fn`` runs.

This is the engine's per-op hot path: every op of ``fn`` (views included) passes through
``_ForwardMode.__torch_dispatch__``. It does one pass over the arguments (signature and tensors)
before the op runs, one over the outputs after, and hands both to the region (``_engine._Region.on_op``),
which records the position and decides the previous one. Nothing here is per-region state.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xla_ckpt import _modules
from xla_ckpt._policy import OpCall
from xla_ckpt._record import arg_scan, op_info, written
from xla_ckpt._replay_state import Draw, draw_source
from xla_ckpt._xla_state import lift

if TYPE_CHECKING:
    from xla_ckpt._engine import _Region

__all__ = ["ForwardMode", "detach_unseen"]

# The dispatch-mode stack (torch._C, as torch.utils._python_dispatch uses it); absent: plain detach.
_stack_len = getattr(torch._C, "_len_torch_dispatch_stack", None)
_stack_at = getattr(torch._C, "_get_dispatch_stack_at", None)
_stack_pop = getattr(torch._C, "_pop_torch_dispatch_stack", None)
_stack_push = getattr(torch._C, "_push_on_torch_dispatch_stack", None)
_STACK_OK = None not in (_stack_len, _stack_at, _stack_pop, _stack_push)


def detach_unseen(t: torch.Tensor, region: Any) -> torch.Tensor:
    """``t.detach()`` that the region's own mode (forward or replay) does not see when it is innermost.

    The engine detaches every tensor autograd saves (``_Region.pack``) while its mode is active: each
    such detach would be one more trip through the Python mode (on XLA a ``detach_copy`` and a
    producer lookup) for an op that is not ``fn``'s. The mode is taken off the stack for the call, as
    torch does around a mode's own ``__torch_dispatch__``. Any other mode on top still sees it.
    """
    if _STACK_OK:
        n = _stack_len()
        if n:
            mode = _stack_at(n - 1)
            if getattr(mode, "region", None) is region:
                _stack_pop(None)
                try:
                    return t.detach()
                finally:
                    _stack_push(mode)
    return t.detach()


class ForwardMode(TorchDispatchMode):
    """Runs each op of the region's forward and reports it (see the module docstring)."""

    def __init__(self, region: "_Region") -> None:
        super().__init__()
        self.region = region
        # Factory ops (no tensor arguments) reach the mode with it still active, so the mode's own
        # bookkeeping ops (detach of saved outputs) would come back here: they are not fn's ops.
        self.busy = False

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Ops run here are the mode's own bookkeeping, not ``fn``'s."""
        self.busy = True
        try:
            yield
        finally:
            self.busy = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if kwargs is None:
            kwargs = {}
        info = op_info(func)
        if self.busy:
            return func(*args, **kwargs)
        region = self.region
        if info.skipped:
            if region.on_xla:
                if info.propagate:
                    region.on_xla_write(args[0])  # torch_xla's trace of an in-place op: args[0] is the old value
                    if region.recorder is not None:
                        region.recorder.refuse("fn writes in place")
                    return func(*args, **kwargs)
                out = func(*args, **kwargs)
                if region.flow is not None:
                    region.flow.alias(args, out)  # XLA views are new buffers: map them to their base
                if region.recorder is not None:
                    region.recorder.view(func, args, kwargs, out)
                return out
            return func(*args, **kwargs)
        # Before the op: an in-place op may change its arguments' shapes (x.unsqueeze_(0)), and the
        # replay takes the signature before the op too.
        sig, reads = arg_scan(args, kwargs)
        if info.mutable and not region.on_xla:
            self.busy = True
            try:
                region.before_write(written(info, args, kwargs))
            finally:
                self.busy = False
        draw = None
        if info.random and not region.on_xla:
            draw, out = Draw.record(draw_source(kwargs, args), lambda: func(*args, **kwargs), self.quiet)
        else:
            out = func(*args, **kwargs)
        self.busy = True
        try:
            region.on_op(OpCall(func, args, kwargs, out, _modules.current_name()), info, draw, sig, reads)
        finally:
            self.busy = False
        # A factory op (or a copy from the CPU) on XLA: fn must get the tensor torch_xla gives it
        # outside the mode, or its views read the wrong elements (see _xla_state). The record keeps
        # the tensor under the wrapper, the one later ops reach the mode with. (A plain tensor off
        # XLA, the common case, skips the call: the per-op budget of tests/test_trace_cost.py.)
        return out if type(out) is torch.Tensor and not out.is_xla else lift(out, reads)
