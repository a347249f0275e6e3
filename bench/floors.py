"""Dispatch modes that time the floor of a per-op engine (``bench/per_op.py``, ``bench/trace_split.py``).

- ``Empty``: only calls each op, the least any Python dispatch mode pays per op;
- ``CheckingFloor``: checks each op against a known program (the ops of the first call) and keys its
  outputs, the least a forward that reuses a region's recorded program pays;
- ``CheckingKept``: the same plus what the first law asks per op of any forward: each output's version and
  lazy identity (XLA), and the outputs of the matmuls ``megatron_selective`` keeps, detached.

Example::

    known: list = []
    with CheckingFloor(known):
        block(x)  # the first call records the program, later calls check against it
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xla_ckpt._base.xla import buffer_key

__all__ = ["Empty", "CheckingFloor", "CheckingKept"]


class Empty(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


class CheckingFloor(TorchDispatchMode):
    """Is this the known program's op, which recorded values are its tensor arguments; its outputs recorded
    as the next values. Nothing decided, nothing cached.

    Args:
        known: the program, ``(op, producers of its tensor arguments)`` per op; filled by the first call.
    """

    def __init__(self, known: list[Any]) -> None:
        super().__init__()
        self.known = known
        self.i = 0
        self.producer: dict[Any, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        producer = self.producer
        op = (func, tuple([producer.get(buffer_key(a), -1) for a in args if isinstance(a, torch.Tensor)]))
        if len(self.known) <= self.i:
            self.known.append(op)
        elif op != self.known[self.i]:
            raise RuntimeError(f"op {self.i} is {op}, the known program has {self.known[self.i]}")
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                producer[buffer_key(t)] = self.i
        self.i += 1
        return out


class CheckingKept(CheckingFloor):
    """``CheckingFloor`` plus each output's version (an in-place write after it is found), its lazy identity
    (a write outside the dispatcher is found; XLA only) and the kept matmuls' outputs, detached."""

    KEPT = frozenset({torch.ops.aten.mm, torch.ops.aten.addmm})

    def __init__(self, known: list[Any]) -> None:
        super().__init__(known)
        from xla_ckpt._base.xla_state import ir_identity  # noqa: PLC0415  (imports torch_xla)

        self.ident = ir_identity()
        self.versions: list[Any] = []
        self.idents: list[Any] = []
        self.kept: list[Any] = []
        self.busy = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if self.busy:  # the mode's own detach
            return func(*args, **(kwargs or {}))
        out = super().__torch_dispatch__(func, types, args, kwargs)
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.versions.append((weakref.ref(t), t._version))
                self.idents.append((t, self.ident(t)))
        if func.overloadpacket in self.KEPT:
            self.busy = True
            try:
                self.kept.append(out.detach())
            finally:
                self.busy = False
        return out
