"""Backward's device strategies: what a region's recompute starts from and fences on, per device.

One is chosen when a region starts (``_engine.device``), so no recompute function picks between eager
and XLA behind a flag: eager runs ``fn`` again from the region's inputs, XLA runs the
recorded program (``_engine.direct``) or ``fn`` again, fenced on the incoming gradient.
"""

from __future__ import annotations

import contextlib
from typing import Any, Collection, Optional

import torch

from xla_ckpt._base import xla as _xla
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.record import tensors
from xla_ckpt._record.replay_state import Fence

__all__ = ["EagerBackward", "XlaBackward"]


class EagerBackward:
    """Eager devices' backward: ``fn`` runs again under the replay mode, from the region's inputs."""

    program: Any = None  # no recorded program: the general replay

    def fence(self) -> Optional[Fence]:
        return None

    def start(self, base: torch.Tensor) -> torch.Tensor:
        """An input's value before fn's first write to it, as the replay starts from it."""
        return base

    def visible(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def capture_grad(self, grad: torch.Tensor) -> None:
        pass

    def settle(self, program: Any) -> None:
        assert program is None  # only XLA records a program

    def kept(self, region: RegionState) -> Collection[Any]:
        """None: eager ``copy_`` writes the buffer itself, which no kept value of the region is."""
        return ()


class XlaBackward:
    """XLA's backward, one per region: its recorded program (``_engine.direct``) or ``fn`` again, fenced on
    the incoming gradient, so the compiler can neither merge the recompute with its forward twin (CSE)
    nor schedule it before the gradient exists (``_record.replay_state.Fence``)."""

    def __init__(self) -> None:
        self.program: Any = None  # set once when the forward ends (``settle``)
        self.grad: Optional[torch.Tensor] = None  # the incoming gradient, when it arrives

    def settle(self, program: Any) -> None:
        """The forward ended: the program the recompute runs (None: the general replay)."""
        self.program = program

    def capture_grad(self, grad: torch.Tensor) -> None:
        if self.grad is None and grad is not None and grad.numel() > 0:
            self.grad = grad.detach()

    def fence(self) -> Optional[Fence]:
        return Fence(self.grad) if self.grad is not None else None

    def start(self, base: torch.Tensor) -> torch.Tensor:
        # The copy taken before the write is below functionalization: fn's ops need the wrapper.
        return base if torch._is_functional_tensor(base) else torch._to_functional_tensor(base)

    def visible(self) -> contextlib.AbstractContextManager[Any]:
        return _xla.einsum_visible()  # the replay sees einsum's bmm, as the forward did

    def kept(self, region: RegionState) -> Collection[Any]:
        """The buffers of the outputs the region keeps, which putting a buffer back must not write
        (``xla_state.assign``)."""
        return {_xla.buffer_key(t) for out, _ in region.cache.values() for t in tensors(out)}
