"""One strategy per device, chosen once when a region starts: eager (CPU, CUDA) or XLA (lazy).

The engine's steps are the same on every device (decide each op in forward, keep what backward reads,
recompute the rest); how a step is done differs where the device does. Eager tensors carry versions
and views share storage; under torch_xla the forward's mode sees tensors below functionalization,
where an in-place op is a new value and every view a new buffer, the forward is recorded as a
program the recompute can run without ``fn`` (``direct.py``), and the recompute is fenced on the
incoming gradient. What only eager devices do is in ``eager.py`` (``EagerForward``, ``EagerRetain``,
``EagerOutside``, ``EagerBackward``); what only XLA does in ``forward_xla.py`` (``XlaForward``),
``xla_steps.py`` (``XlaRetain``, ``XlaOutside``, ``XlaBackward``), ``direct.py`` and ``program.py``; the
shared steps once (``forward.py``, ``retain.py``, ``outside.py``, ``recompute.py``, ``replay.py``). A
``Device`` bundles one class per step, and no engine function picks between two algorithms itself.
Offload's host tiers are chosen the same way (``offload.py``).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from xla_ckpt._base import xla as _xla
from xla_ckpt._engine.eager import EagerBackward, EagerForward, EagerOutside, EagerRetain
from xla_ckpt._engine.forward import Forward
from xla_ckpt._engine.forward_xla import XlaForward
from xla_ckpt._engine.xla_steps import XlaBackward, XlaOutside, XlaRetain
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.replay_state import devices

__all__ = ["Device", "EAGER", "XLA", "device_for"]


@dataclass(frozen=True)
class Device:
    """A device's algorithms for each engine step (classes are made once per region, rules are shared).

    Example:
        >>> dev = device_for(tensors((args, kwargs)))
        >>> dev.name
        'xla'
    """

    name: str
    forward: Callable[..., Forward]  # (state, policy, owner) -> the region's forward
    retain: Any  # what the end of forward keeps (``retain.EagerRetain`` / ``XlaRetain``)
    outside: Callable[[], Any]  # per region: how outside tensors are watched (``outside.py``)
    backward: "type[EagerBackward] | type[XlaBackward]"  # per region: how it recomputes (``recompute.py``)
    trace: Callable[[], contextlib.AbstractContextManager[Any]]  # around fn's forward

    def watch_grad(self, state: RegionState, outputs: list[torch.Tensor]) -> None:
        """Let the region's backward see the incoming gradient, where its device fences on it (XLA)."""
        if self.backward.fenced:
            for t in outputs:
                if t.requires_grad:
                    # Read grad_fn before registering: on XLA a view whose base fn wrote through another
                    # view gets its grad_fn rebuilt on first read, and ``Tensor.register_hook`` sets the
                    # hook dict before that read: a segfault in torch_xla 2.9 (plain ``register_hook`` on
                    # such a tensor crashes too; reading it first does not crash).
                    t.grad_fn  # noqa: B018
                    # Weakly: the hook lives as long as the output's graph node, which the caller may keep
                    # (e.g. the loss) after backward; the region, its inputs and its cache must not.
                    t.register_hook(functools.partial(_capture_grad, weakref.ref(state)))


def _capture_grad(ref: "weakref.ref[RegionState]", grad: torch.Tensor) -> None:
    state = ref()
    if state is not None:
        state.backward.capture_grad(grad)


EAGER = Device("eager", EagerForward, EagerRetain(), EagerOutside, EagerBackward, contextlib.nullcontext)
# torch_xla lowers einsum below dispatch modes: its composite runs, so policies see its bmm.
XLA = Device("xla", XlaForward, XlaRetain(), XlaOutside, XlaBackward, _xla.einsum_visible)


def device_for(inputs: list[torch.Tensor]) -> Device:
    """The strategy for a region whose tensor arguments are ``inputs``: XLA if any lives there."""
    return XLA if any(d.type == "xla" for d in devices(inputs)) else EAGER
