"""The selective checkpoint engine: per-op SAVE / RECOMPUTE decisions, replayed by position.

Forward: ``fn`` runs under a dispatch mode; each ATen op becomes an ``OpCall`` that the policy
decides on. SAVE outputs are cached (detached aliases); everything autograd wants to save inside
the region is packed as a slot handle instead of a tensor. Backward: the first unpack of a slot
re-runs ``fn`` under a replay mode that hands out cached outputs at SAVE positions and recomputes
the rest, checking op identity, shapes and dtypes position by position.

On XLA the recomputation is fenced on the incoming gradient (see ``_Fence``), so the compiler can
neither merge it with its forward twin (CSE) nor schedule it before the gradient exists.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from xla_ckpt import _compat, _compiled, _modules, _saved, _xla
from xla_ckpt._replay_state import Fence as _Fence, RNGState as _RNG, autocast_state as _autocast_state, devices as _devices
from xla_ckpt._params import param_source
from xla_ckpt._policy import Decision, OpCall, Policy
from xla_ckpt.policies import resolve

__all__ = ["checkpoint", "CheckpointError"]

aten = torch.ops.aten
SAVE, RECOMPUTE = Decision.SAVE, Decision.RECOMPUTE

# Functionalization turns views into *_copy ops on XLA: they are views for our purposes.
_VIEW_COPIES = frozenset(
    {aten.t_copy, aten.view_copy, aten.transpose_copy, aten.permute_copy, aten.expand_copy, aten._unsafe_view,
     aten.alias_copy, aten.slice_copy, aten.select_copy, aten.split_copy, aten.split_with_sizes_copy,
     aten.unsqueeze_copy, aten.squeeze_copy, aten.as_strided_copy, aten.diagonal_copy, aten.unbind_copy,
     aten.detach_copy}
)


# Ops that are neither decided nor replayed by position, just run:
# - detach / lift_fresh: emitted or skipped depending on context (torch's own SAC ignores them too);
# - views: free to replay, must alias their replayed base, and on XLA functionalization emits a
#   varying number of them (a layer norm's input view appears in forward, not in the recompute).
_IGNORED = frozenset({aten.detach, aten.lift_fresh, aten.lift_fresh_copy})
_skip_cache: dict[Any, bool] = {}
_mutable_cache: dict[Any, bool] = {}


def _skipped(op: Any) -> bool:
    skip = _skip_cache.get(op)
    if skip is None:
        skip = _skip_cache[op] = op.overloadpacket in _IGNORED or _is_view(op)
    return skip


class CheckpointError(RuntimeError):
    """The recomputation cannot reproduce the forward (non-determinism, mutation, mismatch)."""


def _is_view(op: Any) -> bool:
    return op.is_view or op.overloadpacket in _VIEW_COPIES


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


@dataclass
class _Record:
    """What forward ran at one position (no tensors: metadata only)."""

    op: Any
    decision: Decision
    meta: tuple[tuple[tuple[int, ...], torch.dtype], ...]
    module: str
    tag: Optional[str]


class _Slot(_saved.Packed):
    """Stands in for a tensor autograd saved inside a region; unpacking triggers the recompute."""

    __slots__ = ("region", "index")

    def __init__(self, region: "_Region", index: int) -> None:
        self.region = region
        self.index = index

    def unpack(self) -> torch.Tensor:
        return self.region.unpack(self.index)


class _Used:
    """Marks a recomputed tensor already handed out (a second backward needs a fresh recompute)."""


_USED = _Used()


class _Discarded(_saved.Packed):
    """What the recompute graph keeps in place of its saved tensors: it is never unpacked."""

    __slots__ = ()

    def unpack(self) -> torch.Tensor:
        raise CheckpointError("internal: the recompute graph of a checkpoint region was backpropagated through")


_DISCARDED = _Discarded()


class _ForwardMode(TorchDispatchMode):
    def __init__(self, region: "_Region") -> None:
        super().__init__()
        self.region = region
        # Factory ops (no tensor arguments) reach the mode with it still active, so the mode's own
        # bookkeeping ops (detach of saved outputs) would come back here: they are not fn's ops.
        self.busy = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self.busy and not _skipped(func):
            self.busy = True
            try:
                self.region.on_op(OpCall(func, args, kwargs, out, _modules.current_name()))
            finally:
                self.busy = False
        return out


class _ReplayMode(TorchDispatchMode):
    def __init__(self, region: "_Region", fence: Optional[_Fence]) -> None:
        super().__init__()
        self.region = region
        self.fence = fence
        self.pos = 0
        self.busy = False  # see _ForwardMode.busy: the fence's own adds are not fn's ops

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if self.busy or _skipped(func):
            return func(*args, **kwargs)
        region, pos = self.region, self.pos
        self.pos += 1
        if pos >= len(region.records):
            raise CheckpointError(
                f"recomputation ran more ops than the forward ({len(region.records)}); extra op {func}. "
                "The checkpointed function must run the same ops on recompute (no data-dependent Python "
                "control flow on values that differ, no state changed between forward and backward)."
            )
        rec = region.records[pos]
        if rec.op != func:
            raise CheckpointError(
                f"recomputation diverged at op #{pos} in module '{rec.module}': forward ran {rec.op}, "
                f"recompute ran {func}. The checkpointed function must be deterministic in its ops."
            )
        if rec.decision is SAVE:
            cached, versions = region.cache[pos]
            watched = [(r(), v) for r, v in region.watched.get(pos, ())]
            for t, v in list(zip(_tensors(cached), versions)) + [(t, v) for t, v in watched if t is not None]:
                if t._version != v:
                    raise CheckpointError(
                        f"an output of {func} (module '{rec.module}') that the policy saved was modified in "
                        "place after the checkpointed forward; the gradient would be wrong. Clone it before "
                        "modifying it, or let the policy recompute this op."
                    )
            if self.fence is None:
                return cached
            self.busy = True
            try:
                return tree_map(lambda t: self.fence.apply(t) if isinstance(t, torch.Tensor) else t, cached)
            finally:
                self.busy = False
        out = func(*args, **kwargs)
        meta = tuple((tuple(t.shape), t.dtype) for t in _tensors(out))
        if meta != rec.meta:
            raise CheckpointError(
                f"recomputation of {func} in module '{rec.module}' (op #{pos}) produced {meta}, the forward "
                f"produced {rec.meta} (shapes, dtypes). The checkpointed function must recompute the same values."
            )
        return out


class _Region:
    """One checkpointed call: its inputs, decisions, cached outputs and recompute."""

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, policy: Policy) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        inputs = _tensors((args, kwargs))
        devices = _devices(inputs)
        self.policies = [policy]
        self.rng = _RNG(devices)
        self.autocast = _autocast_state(devices)
        self.on_xla = any(d.type == "xla" for d in devices)
        self.records: list[_Record] = []
        self.cache: dict[int, tuple[Any, tuple[int, ...]]] = {}
        self.pending: Optional[tuple[OpCall, Policy]] = None  # the latest op, decided when the next arrives
        self.n_packed = 0
        self.recomputed: Optional[list[Any]] = None
        self.grad: Optional[torch.Tensor] = None
        # Region outputs that alias a saved output, weakly, with their version after forward: the
        # caller holds these objects (not our detached aliases) and may modify them in place.
        self.watched: dict[int, list[tuple[weakref.ref, int]]] = {}

    # -- forward ------------------------------------------------------------------------------
    def on_op(self, call: OpCall) -> None:
        # The latest op stays pending until the next one, so that tag() on its output (or on a view
        # of it) can still name it: ops are decided with their tag.
        self.flush()
        self.pending = (call, self.policies[-1])

    def on_tag(self, x: torch.Tensor, name: str) -> None:
        # By buffer, not object: on XLA the mode sees the tensors under the functionalization
        # wrappers that the user holds (same XLA tensor id, other Python object).
        if self.pending is None:
            return  # x was not made by an op of this region (or not by the latest one)
        call, policy = self.pending
        targets = {_xla.buffer_key(x)} | ({_xla.buffer_key(x._base)} if x._base is not None else set())
        if any(_xla.buffer_key(t) in targets for t in _tensors(call.out)):
            self.pending = (replace(call, tag=name), policy)

    def flush(self) -> None:
        if self.pending is not None:
            call, policy = self.pending
            self.pending = None
            self._decide(call, policy)

    def _decide(self, call: OpCall, policy: Policy) -> None:
        op = call.op
        mutable = _mutable_cache.get(op)
        if mutable is None:
            mutable = _mutable_cache[op] = op._schema.is_mutable
        if mutable:
            decision = RECOMPUTE  # a mutation must re-run on the replayed tensors
        else:
            decision = policy(call)
            if not isinstance(decision, Decision):
                raise TypeError(
                    f"checkpoint policy {policy!r} returned {decision!r} for {op} in module '{call.module}'; "
                    "a policy must return xla_ckpt.Decision.SAVE or Decision.RECOMPUTE"
                )
        outs = _tensors(call.out)
        pos = len(self.records)
        self.records.append(_Record(op, decision, tuple((tuple(t.shape), t.dtype) for t in outs), call.module, call.tag))
        if decision is SAVE:
            # Detached aliases: no copy, and no reference cycle through the autograd graph.
            cached = tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, call.out)
            self.cache[pos] = (cached, tuple(t._version for t in _tensors(cached)))

    def finish_forward(self) -> None:
        self.flush()
        for pos, (cached, versions) in list(self.cache.items()):
            if any(t._version != v for t, v in zip(_tensors(cached), versions)):
                # Mutated in place later inside fn: replaying the op (and the mutation) stays exact.
                del self.cache[pos]
                self.records[pos] = replace(self.records[pos], decision=RECOMPUTE)
        for ledger in _saved.state.ledgers:
            for t in _tensors((self.args, self.kwargs)):
                ledger.record(t, param_source(t), grad_fn="region input")
            for pos, (cached, _) in self.cache.items():
                rec = self.records[pos]
                for t in _tensors(cached):
                    ledger.record(t, param_source(t), grad_fn=str(rec.op.overloadpacket), module=rec.module,
                                  tag=rec.tag)

    def watch(self, outputs: list[torch.Tensor]) -> None:
        keys = {}
        for pos, (cached, _) in self.cache.items():
            for t in _tensors(cached):
                keys[_xla.buffer_key(t)] = pos
        for t in outputs:
            pos = keys.get(_xla.buffer_key(t if t._base is None else t._base))
            if pos is not None:
                self.watched.setdefault(pos, []).append((weakref.ref(t), t._version))

    def pack(self, t: torch.Tensor) -> Any:
        if _saved.state.recompute is self:
            assert self.recomputed is not None
            # Detached, and a placeholder for the throwaway recompute graph: returning ``t`` itself
            # would let that graph's nodes hold their own outputs (softmax, exp save their result), a
            # cycle through C++ that Python's GC cannot break: every recompute graph would leak, and
            # on XLA its tensors would become outputs of the step's graph.
            self.recomputed.append(t.detach())
            return _DISCARDED
        self.n_packed += 1
        return _Slot(self, self.n_packed - 1)

    def capture_grad(self, grad: torch.Tensor) -> None:
        if self.grad is None and grad is not None and grad.numel() > 0:
            self.grad = grad.detach()

    # -- backward -----------------------------------------------------------------------------
    def unpack(self, index: int) -> torch.Tensor:
        if self.recomputed is None or self.recomputed[index] is _USED:
            self._recompute()
        assert self.recomputed is not None
        t = self.recomputed[index]
        self.recomputed[index] = _USED
        return t

    def _recompute(self) -> None:
        fence = _Fence(self.grad) if (self.on_xla and self.grad is not None) else None

        def detach(t: Any) -> Any:
            if not isinstance(t, torch.Tensor):
                return t
            d = t.detach()
            if fence is not None and _xla.is_xla(d):
                d = fence.apply(d)
            return d.requires_grad_(t.requires_grad)

        args, kwargs = tree_map(detach, (self.args, self.kwargs))
        if fence is not None:
            self._barrier(_tensors((args, kwargs)) + [fence.zero])
        outer_rng = _RNG(list(self.rng.devices))
        self.recomputed = []
        replay = _ReplayMode(self, fence)
        try:
            self.rng.restore()
            with contextlib.ExitStack() as stack:
                for device_type, enabled, dtype in self.autocast:
                    stack.enter_context(torch.autocast(device_type, dtype=dtype, enabled=enabled))
                stack.enter_context(torch.enable_grad())
                stack.enter_context(_saved.hooks_for())
                stack.enter_context(_recomputing(self))
                stack.enter_context(replay)
                self.fn(*args, **kwargs)
        finally:
            outer_rng.restore()
        if replay.pos != len(self.records) or len(self.recomputed) != self.n_packed:
            raise CheckpointError(
                f"recomputation ran {replay.pos} ops and saved {len(self.recomputed)} tensors; the forward ran "
                f"{len(self.records)} ops and saved {self.n_packed}. The checkpointed function must run the same "
                "ops on recompute."
            )

    @staticmethod
    def _barrier(tensors: list[torch.Tensor]) -> None:
        # Where the compiler honours it (TPU/GPU), the barrier also pins the recompute after the gradient.
        xla = [t for t in tensors if _xla.is_xla(t)]
        if xla and _xla.hardware_type(xla[0].device) != "CPU":
            _xla.optimization_barrier_(xla)


@contextlib.contextmanager
def _recomputing(region: _Region) -> Iterator[None]:
    st = _saved.state
    previous = st.recompute
    st.recompute = region
    try:
        yield
    finally:
        st.recompute = previous


def checkpoint(fn: Callable[..., Any], *args: Any, policy: Any = "nothing_saveable", **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)``, letting ``policy`` decide per op what is saved or recomputed.

    Args:
        fn: the function (or module) to run; it must run the same ops when recomputed.
        *args, **kwargs: its arguments (tensors or not; inputs need not require grad).
        policy: a registered name (``xla_ckpt.policies.names()``) or any ``(OpCall) -> Decision``.

    Gradients equal running ``fn`` directly: RNG states (CPU, CUDA, XLA) and autocast are restored
    for the recompute. Nested calls run inside the outer region, each under its own policy. Under
    ``torch.no_grad()`` ``fn`` simply runs.

    Example:
        >>> y = xla_ckpt.checkpoint(block, x, policy="dots_saveable")
    """
    pol = resolve(policy)
    if _compat.is_compiling():
        return _compiled.checkpoint(fn, args, kwargs, pol)  # Dynamo cannot trace the engine: torch's SAC marks
    st = _saved.state
    if not torch.is_grad_enabled() or st.recompute is not None:
        # No graph to save for, or we are inside a replay (the replay mode sees these ops).
        return fn(*args, **kwargs)
    if st.region is not None:
        region = st.region
        region.policies.append(pol)
        try:
            return fn(*args, **kwargs)  # each op is decided under the policy current when it ran
        finally:
            region.policies.pop()
    region = _Region(fn, args, kwargs, pol)
    with _saved.hooks_for(), _modules.tracking(), _ForwardMode(region):
        st.region = region
        try:
            out = fn(*args, **kwargs)
        finally:
            st.region = None
    region.finish_forward()  # outside the mode: its own detach() calls are not the function's ops
    region.watch(_tensors(out))
    if region.on_xla:
        for t in _tensors(out):
            if t.requires_grad:
                # Weakly: the hook lives as long as the output's graph node, which the caller may keep
                # (e.g. the loss) after backward; the region, its inputs and its cache must not.
                t.register_hook(functools.partial(_capture_grad, weakref.ref(region)))
    return out


def _capture_grad(ref: "weakref.ref[_Region]", grad: torch.Tensor) -> None:
    region = ref()
    if region is not None:
        region.capture_grad(grad)
