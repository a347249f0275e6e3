"""A region's forward state: what the dispatch mode (``forward_mode.py``) reports, recorded and decided.

``Forward.on_op`` records each op ``fn`` runs and decides the previous one (deciding one op late lets a
``tag`` on its output name it). ``Forward`` holds what only the forward needs (the op being decided, what
autograd saved so far, the dataflow, the recorder, a planner's calls) and is dropped when ``fn`` returns;
what backward needs goes into the region's ``RegionState`` through its methods.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import replace
from typing import Any, Callable, Iterator, Optional, Protocol, cast

import torch
from torch.utils._pytree import tree_map

from xla_ckpt._base.xla import buffer_key
from xla_ckpt._engine import seeding as _seeding
from xla_ckpt._engine.direct import Recorder
from xla_ckpt._engine.hook_values import HookValue, hook_writes
from xla_ckpt._engine.state import RegionState
from xla_ckpt._hooks import saved as _saved
from xla_ckpt._hooks.saved import Packed
from xla_ckpt._record.liveness import Dataflow
from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._record.opcall import Decision, OpCall, Policy
from xla_ckpt._policy.decide import Why, decide
from xla_ckpt._record.record import OpInfo, Record, out_scan, tensors
from xla_ckpt._record.replay_state import Draw
from xla_ckpt._policy.plan import plans

__all__ = ["Forward", "Slot", "detach_unseen", "engine_off"]

SAVE, RECOMPUTE = Decision.SAVE, Decision.RECOMPUTE
PLANNED = Why.PLANNED
FRESH = (torch.ops.aten.empty_like, torch.ops.aten.empty, torch.ops.aten.new_empty)  # values never read

# The dispatch-mode stack (torch._C, as torch.utils._python_dispatch uses it); absent: plain detach.
_stack_len: Any = getattr(torch._C, "_len_torch_dispatch_stack", None)
_stack_at: Any = getattr(torch._C, "_get_dispatch_stack_at", None)
_stack_pop: Any = getattr(torch._C, "_pop_torch_dispatch_stack", None)
_stack_push: Any = getattr(torch._C, "_push_on_torch_dispatch_stack", None)
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
def engine_off(owner: Any) -> Iterator[None]:
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


# The policy deciding an op, and whether it plans the whole region (``_policy.plan.plans``, once per policy).
Deciding = tuple[Policy, bool]
Pending = tuple[OpCall, Deciding, OpInfo, tuple, Optional[Draw], tuple, tuple]


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
    """The forward of one region (see the module docstring): what every device does alike.

    The device's own steps are methods of ``EagerForward`` (``eager.py``) and ``XlaForward``
    (``forward_xla.py``): in-place writes, views, what autograd saves while fn runs; chosen once per
    region by ``_engine.device``.

    Args:
        state: the region's state, which this forward fills through its methods.
        policy: the region's policy (nested ``checkpoint`` calls push theirs with ``nested``).
        owner: what the slots handed to autograd unpack through (the region).
    """

    def __init__(self, state: RegionState, policy: Policy, owner: _Unpacks) -> None:
        self.state = state
        self.owner = owner
        self.policies: list[Deciding] = [(policy, plans(policy))]
        # The latest op, decided when the next arrives (so a tag on its output can still name it).
        self.pending: Optional[Pending] = None
        self.pending_written = False  # the pending op's output was written in place before its decision
        # What autograd saved, while the forward runs (eager: detached aliases; XLA: the tensors, see
        # pack): an autograd.grad inside fn unpacks it before any recompute could exist.
        self.early: list[torch.Tensor] = []
        # The first slot saved since the op before ended: ``packed_before`` for the op about to run (its
        # node saves its inputs just before it), ``own_from`` for the op that just ran (XLA reports its
        # write after it). A write to those is judged by versions (``RegionState.settle_writes``).
        self.packed_before = self.own_from = 0
        # Slots an op wrote that autograd may not count as a write (see ``RegionState.settle_writes``):
        # collected while it runs, judged at the next op or the forward's end, after autograd's version bump.
        self.written_now: list[int] = []
        self.settle_next: list[int] = []
        self.flow = Dataflow(cast(list[torch.Tensor], state.inputs))  # all present: none is dropped before backward
        # XLA: the forward's ops, from which ``direct`` builds the program replayed in place of fn.
        self.recorder: Optional[Recorder] = None
        # The OpCall of each position, kept while the forward runs where something reads it at its end: a
        # planning policy (``_policy.plan``) or XLA's recorder (set by ``XlaForward``). Per planner, the positions
        # it decides (provisionally saved until the end of forward).
        self.calls: Optional[list[Optional[OpCall]]] = [] if plans(policy) else None
        self.planned: dict[int, tuple[Policy, list[int]]] = {}
        # An error found in the middle of an op (a device step), raised by ``flush`` once the op is done.
        self.refused: Optional[BaseException] = None

    @contextlib.contextmanager
    def nested(self, policy: Policy) -> Iterator[None]:
        """A ``checkpoint`` call inside this region: its ops are decided under ``policy``."""
        planning = plans(policy)
        if planning and self.calls is None:
            self.calls = [None] * len(self.state.records)  # ops before this one are not the planner's
        self.policies.append((policy, planning))
        try:
            yield
        finally:
            self.policies.pop()

    # -- what the mode reports ------------------------------------------------------------------
    def on_op(self, call: OpCall, info: OpInfo, draw: Optional[Draw], sig: tuple, reads: list[torch.Tensor]) -> None:
        """One op of fn ran (``sig``, ``reads``: its arguments before it ran, see ``_record.record.arg_scan``)."""
        self.flush()
        if self.written_now:  # slots this op writes (eager): judged once autograd has counted the write
            self.settle_next, self.written_now = self.written_now, []
        self.own_from, self.packed_before = self.packed_before, len(self.early)
        out = call.out
        if type(out) is torch.Tensor:  # ``out_scan``'s common case, inline: this is the per-op path
            outs, meta, only_tensors = [out], ((out.shape, out.dtype),), True
        else:
            outs, meta, only_tensors = out_scan(out)
        self.flow.op(reads, outs, only_tensors, info.mutable)
        if self.made is not None:
            self.made(outs)
        # Versions now, not when decided: an in-place op right after this one must count as a write.
        # Weakly, the objects fn got (our detached aliases, made below autograd, do not share their
        # version counter): if one is alive and its version moved, it was written in place.
        if len(outs) == 1:  # the common case without a comprehension (a call per op in Python 3.11)
            versions: tuple = ((weakref.ref(outs[0]), outs[0]._version),)
        else:
            versions = tuple([(weakref.ref(t), t._version) for t in outs])
        self.pending = (call, self.policies[-1], info, versions, draw, sig, meta)

    def on_tag(self, x: torch.Tensor, name: str) -> None:
        # By buffer, not object: on XLA the mode sees the tensors under the functionalization
        # wrappers that the user holds (same XLA tensor id, other Python object).
        if self.pending is None:
            return  # x was not made by an op of this region (or not by the latest one)
        call = self.pending[0]
        key = buffer_key(x)
        # A view of the op's output names the op too: eager by ``_base``; on XLA, where each view is a buffer
        # of its own, by the root the flow mapped it to (a bias-free Linear's 3-D output is a view of its mm).
        targets = {key, self.flow.view_root.get(key, key)} | ({buffer_key(x._base)} if x._base is not None else set())
        if any(buffer_key(t) in targets for t in tensors(call.out)):
            self.pending = (replace(call, tag=name),) + self.pending[1:]

    def flush(self) -> None:
        """Decide the pending op (the next op arrived, or the forward ended)."""
        if self.refused is not None:
            raise self.refused
        if self.settle_next:
            slots, self.settle_next = self.settle_next, []
            uncounted = self.state.settle_writes(slots)
            if uncounted:
                self.uncounted_writes(uncounted)
        if self.pending is not None:
            pending, self.pending = self.pending, None
            written_, self.pending_written = self.pending_written, False
            self._decide(*pending, written=written_)

    def _decide(self, call: OpCall, deciding: Deciding, info: OpInfo, versions: tuple, draw: Optional[Draw],
                sig: tuple, meta: tuple, written: bool = False) -> None:
        state = self.state
        policy, planning = deciding
        writes = info.mutable or written  # replayed on the recomputed tensors, never saved (``_record.liveness``)
        # A draw no generator can make again (XLA's randperm): only the forward's values.
        lost = draw is not None and draw.lost
        if lost and writes:
            raise CheckpointError(
                f"{call.op} in module '{call.module}' writes in place with random numbers no generator can draw "
                "again (on XLA: randperm), so the recomputation can neither repeat nor keep the write. Write the "
                "result with a separate op (t.copy_(torch.randperm(n))), or call it outside the checkpointed function.")
        decision, why = decide(policy, call, lost, writes, planning)
        spec = self.recompute_spec  # inline, no call per op: this is the per-op path
        rec = Record(call.op, info, decision, sig, meta, call.module, call.tag, draw,
                     None if (spec is None or decision is not RECOMPUTE) else spec(call.out))
        pos, cached = state.record(rec, call.out, versions)
        if self.calls is not None:
            self.calls.append(call)
        if why is PLANNED:  # decided with the whole region at the end of forward
            self.planned.setdefault(id(policy), (policy, []))[1].append(pos)
        if cached is not None and self.cache_keys is not None:
            for t in ((cached,) if isinstance(cached, torch.Tensor) else tensors(cached)):
                self.cache_keys[buffer_key(t)] = pos

    def module_ran(self, module: Any) -> None:
        """fn calls ``module`` (``_hooks.user_hooks``): the region notes its train/eval mode."""
        self.state.as_found.module_ran(module)

    def user_hook(self, hook: Any, args: tuple, forward: bool) -> Any:
        """A user's module hook inside the region (``_hooks.user_hooks``): it runs as without the library,
        once; what it returns is kept for the replay, which does not call it again.

        ``forward``: a forward hook (its last argument is the module's output), else a pre-hook. A hook
        that writes its arguments in place does what the replay cannot repeat (``hook_writes``).
        """
        with _saved.outside_region(), engine_off(self):
            before = [(t, t._version) for t in tensors(args[1:])]
            rng = _seeding.rng_states(self.state.inputs)  # a hook's draws are no seed fn sets (``seeding``)
            result = hook(*args)
            self.state.hook_drew(_seeding.hook_draws(rng, len(self.state.records)))
            written = [t for t, v in before if t._version != v]
            if written:
                result = hook_writes(hook, args, result, written, forward)
                self.hook_wrote(written)
            # What is kept of it (``hook_values``) is made here too: not fn's ops either.
            kept = None if result is None else tree_map(
                lambda t: self.hook_value(t) if isinstance(t, torch.Tensor) else t, result)
            self.state.hook_ran(hook, args[0] if args else None, kept)
        return result

    # -- what autograd saves ----------------------------------------------------------------------
    def pack(self, t: torch.Tensor) -> Slot:
        """Autograd saved ``t`` during the forward: the slot autograd keeps instead."""
        raise NotImplementedError

    def unpack(self, index: int) -> torch.Tensor:
        """fn unpacks what autograd saved during its own forward (``autograd.grad`` inside fn)."""
        if self.recorder is not None:
            self.recorder.refuse("fn unpacks a saved tensor during its forward (autograd.grad inside fn)")
        return self._early_out(self.early[index])

    # What a record keeps of a recomputed op's outputs for the replay's stand-ins (None: nothing), and
    # the storage of each kept output -> its position (None: not tracked); set by the device's class.
    recompute_spec: Optional[Callable[[Any], Any]] = None
    cache_keys: Optional[dict[Any, int]] = None

    # -- the device's own steps (``EagerForward``, ``XlaForward``) ---------------------------------
    # XLA: notes the outputs of each op (``XlaForward.made``); eager needs nothing (every write is an op).
    made: Optional[Callable[[list[torch.Tensor]], None]] = None

    def ended(self) -> None:
        """fn returned and every op is decided: what the device checks before the forward's end is built on."""

    def uncounted_writes(self, slots: list[int]) -> None:
        """An op wrote what these slots saved and autograd did not count it (rrelu's noise): fine on eager."""

    def skipped(self, func: Any, info: OpInfo, args: tuple, kwargs: dict) -> Any:
        """Run an op the engine does not record (a view, a detach; on XLA torch_xla's in-place trace)."""
        raise NotImplementedError

    def before_writes(self, info: OpInfo, args: tuple, kwargs: dict) -> None:
        """An op that writes in place (``info.writes``) is about to run."""
        raise NotImplementedError

    def _early_out(self, t: torch.Tensor) -> torch.Tensor:
        """A saved tensor fn unpacks during its own forward."""
        raise NotImplementedError

    def hook_value(self, t: torch.Tensor) -> HookValue:
        """What the region keeps of a tensor a user hook returned (``hook_values``)."""
        raise NotImplementedError

    def hook_wrote(self, written: list[torch.Tensor]) -> None:
        """A user hook wrote these region values in place, unseen by the mode (``hook_values.hook_writes``)."""
