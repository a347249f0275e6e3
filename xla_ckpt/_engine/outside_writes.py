"""Writes outside a region that its replay repeats: running statistics and counters, written once per step.

The recompute (``_engine.recompute``) runs ``fn`` again inside ``outside_writes``, which starts each
written tensor from its value before the forward's first write and leaves it as the replay found it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Collection, Iterator, Optional

import torch

from xla_ckpt._base import compat as _compat
from xla_ckpt._base import xla_state
from xla_ckpt._base.errors import CheckpointError

__all__ = ["outside_writes"]


@contextlib.contextmanager
def outside_writes(written: dict[Any, tuple[Optional[torch.Tensor], torch.Tensor]], name: str,
                   kept: Collection[Any] = ()) -> Iterator[None]:
    """The replay writes outside tensors (running statistics, counters) as the forward did: it starts
    from their values before the forward's first write, and they end as the replay found them.
    ``kept``: buffers the region keeps, which these writes must leave as they are (``xla_state.assign``).

    So fn reads in the replay what it read in the forward (a cumulative average reads the count it
    just advanced), and a buffer is written once per step as without the library. The versions are
    put back too: the writes are the library's, not the caller's (autograd checks the saved ones).
    """
    if any(t is None for t, _ in written.values()):
        raise CheckpointError(
            f"{name} writes in place to a tensor from outside it that its module does not own (a closure or "
            "another module's buffer) on XLA; the recomputation would write it a second time. Register it as a "
            "buffer of the checkpointed module, pass it as an argument, or write it outside the checkpoint."
        )
    present = [(t, before) for t, before in written.values() if t is not None]  # all of them (checked above)
    with contextlib.ExitStack() as stack:
        now: list[tuple[torch.Tensor, torch.Tensor]] = []
        # Only these writes run without the caller's modes and grad: fn's replay itself runs in them
        # (a FlopCounterMode around backward counts the replayed ops whether or not fn writes a buffer).
        with _compat.without_callers_modes(), torch.no_grad():
            for t, before in present:
                if t.is_xla and not torch._is_functional_tensor(before):  # type: ignore[attr-defined]
                    before = torch._to_functional_tensor(before)  # XLA: the buffer below functionalization
                stack.enter_context(_compat.preserve_version(t))
                now.append((t, t.clone()))
                xla_state.assign(t, before, kept)
        stack.callback(_put_back, now, kept)
        yield


def _put_back(now: list[tuple[torch.Tensor, torch.Tensor]], kept: Collection[Any]) -> None:
    with _compat.without_callers_modes(), torch.no_grad():
        for t, value in now:
            xla_state.assign(t, value, kept)
