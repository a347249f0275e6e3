"""The region's dispatch mode: the engine's per-op hot path.

Every op of ``fn`` (views included) passes through ``ForwardMode.__torch_dispatch__``. It does one pass
over the arguments (signature and tensors) before the op runs, one over the outputs after, and hands
both to ``Forward.on_op`` (``forward.py``), which records the position and decides the previous one.
Views and other ops the engine does not record go to the device's ``Forward.skipped``; a random op's
draw is recorded around it (``_record.replay_state.Draw``) so the recompute redraws the same values.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xla_ckpt._base import modules as _modules
from xla_ckpt._base.xla_state import lift
from xla_ckpt._engine.forward import Forward
from xla_ckpt._record.opcall import OpCall
from xla_ckpt._record.record import INFO, arg_scan, draws, op_info
from xla_ckpt._record.replay_state import Draw, draw_source

__all__ = ["ForwardMode"]


class ForwardMode(TorchDispatchMode):
    """Runs each op of the region's forward and reports it (see the module docstring)."""

    def __init__(self, forward: Forward) -> None:
        super().__init__()
        self.owner = forward  # what ``detach_unseen`` looks for
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

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        info = INFO.get(func) or op_info(func)  # inline lookup: this is the per-op path
        if self.busy:
            return func(*args, **kwargs)
        fw = self.owner
        if info.skipped:
            return fw.skipped(func, info, args, kwargs)
        # Before the op: an in-place op may change its arguments' shapes (x.unsqueeze_(0)), and the
        # replay takes the signature before the op too.
        sig, reads = arg_scan(args, kwargs)
        if info.writes:
            self.busy = True
            try:
                fw.before_writes(info, args, kwargs)
            finally:
                self.busy = False
        draw = None
        if info.random and draws(info, args, kwargs):  # SDPA at dropout_p=0: no draw
            # XLA too: the replay sets torch_xla's running seed back for the op (``_record/replay_state.py``).
            draw, out = Draw.record(draw_source(kwargs, args), lambda: func(*args, **kwargs), self.quiet)
        else:
            out = func(*args, **kwargs)
        self.busy = True
        try:
            names = _modules.local.names  # ``current_name()``, inline: this is the per-op path
            fw.on_op(OpCall(func, args, kwargs, out, names[-1] if names else ""), info, draw, sig, reads)
        finally:
            self.busy = False
        # A factory op (or a copy from the CPU) on XLA: fn must get the tensor torch_xla gives it
        # outside the mode, or its views read the wrong elements (see _base.xla_state). The record keeps
        # the tensor under the wrapper, the one later ops reach the mode with. (A plain tensor off
        # XLA, the common case, skips the call: the per-op budget of tests/unit/_engine/test_trace_cost.py.)
        return out if type(out) is torch.Tensor and not out.is_xla else lift(out, reads)  # type: ignore[attr-defined]
