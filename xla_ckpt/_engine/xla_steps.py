"""What only XLA does at the forward's end and in backward: the XLA algorithm of each engine step.

Chosen once per region (``device.py``); the forward's own XLA steps are ``forward_xla.XlaForward``, the
recorded program ``direct.py`` and ``program.py``. XLA's compiler drops what nothing reads, so outputs are
kept or dropped whole (``XlaRetain``); the mode sees tensors below functionalization, which carry no
versions, so outside tensors are matched to the checkpointed module's parameters and buffers
(``XlaOutside``); and the recompute is fenced on the incoming gradient (``XlaBackward``).
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Collection, Optional

import torch
from torch import nn

from xla_ckpt._base import xla as _xla
from xla_ckpt._engine.outside import Outside, ViewRead, Watch, by_buffer, constant, namer
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.liveness import INPUT, Dataflow
from xla_ckpt._record.record import tensors
from xla_ckpt._record.replay_state import Fence
from xla_ckpt._record.spec import spec_of

__all__ = ["XlaRetain", "XlaOutside", "XlaBackward"]


class XlaRetain:
    """XLA: the compiler drops what nothing reads, so outputs are kept or dropped whole; a dropped random
    op becomes a dead position (see the comment above ``_undrawn``)."""

    prunes = False

    def demoted_spec(self, region: RegionState, pos: int) -> Any:
        # Only a random op's: the replay hands out a stand-in for it instead of drawing again.
        return spec_of(region.cache[pos][0]) if region.records[pos].info.random else None

    def refine(self, region: RegionState, flow: Dataflow, early: list[torch.Tensor], saved: set[int], lv: Any) -> Any:
        return lv

    def droppable(self, region: RegionState, pos: int) -> bool:
        return _undrawn(region, pos)

    def finish(self, region: RegionState, flow: Dataflow, lv: Any) -> None:
        _dead_after_undrawn(region, flow, lv)


# XLA: a random op the policy keeps but backward never reads is dropped like any other output, and
# becomes a dead position (recomputed ones redraw from the forward's seed, ``_record.replay_state.Draw``): the
# general replay hands out a stand-in for it instead of running it, which would draw once more from
# torch_xla's seed. The draw itself is traced, never executed, and changes no value or gradient, but
# every later random op of the step (another micro-batch's dropout) would draw other numbers than
# without the library (after backward the seed would be one update, ``s * 214013 + 2531011``, further).
# The recomputed ops after it that read it are dead too (nothing backward reads depends on them):
# on XLA they still run lazily (XLA drops what nothing reads), their outputs marked as stand-ins, so a
# live op or a saved tensor reading one is an error, never a value.
def _undrawn(region: RegionState, pos: int) -> bool:
    """XLA: whether cached position ``pos`` may be dropped (a random op's only with a stand-in's spec)."""
    rec = region.records[pos]
    return not rec.info.random or spec_of(region.cache[pos][0]) is not None


def _dead_after_undrawn(region: RegionState, flow: Dataflow, lv: Any) -> None:
    """XLA: the recomputed positions that read a dropped random op's output or an input the region lets
    go (through others) are dead: the general replay runs them on stand-ins, and what they make is a
    stand-in too (``ReplayMode.garbage``), which a live op or autograd must never read.

    So is a recomputed random op nothing backward needs: the general replay runs it from its forward
    state without checking where its draw ends (a draw whose count depends on its inputs, the rejection
    sampling of ``_standard_gamma`` on torch's CPU generator, reads stand-ins of the inputs the region
    let go).
    """
    records = region.records
    for p, rec in enumerate(records):
        if rec.live and rec.draw is not None and p not in lv.live and p not in lv.cached:
            region.dead(p)
    dead = {p for p, rec in enumerate(records) if not rec.live}  # dropped or unneeded random ops
    if not flow.shared_inputs:  # inputs that share a buffer are all kept (``keep_only_live``)
        dead.update(INPUT - i for i, t in enumerate(region.inputs) if t is not None and i not in lv.inputs)
    if not dead:
        return
    for p in range(max(min(dead) + 1, 0), len(records)):
        if records[p].live and p not in lv.live and p not in lv.cached and not dead.isdisjoint(flow.deps[p]):
            region.dead(p)
            dead.add(p)


class XlaOutside:
    """XLA: the mode sees tensors below functionalization (no versions; every view a new buffer), so
    outside buffers are matched to the checkpointed module's parameters and buffers. One per region:
    it looks the module's tensors up once, when first needed."""

    def __init__(self) -> None:
        self._owned: Optional[dict[Any, tuple[str, str, torch.Tensor]]] = None

    def _by_buffer(self, module: Optional[nn.Module]) -> dict[Any, tuple[str, str, torch.Tensor]]:
        if self._owned is None:
            self._owned = by_buffer(module)
        return self._owned

    def read(self, t: torch.Tensor) -> torch.Tensor:
        return t  # the tensor below functionalization (the parameter's buffer until someone writes to it)

    def view(self, views: list, i: int, base_key: Any, flow: Dataflow, module: Optional[nn.Module]) -> None:
        # Through views (a parameter's t_copy, a constant's lift_fresh, ``c.view(...)``): the replay's
        # views are new buffers, so it is their base that must be the forward's.
        m = self._by_buffer(module).get(base_key)
        views.append((i, base_key, ViewRead(owned=weakref.ref(m[2])) if m is not None
                      else ViewRead(forward=flow.outside_tensor.get(base_key))))

    def kept(self, early: torch.Tensor) -> Optional[torch.Tensor]:
        # Not a view: a view's own buffer (a parameter's t_copy) is what pytorch/xla 3811 warns of.
        return early.detach() if early._base is None else None

    def versions(self, watch: Watch, needed: dict[Any, str], packed_at: dict[Any, int],
                 first: dict[Any, torch.Tensor], early: list[torch.Tensor], module: Optional[nn.Module]) -> None:
        # Versions only above functionalization: the module's own tensors, matched by buffer.
        for k, (kind, n, t) in self._by_buffer(module).items():
            if k in needed:
                watch.add(Outside(weakref.ref(t), t._version, needed.pop(k), constant(f"{kind} '{n}'")))
        # Outside tensors autograd saved: the saved tensor (or the tensor it is a view of) is above
        # functionalization. Weakly: a strong reference would keep a t_copy's buffer (pytorch/xla 3811).
        for k, j in packed_at.items():
            if k in needed:
                base = early[j]._base
                t = base if base is not None else early[j]
                watch.add(Outside(weakref.ref(t), t._version, needed.pop(k), namer(module, k, t)))


class XlaBackward:
    """XLA's backward, one per region: its recorded program (``_engine.direct``) or ``fn`` again, fenced on
    the incoming gradient, so the compiler can neither merge the recompute with its forward twin (CSE)
    nor schedule it before the gradient exists (``_record.replay_state.Fence``)."""

    fenced = True  # the recompute is fenced on the incoming gradient (``Device.watch_grad`` captures it)

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
