"""Tensors from outside a region that backward depends on: unchanged since the forward, or an error.

Plain autograd keeps the tensors it saves and refuses a backward once one of them was modified in
place (its version moved). A region hands autograd slot handles instead, and its recompute reads
parameters again, so ``with torch.no_grad(): w.mul_(2)`` between forward and backward would
recompute with the new weight: a gradient that is neither the forward's nor an error. So at the end
of forward a region remembers the version of every outside tensor (parameter, buffer, closure)
backward can read:

- those autograd saved (the weight behind ``x @ w.t()``: plain autograd raises for these too), and
- those a recomputed op reads (the bias of a recomputed ``addmm``: plain autograd does not need
  it, but the recompute would read its new value),

and checks them before it recomputes. Versions live on autograd-level tensors. Eager: the tensor an
op read (a view of a parameter included) shares its base's version counter, so a detached alias of
it is kept (same storage: no memory). XLA: the dispatch mode sees tensors below functionalization,
which carry no version, so outside buffers are matched to the parameters and buffers of the
checkpointed module; and every view is a new buffer there, so what a replayed op reads through views
(a closure's ``c.view(...)``, a constant's ``lift_fresh``, a weight's ``t_copy``) is checked by its base
(``ViewRead``): by buffer alone, fn run again would read a closure's new value unchecked (a wrong gradient).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Protocol, TypeVar

import torch
from torch import nn

from xla_ckpt._base.compat import deref
from xla_ckpt._record.liveness import EXTERNAL, Dataflow
from xla_ckpt._record.record import CheckpointError, Record
from xla_ckpt._base.xla import buffer_key

__all__ = ["Outside", "Watch", "ViewRead", "owner_module", "by_buffer", "watch_outside", "check_read",
           "check_view_read", "constant", "namer", "OutsideRules"]

T = TypeVar("T")


@dataclass
class Outside:
    """One outside tensor backward depends on, with its version at the end of forward."""

    ref: Callable[[], Optional[torch.Tensor]]  # the version-carrying tensor (None once it is gone)
    version: int
    reader: str  # what reads it: "aten.addmm in module 'mlp.c_fc'", or "autograd (saved)"
    name: Callable[[], str]  # how to name it in an error (resolved only then)


def owner_module(fn: Any) -> Optional[nn.Module]:
    """The module a checkpointed callable belongs to: a module, a bound method of one, or
    ``partial(type(m).forward, m)`` as the wrappers call it."""
    if isinstance(fn, functools.partial):
        if fn.args and isinstance(fn.args[0], nn.Module):
            return fn.args[0]
        fn = fn.func
    if isinstance(fn, nn.Module):
        return fn
    owner = getattr(fn, "__self__", None)
    return owner if isinstance(owner, nn.Module) else None


def _named(module: Optional[nn.Module]) -> Iterable[tuple[str, str, torch.Tensor]]:
    if module is None:
        return ()
    return [*(("parameter", n, t) for n, t in module.named_parameters()),
            *(("buffer", n, t) for n, t in module.named_buffers())]


def by_buffer(module: Optional[nn.Module], pending: bool = False) -> dict[Any, tuple[str, str, torch.Tensor]]:
    """The module's parameters and buffers by buffer key (the first name of a tensor shared under two).

    ``pending`` (XLA): keyed by the buffer each tensor holds below functionalization now, before a write
    through one of its views reaches it (the key of the tensor itself brings it up to date first).
    """
    out: dict[Any, tuple[str, str, torch.Tensor]] = {}
    for kind, n, t in _named(module):
        u = torch._from_functional_tensor(t) if pending and torch._is_functional_tensor(t) else t
        out.setdefault(buffer_key(u), (kind, n, t))
    return out


def constant(value: T) -> Callable[[], T]:
    """A callable returning ``value``: a strong reference where a ``weakref.ref`` goes, a name known now."""
    return lambda: value


def namer(module: Optional[nn.Module], key: Any, t: torch.Tensor) -> Callable[[], str]:
    """Names ``t`` (by identity, or eager by storage) among the module's tensors, when an error needs it."""
    ref = weakref.ref(module) if module is not None else None
    shape = tuple(t.shape)

    def name() -> str:
        for kind, n, p in _named(ref() if ref is not None else None):
            if p is t or (not p.is_xla and buffer_key(p) == key):  # type: ignore[attr-defined]
                return f"{kind} '{n}'"
        return f"a tensor of shape {shape} from outside the checkpointed function"

    return name


@dataclass
class Watch:
    """What a region checks of the outside world before and while it replays (see the module docstring)."""

    versions: list[Outside] = field(default_factory=list)
    # Per replayed position, the outside tensors it reads directly (argument, buffer, the forward's tensor).
    reads: dict[int, tuple[tuple[int, Any, torch.Tensor], ...]] = field(default_factory=dict)
    # Slot index -> the forward's tensor, for outside tensors autograd saved: backward gets what the
    # forward read, as plain autograd does, not what the replay reads (a constant fn builds afresh).
    kept: dict[int, torch.Tensor] = field(default_factory=dict)
    # XLA, per replayed position, the outside tensors it reads through views (every view is a new
    # buffer there): (argument, the forward's base buffer, the base to compare with; see ``ViewRead``).
    views: dict[int, tuple[tuple[int, Any, "ViewRead"], ...]] = field(default_factory=dict)

    def add(self, o: Outside) -> None:
        """One more outside tensor backward depends on (the device's ``OutsideRules.versions`` finds them)."""
        self.versions.append(o)

    def check(self, fn_name: str) -> None:
        """Raise if an outside tensor backward depends on was modified in place since the forward."""
        for o in self.versions:
            t = deref(o.ref)
            if t is not None and t._version != o.version:
                raise CheckpointError(
                    f"{o.name()}, read by {o.reader} in the checkpointed function {fn_name}, was modified "
                    f"in place after the forward (version {o.version} -> {t._version}); the recomputation "
                    "would read its new value, and the gradient would be neither the forward's nor an error. "
                    "Modify it after backward (optimizer.step() after loss.backward()), or modify a copy. "
                    "Plain autograd raises the same error for the tensors it saves."
                )

    def refresh(self) -> None:
        """After a replay: fn's own writes to outside tensors (a norm's running statistics) are not the caller's."""
        for o in self.versions:
            t = deref(o.ref)
            if t is not None:
                o.version = t._version


class OutsideRules(Protocol):
    """How a device watches outside tensors (``eager.EagerOutside``, ``xla_steps.XlaOutside``)."""

    def read(self, t: torch.Tensor) -> torch.Tensor: ...

    def view(self, views: list, i: int, base_key: Any, flow: Dataflow, module: Optional[nn.Module]) -> None: ...

    def kept(self, early: torch.Tensor) -> Optional[torch.Tensor]: ...

    def versions(self, watch: Watch, needed: dict[Any, str], packed_at: dict[Any, int],
                 first: dict[Any, torch.Tensor], early: list[torch.Tensor], module: Optional[nn.Module]) -> None: ...


def watch_outside(flow: Dataflow, live: Optional[frozenset[int]], records: list[Record], early: list[torch.Tensor],
                  module: Optional[nn.Module], rules: "OutsideRules") -> Watch:
    """The outside tensors backward can read (``live``: positions the replay runs; None: all of them).

    Besides their versions, per replayed position the outside tensors it reads directly (not through
    a view): the replay checks it reads the same buffers, or equal values (``check_read``). That
    catches a tensor replaced after the forward, a constant fn builds from Python state
    (``torch.tensor(...)`` is a fresh tensor each call), and on XLA (where an in-place write makes a
    new buffer) a closure tensor no module owns. ``rules``: the device's (``EagerOutside``, ``XlaOutside``).
    """
    base = flow.outside_base
    watch = Watch()
    needed: dict[Any, str] = {}  # base buffer -> its first reader
    first: dict[Any, torch.Tensor] = {}  # base buffer -> the first tensor a replayed position read it as
    for p, at in flow.outside_at.items():
        if live is not None and p not in live:
            continue
        rec = records[p]
        direct: list[Any] = []
        views: list[Any] = []
        for i, k, t in at:
            needed.setdefault(base.get(k, k), f"{rec.op} in module '{rec.module}'")
            first.setdefault(base.get(k, k), t)
            if k not in base:
                direct.append((i, k, rules.read(t)))
            else:
                rules.view(views, i, base[k], flow, module)
        if direct:
            watch.reads[p] = tuple(direct)
        if views:
            watch.views[p] = tuple(views)
    packed_at: dict[Any, int] = {}
    for j, (d, k) in enumerate(zip(flow.packed, flow.packed_keys, strict=True)):
        if d != EXTERNAL:
            continue
        k = base.get(k, k)
        needed.setdefault(k, "autograd (it saved the tensor for backward)")
        packed_at.setdefault(k, j)
        kept = rules.kept(early[j])
        if kept is not None:
            watch.kept[j] = kept
    if needed:
        rules.versions(watch, needed, packed_at, first, early, module)
    return watch


@dataclass(frozen=True)
class ViewRead:
    """What an XLA replay's base of an outside view is checked against, when it is another buffer.

    A module's own tensor (a weight behind ``F.linear``'s ``t_copy``) is held weakly and may be the
    module's current tensor (XLA FSDP gathers the weight again for backward: another buffer, the same
    values; in-place writes are caught by its version); holding the forward's buffer would keep a
    full weight alive after FSDP frees it (pytorch/xla 3811). Any other base (a closure tensor, a
    constant fn builds with ``torch.tensor``) is the forward's tensor, compared by value.
    """

    owned: Optional[Callable[[], Optional[torch.Tensor]]] = None
    forward: Optional[torch.Tensor] = None

    def matches(self, key: Any, base: torch.Tensor) -> bool:
        if self.owned is not None:
            m = self.owned()
            return m is not None and buffer_key(m) == key
        return self.forward is not None and _same_values(base, self.forward)


def check_view_read(key: Any, base: torch.Tensor, expected: Any, read: ViewRead, op: Any, module: str,
                    pos: int) -> None:
    """The XLA replay of position ``pos`` reads, through views, outside tensor ``base`` (buffer ``key``)
    where the forward read buffer ``expected``."""
    if key == expected or read.matches(key, base):
        return
    raise _differs(base, op, module, pos)


def check_read(t: torch.Tensor, expected: Any, forward: torch.Tensor, op: Any, module: str, pos: int) -> None:
    """The replay of position ``pos`` reads outside tensor ``t`` where the forward read ``forward``.

    ``expected``: the buffer the forward read.
    """
    if buffer_key(t) == expected:
        return
    # Another tensor: fine if it holds the same values (a constant fn makes afresh each call).
    if _same_values(t, forward):
        return
    raise _differs(t, op, module, pos)


def _same_values(t: torch.Tensor, forward: torch.Tensor) -> bool:
    return t.shape == forward.shape and t.dtype == forward.dtype and bool(torch.equal(t, forward))


def _differs(t: torch.Tensor, op: Any, module: str, pos: int) -> CheckpointError:
    return CheckpointError(
        f"recomputation of {op} in module '{module}' (op #{pos}) reads a tensor of shape {tuple(t.shape)} from "
        "outside the checkpointed function whose values differ from the forward's: it was replaced or modified "
        "in place after the forward, or fn builds it from Python-side state that changed. The gradient would "
        "be neither the forward's nor an error; modify it after backward (optimizer.step() after "
        "loss.backward()) or modify a copy, and build constants in fn from values that do not change."
    )
