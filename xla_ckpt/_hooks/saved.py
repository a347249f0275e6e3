"""ONE saved-tensor hook pair that composes every feature: the ledger, weights by reference, checkpoint.

``torch.autograd.graph.saved_tensors_hooks`` applies only the innermost pair, so features do not
install pairs of their own: each one switches itself on in a thread-local state that this single
``_pack`` / ``_unpack`` pair reads. Every feature enters the same pair, so nesting them in any order
works, and leaving a ``with`` block (normally or by an exception) switches exactly that feature off.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Collection, Iterator, Optional, Protocol

import torch
import torch.utils.checkpoint

from xla_ckpt._hooks.params import ParamSource, param_source

__all__ = ["weights_by_reference", "hooks_for", "user_hooks", "user_pair", "state", "Packed", "forward_of",
           "outside_region", "recomputing", "ledger"]


class Packed:
    """Base of every object ``_pack`` returns in place of a tensor; ``unpack`` gives the tensor back."""

    __slots__ = ()

    def unpack(self) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class _ByReference(Packed):
    """A parameter (or a copy derived from one) kept by reference: re-derived at unpack."""

    __slots__ = ("source",)

    def __init__(self, source: ParamSource) -> None:
        self.source = source

    def unpack(self) -> torch.Tensor:
        return self.source.derive()


class _Versioned(Packed):
    """A tensor saved as itself, with its version: autograd skips its own in-place check for tensors
    that pass through saved-tensor hooks, so the hook pair must make it (else a silently wrong grad)."""

    __slots__ = ("tensor", "version", "grad_fn")

    def __init__(self, t: torch.Tensor) -> None:
        # Detached (it shares t's version counter): holding an op's own output with its grad_fn
        # would be a reference cycle through C++ that Python's GC cannot break.
        self.tensor = t.detach()
        self.version = t._version
        self.grad_fn = type(t.grad_fn).__name__ if t.grad_fn is not None else "a leaf"

    def unpack(self) -> torch.Tensor:
        t = self.tensor
        if t._version != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{t.dtype}, shape {list(t.shape)}], output of {self.grad_fn}, is at version {t._version}; "
                f"expected version {self.version} instead (checked by xla_ckpt's saved-tensor hooks, as "
                "autograd checks it without them). Clone the tensor before modifying it."
            )
        return t


class _Outer(Packed):
    """A tensor saved inside a region under a user's ``saved_tensors_hooks`` pair opened around it.

    Plain autograd would pass the tensor through that pair (``unpack(pack(t))``: ``save_on_cpu``, a
    lossy compression); the region's own pair shadows it, so the value the region hands back at unpack
    (kept or recomputed) is passed through the user's pair then: the same value as without the library.
    """

    __slots__ = ("inner", "hooks")

    def __init__(self, inner: Any, hooks: tuple[Any, Any]) -> None:
        self.inner = inner
        self.hooks = hooks

    def unpack(self) -> torch.Tensor:
        pack, unpack = self.hooks
        return unpack(pack(_unpack(self.inner)))  # (pack: identity where the user's pack ran in forward)


class _Ledger(Protocol):
    def record(
        self,
        t: torch.Tensor,
        source: Optional[ParamSource],
        *,
        by_reference: bool = False,
        grad_fn: Optional[str] = None,
        module: Optional[str] = None,
        tag: Optional[str] = None,
        offloaded: bool = False,
    ) -> None: ...


class _Region(Protocol):
    def pack(self, t: torch.Tensor) -> Any: ...

    def on_tag(self, x: torch.Tensor, name: str) -> None: ...

    def user_hook(self, hook: Any, args: tuple, forward: bool) -> Any: ...  # a user's module hook (``user_hooks``)

    def module_ran(self, module: Any) -> None: ...  # the forward calls ``module`` (``user_hooks``)

    def nested(self, policy: Any) -> contextlib.AbstractContextManager[None]: ...  # ``checkpoint`` inside it


class _Recompute(Protocol):
    state: Any  # the region's RegionState (``hook_results``: the hooks its forward ran)

    def pack(self, t: torch.Tensor) -> Any: ...

    def module_called(self, module: Any, registered: Collection[Any]) -> None: ...

    def user_hook(self, hook: Any, args: tuple) -> Any: ...


class _State(threading.local):
    def __init__(self) -> None:
        self.ledgers: list[_Ledger] = []
        self.by_reference = 0
        self.region: Optional[_Region] = None  # a checkpoint region in its forward
        self.recompute: Optional[_Recompute] = None  # a checkpoint region replaying in backward
        self.outer: Optional[tuple[Any, Any]] = None  # a user's saved-tensor hook pair around the region


state = _State()


def _pack(t: torch.Tensor) -> Any:
    st = state
    if st.recompute is not None:
        return st.recompute.pack(t)
    if st.region is not None:
        # The region keeps its inputs and the outputs its policy saved, and reports them itself.
        packed = st.region.pack(t)
        return packed if st.outer is None else _Outer(packed, st.outer)
    source = param_source(t) if (st.ledgers or st.by_reference) else None
    by_reference = bool(st.by_reference) and source is not None and st.outer is None
    for ledger in st.ledgers:
        ledger.record(t, source, by_reference=by_reference)
    if st.outer is not None:  # a user's module hook inside a region; our pair (a ledger, by reference) inside a user's
        return _Outer(st.outer[0](t), (lambda packed: packed, st.outer[1]))
    return _ByReference(source) if by_reference and source is not None else _Versioned(t)


def _unpack(packed: Any) -> torch.Tensor:
    if isinstance(packed, Packed):
        return packed.unpack()
    return packed


# torch.utils.checkpoint's own pairs (its forward's, its recompute's) are not a value transform: a region
# inside them keeps what it saved from them (their pack run in backward breaks them).
_TORCH_CHECKPOINT = frozenset({os.path.abspath(torch.utils.checkpoint.__file__), torch.utils.checkpoint.__file__})


def user_hooks(tracing: bool = False) -> Optional[tuple[Any, Any]]:
    """The saved-tensor hook pair a user opened around this point, if it is neither ours nor torch's checkpoint's.

    ``tracing``: also while torch.compile traces (it hides the pairs then; the compiled graph's saves meet them).
    """
    top = torch._C._autograd._top_saved_tensors_default_hooks(tracing)
    if top is None or top[0] is _pack:
        return None
    code = getattr(top[0], "__code__", None)
    return None if code is not None and code.co_filename in _TORCH_CHECKPOINT else (top[0], top[1])


def user_pair() -> Optional[tuple[Any, Any]]:
    """The user's pair that applies here: one opened around this point, or around an enclosing
    ``weights_by_reference()`` (whose own pair is on top then)."""
    return user_hooks() or state.outer


def hooks_for() -> contextlib.AbstractContextManager[None]:
    """The one hook pair; every feature enters it (nesting the same pair is harmless)."""
    return torch.autograd.graph.saved_tensors_hooks(_pack, _unpack)


@contextlib.contextmanager
def weights_by_reference() -> Iterator[None]:
    """Autograd keeps parameters, and copies derived from them, by reference.

    A saved parameter is unpacked as the parameter's current value; a transposed / permuted /
    viewed / dtype-cast copy (stock ``nn.Linear`` on XLA saves ``t_copy(weight)``, autocast saves
    ``_to_copy(weight)``) is packed as a recipe and re-derived from the current parameter in
    backward. No parameter-sized tensor is copied or held. Lets FSDP free and re-gather weights.

    Example:
        >>> with xla_ckpt.weights_by_reference():
        ...     loss = model(x).sum()
        >>> loss.backward()
    """
    # A user's pair around it (a lossy bf16 pack) transforms what autograd keeps: under it every tensor goes to
    # that pair, as without the library, and the regions inside see it (``forward_of``). Were this pair to
    # shadow the user's, a lossy pair would give other grads than the plain step, silently.
    outer = user_pair()
    with hooks_for():
        state.by_reference += 1
        previous_outer, state.outer = state.outer, outer
        try:
            yield
        finally:
            state.by_reference -= 1
            state.outer = previous_outer


@contextlib.contextmanager
def forward_of(region: _Region) -> Iterator[None]:
    """``region``'s forward runs on this thread: what autograd saves (and each tag) goes to it."""
    outer = user_pair()
    with hooks_for():
        previous, state.region = state.region, region
        previous_outer, state.outer = state.outer, outer
        try:
            yield
        finally:
            state.region, state.outer = previous, previous_outer


@contextlib.contextmanager
def outside_region() -> Iterator[None]:
    """Code a region's forward calls that is not the region's (a user's module hook): autograd saves as without it."""
    previous, state.region = state.region, None
    try:
        yield
    finally:
        state.region = previous


@contextlib.contextmanager
def recomputing(recompute: _Recompute) -> Iterator[None]:
    """A region's recompute runs on this thread: what autograd saves goes to it (no region is in forward)."""
    with hooks_for():
        previous, state.recompute = state.recompute, recompute
        region, state.region = state.region, None
        try:
            yield
        finally:
            state.recompute, state.region = previous, region


@contextlib.contextmanager
def ledger(report: _Ledger) -> Iterator[None]:
    """``report`` records what autograd saves on this thread until the block ends.

    Under a user's pair (opened around it) each tensor still goes to that pair, as without the report: were
    its own pair to shadow the user's, a lossy pair would give other grads (4.7e-3 off on a small MLP, no region).
    """
    outer = user_pair()
    with hooks_for():
        state.ledgers.append(report)
        previous_outer, state.outer = state.outer, outer
        try:
            yield
        finally:
            state.ledgers.remove(report)
            state.outer = previous_outer
