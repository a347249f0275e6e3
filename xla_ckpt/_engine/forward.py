"""A region's forward: the dispatch mode that sees each ATen op ``fn`` runs, and the forward's own state.

``ForwardMode`` is the engine's per-op hot path: every op of ``fn`` (views included) passes through
``__torch_dispatch__``. It does one pass over the arguments (signature and tensors) before the op
runs, one over the outputs after, and hands both to ``Forward.on_op``, which records the position and
decides the previous one (deciding one op late lets a ``tag`` on its output name it).

``Forward`` holds what only the forward needs (the op being decided, what autograd saved so far, the
dataflow, the recorder, a planner's calls) and is dropped when ``fn`` returns; what backward needs
goes into the region's ``RegionState`` through its methods.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import replace
from typing import Any, Callable, Iterator, Optional, Protocol

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xla_ckpt._base import modules as _modules
from xla_ckpt._base.xla import buffer_key
from xla_ckpt._base.xla_state import lift
from xla_ckpt._engine.direct import Recorder, direct_replay
from xla_ckpt._engine.outside import by_buffer, owner_module
from xla_ckpt._engine.state import RegionState
from xla_ckpt._hooks import saved as _saved
from xla_ckpt._hooks.saved import Packed
from xla_ckpt._ir.liveness import Dataflow
from xla_ckpt._ir.opcall import Decision, OpCall, Policy, not_a_decision
from xla_ckpt._ir.record import OpInfo, Record, arg_scan, draws, op_info, out_scan, spec_of, tensors, written
from xla_ckpt._ir.replay_state import Draw, draw_source
from xla_ckpt._policy.plan import plans

__all__ = ["Forward", "ForwardMode", "Slot", "detach_unseen"]

SAVE, RECOMPUTE = Decision.SAVE, Decision.RECOMPUTE
_FRESH = (torch.ops.aten.empty_like, torch.ops.aten.empty, torch.ops.aten.new_empty)  # values never read

# The dispatch-mode stack (torch._C, as torch.utils._python_dispatch uses it); absent: plain detach.
_stack_len = getattr(torch._C, "_len_torch_dispatch_stack", None)
_stack_at = getattr(torch._C, "_get_dispatch_stack_at", None)
_stack_pop = getattr(torch._C, "_pop_torch_dispatch_stack", None)
_stack_push = getattr(torch._C, "_push_on_torch_dispatch_stack", None)
_STACK_OK = None not in (_stack_len, _stack_at, _stack_pop, _stack_push)


def detach_unseen(t: torch.Tensor, owner: Any) -> torch.Tensor:
    """``t.detach()`` that ``owner``'s own mode (forward or replay) does not see when it is innermost.

    The engine detaches every tensor autograd saves while its mode is active: each such detach would
    be one more trip through the Python mode (on XLA a ``detach_copy`` and a producer lookup) for an
    op that is not ``fn``'s. The mode is taken off the stack for the call, as torch does around a
    mode's own ``__torch_dispatch__``. Any other mode on top still sees it.
    """
    if _STACK_OK:
        n = _stack_len()
        if n:
            mode = _stack_at(n - 1)
            if getattr(mode, "owner", None) is owner:
                _stack_pop(None)
                try:
                    return t.detach()
                finally:
                    _stack_push(mode)
    return t.detach()


@contextlib.contextmanager
def _engine_off(owner: Any) -> Iterator[None]:
    """``owner``'s forward mode does not see the block's ops (other modes on the stack still do).

    Taken off the stack when it is innermost (factory ops then get torch_xla's wrappers, as without
    any mode); else, under a mode the caller pushed inside the region, it passes them through.
    """
    if _STACK_OK:
        n = _stack_len()
        for i in range(n - 1, -1, -1):
            mode = _stack_at(i)
            if getattr(mode, "owner", None) is not owner:
                continue
            if i == n - 1:
                _stack_pop(None)
                try:
                    yield
                finally:
                    _stack_push(mode)
            else:
                with mode.quiet():
                    yield
            return
    yield


Pending = tuple[OpCall, Policy, OpInfo, tuple, Optional[Draw], tuple, tuple]


class _Unpacks(Protocol):
    def unpack(self, index: int) -> torch.Tensor: ...


class Slot(Packed):
    """Stands in for a tensor autograd saved inside a region; unpacking it may trigger the recompute."""

    __slots__ = ("owner", "index")

    def __init__(self, owner: _Unpacks, index: int) -> None:
        self.owner = owner  # the region: one way only (a region that held its slots would be a cycle)
        self.index = index

    def unpack(self) -> torch.Tensor:
        return self.owner.unpack(self.index)


class Forward:
    """The forward of one region (see the module docstring); ``end`` hands over what the region keeps.

    Args:
        state: the region's state, which this forward fills through its methods.
        policy: the region's policy (nested ``checkpoint`` calls push theirs with ``nested``).
        owner: what the slots handed to autograd unpack through (the region).
    """

    def __init__(self, state: RegionState, policy: Policy, owner: _Unpacks) -> None:
        self.state = state
        self.owner = owner
        self.on_xla = state.on_xla
        self.policies = [policy]
        # The latest op, decided when the next arrives (so a tag on its output can still name it).
        self.pending: Optional[Pending] = None
        self.pending_written = False  # the pending op's output was written in place before its decision
        # What autograd saved, while the forward runs (eager: detached aliases; XLA: the tensors, see
        # pack): an autograd.grad inside fn unpacks it before any recompute could exist.
        self.early: list[torch.Tensor] = []
        self.flow = Dataflow(state.inputs)
        # XLA: the forward's ops, from which ``direct`` builds the program replayed in place of fn.
        self.recorder: Optional[Recorder] = Recorder() if (
            state.on_xla and not state.verify and direct_replay()) else None
        # Planning policies (``_policy.plan``): every OpCall, and per planner the positions it decides
        # (provisionally saved until the end of forward).
        self.calls: Optional[list[Optional[OpCall]]] = [] if plans(policy) else None
        self.planned: dict[int, tuple[Policy, list[int]]] = {}
        self.cache_keys: dict[Any, int] = {}  # eager: storage of each kept output -> its position

    @contextlib.contextmanager
    def nested(self, policy: Policy) -> Iterator[None]:
        """A ``checkpoint`` call inside this region: its ops are decided under ``policy``."""
        if plans(policy) and self.calls is None:
            self.calls = [None] * len(self.state.records)  # ops before this one are not the planner's
        self.policies.append(policy)
        try:
            yield
        finally:
            self.policies.pop()

    # -- what the mode reports ------------------------------------------------------------------
    def before_write(self, targets: list[torch.Tensor], declared: bool = True) -> None:
        """An eager in-place op is about to write ``targets``: the write is judged here, where it happens.

        A region input gets a copy of its value before the first write (the replay starts from it);
        a kept output (or the latest op's, still undecided) is demoted to recompute, so the replay
        runs the op and then the write again instead of writing twice into the forward's value.
        """
        state = self.state
        producer = self.flow.producer
        for t in targets:
            key = buffer_key(t)
            if key not in producer:  # from outside the region: a module buffer, a closure
                # The tensor itself: a detached alias made here (below autograd) has a version
                # counter of its own, and the replay must leave the caller's unchanged.
                base = t if t._base is None else t._base
                state.writing_outside(key, base, lambda: base.detach().clone())
            state.writing(key, lambda i: state.inputs[i].detach().clone(), declared)
            pos = self.cache_keys.pop(key, None)
            if pos is not None and pos in state.cache:
                state.demote(pos)
            if self.pending is not None and not self.pending_written:
                self.pending_written = any(buffer_key(o) == key for o in tensors(self.pending[0].out))

    def on_xla_write(self, old: torch.Tensor, new: torch.Tensor) -> None:
        """torch_xla traces an in-place op as a new value: ``old`` is the value before the write, ``new`` after."""
        # XLA tensors are immutable underneath: the old value is the input's value before the write.
        key = buffer_key(old)
        if key not in self.flow.producer:
            # From outside the region: the mode sees no version-carrying tensor, so the module's own
            # tensor (a norm's running statistics) is found by buffer, which now holds ``new``, in the
            # running module or the checkpointed one; None for any other (a closure).
            self.xla_outside_write(buffer_key(new), lambda: old)
        self.state.writing(key, lambda i: old)
        if self.recorder is not None and not self._fills(key, new):
            self.recorder.refuse("fn writes in place")

    def _fills(self, key: Any, new: torch.Tensor) -> bool:
        """An in-place op that fills a fresh buffer: dropout's ``empty_like``, ``bernoulli_``, ``div_``.

        The value written over comes from the op right before (nothing else read it, no view of it,
        autograd did not save it) and holds no data (``empty_like``) or a draw: below
        functionalization the program replays it as the functional ops it is.
        """
        producer = self.flow.producer
        p = producer.get(key, -1)
        if p < 0 or producer.get(buffer_key(new)) != p + 1 or key in self.state.packed_keys:
            return False
        views = self.recorder.views if self.recorder is not None else ()
        if views and views[-1][0] > p:
            return False
        rec = self.state.records[p]
        return rec.info.random or rec.op.overloadpacket in _FRESH

    def xla_outside_write(self, now: Any, before: Callable[[], torch.Tensor]) -> None:
        """XLA: fn writes a tensor from outside the region, whose buffer is ``now``; ``before()``: its old value."""
        hit = by_buffer(_modules.current_module()).get(now) or by_buffer(owner_module(self.state.fn)).get(now)
        self.state.writing_outside(now, hit[2] if hit is not None else None, before)

    def before_undeclared_write(self, targets: list[torch.Tensor]) -> None:
        """XLA: an op about to update ``targets`` in place without its schema saying so (a batch norm's
        running statistics): outside tensors keep their value before it for the replay."""
        producer = self.flow.producer
        for t in targets:
            key = buffer_key(t)
            if key not in producer:
                self.xla_outside_write(key, lambda: t.clone())

    def on_xla_view(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        self.flow.alias(args, out)  # XLA views are new buffers: map them to their base
        if self.recorder is not None:
            self.recorder.view(func, args, kwargs, out)

    def on_op(self, call: OpCall, info: OpInfo, draw: Optional[Draw], sig: tuple, reads: list[torch.Tensor]) -> None:
        """One op of fn ran (``sig``, ``reads``: its arguments before it ran, see ``_ir.record.arg_scan``)."""
        self.flush()
        outs, meta, only_tensors = out_scan(call.out)
        self.flow.op(reads, outs, only_tensors, info.mutable)
        # Versions now, not when decided: an in-place op right after this one must count as a write.
        # Weakly, the objects fn got (our detached aliases, made below autograd, do not share their
        # version counter): if one is alive and its version moved, it was written in place.
        versions = tuple([(weakref.ref(t), t._version) for t in outs])
        if self.recorder is not None:
            self.recorder.calls.append(call)
        self.pending = (call, self.policies[-1], info, versions, draw, sig, meta)

    def on_tag(self, x: torch.Tensor, name: str) -> None:
        # By buffer, not object: on XLA the mode sees the tensors under the functionalization
        # wrappers that the user holds (same XLA tensor id, other Python object).
        if self.pending is None:
            return  # x was not made by an op of this region (or not by the latest one)
        call = self.pending[0]
        targets = {buffer_key(x)} | ({buffer_key(x._base)} if x._base is not None else set())
        if any(buffer_key(t) in targets for t in tensors(call.out)):
            self.pending = (replace(call, tag=name),) + self.pending[1:]

    def flush(self) -> None:
        """Decide the pending op (the next op arrived, or the forward ended)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            written_, self.pending_written = self.pending_written, False
            self._decide(*pending, written=written_)

    def _decide(self, call: OpCall, policy: Policy, info: OpInfo, versions: tuple, draw: Optional[Draw],
                sig: tuple, meta: tuple, written: bool = False) -> None:
        state = self.state
        planner = False
        if info.mutable or written:
            decision = RECOMPUTE  # a mutation must re-run on the replayed tensors
        elif plans(policy):
            planner, decision = True, SAVE  # decided with the whole region at the end of forward
        else:
            decision = policy(call)
            if decision.__class__ is not Decision:  # ``ask``'s check, inline: this is the per-op path
                raise not_a_decision(policy, call, decision, "checkpoint policy")
        rec = Record(call.op, info, decision, sig, meta, call.module, call.tag, draw,
                     None if (self.on_xla or decision is not RECOMPUTE) else spec_of(call.out))
        pos, cached = state.record(rec, call.out, versions)
        if self.calls is not None:
            self.calls.append(call)
        if planner:
            self.planned.setdefault(id(policy), (policy, []))[1].append(pos)
        if cached is not None and not self.on_xla:
            for t in tensors(cached):
                self.cache_keys[buffer_key(t)] = pos

    def user_hook(self, hook: Any, args: tuple) -> Any:
        """A user's module hook inside the region (``_hooks.user_hooks``): it runs as without the library,
        once; what it returns is kept for the replay, which does not call it again."""
        with _saved.outside_region(), _engine_off(self):
            result = hook(*args)
            self.state.hook_ran(hook, args[0] if args else None, result)  # its detached aliases are not fn's ops either
        return result

    # -- what autograd saves ----------------------------------------------------------------------
    def pack(self, t: torch.Tensor) -> Slot:
        """Autograd saved ``t`` during the forward: the slot autograd keeps instead."""
        # On XLA a detach makes a new functional wrapper (~10 us, ~100 per GPT step): the alias is
        # made only if fn unpacks this slot during its forward (see unpack). Eager keeps the alias
        # (``retain`` may keep it as a promoted output). ``early`` is dropped when the forward ends.
        self.early.append(t if self.on_xla else detach_unseen(t, self))
        key = buffer_key(t)
        self.flow.pack(key)
        return Slot(self.owner, self.state.pack(t, key))

    def unpack(self, index: int) -> torch.Tensor:
        """fn unpacks what autograd saved during its own forward (``autograd.grad`` inside fn)."""
        if self.recorder is not None:
            self.recorder.refuse("fn unpacks a saved tensor during its forward (autograd.grad inside fn)")
        t = self.early[index]
        return t.detach() if self.on_xla else t


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

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if kwargs is None:
            kwargs = {}
        info = op_info(func)
        if self.busy:
            return func(*args, **kwargs)
        fw = self.owner
        if info.skipped:
            if fw.on_xla:
                if info.propagate:
                    fw.on_xla_write(args[0], args[1])  # torch_xla's trace of an in-place op: old, new value
                    return func(*args, **kwargs)
                out = func(*args, **kwargs)
                fw.on_xla_view(func, args, kwargs, out)
                return out
            return func(*args, **kwargs)
        # Before the op: an in-place op may change its arguments' shapes (x.unsqueeze_(0)), and the
        # replay takes the signature before the op too.
        sig, reads = arg_scan(args, kwargs)
        if info.writes and (not fw.on_xla or not info.mutable):
            self.busy = True
            try:
                if fw.on_xla:
                    fw.before_undeclared_write(written(info, args, kwargs))
                else:
                    fw.before_write(written(info, args, kwargs), info.mutable)
            finally:
                self.busy = False
        draw = None
        if info.random and draws(info, args, kwargs):  # SDPA at dropout_p=0: no draw
            # XLA too: the replay sets torch_xla's running seed back for the op (``_ir/replay_state.py``).
            draw, out = Draw.record(draw_source(kwargs, args), lambda: func(*args, **kwargs), self.quiet)
        else:
            out = func(*args, **kwargs)
        self.busy = True
        try:
            fw.on_op(OpCall(func, args, kwargs, out, _modules.current_name()), info, draw, sig, reads)
        finally:
            self.busy = False
        # A factory op (or a copy from the CPU) on XLA: fn must get the tensor torch_xla gives it
        # outside the mode, or its views read the wrong elements (see _base.xla_state). The record keeps
        # the tensor under the wrapper, the one later ops reach the mode with. (A plain tensor off
        # XLA, the common case, skips the call: the per-op budget of tests/unit/_engine/test_trace_cost.py.)
        return out if type(out) is torch.Tensor and not out.is_xla else lift(out, reads)
