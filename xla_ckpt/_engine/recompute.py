"""Backward of a region: recompute what autograd saved, from the recorded program or by running fn again.

The first unpack of a slot (``region.py``) calls ``recompute``, which returns what autograd saved. On XLA,
a region whose forward was recorded (``_engine.direct``) replays that ATen program; otherwise ``fn`` runs
again under the replay mode (``_engine.replay``), from the region's inputs (a copy taken before fn's first
write to one, a stand-in for an input backward never reads), with the forward's autocast state. On XLA
every value the recompute starts from is fenced on the incoming gradient (``_record.replay_state.Fence``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Collection, Optional

import torch
from torch.utils._pytree import tree_map

from xla_ckpt._base import compat as _compat
from xla_ckpt._engine import offload as _offload
from xla_ckpt._engine import seeding as _seeding
from xla_ckpt._hooks import saved as _saved
from xla_ckpt._hooks import user_hooks
from xla_ckpt._base import xla as _xla
from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._record.record import LEAF_TYPES, tensors
from xla_ckpt._record.spec import stand_in
from xla_ckpt._engine.replay import ReplayMode
from xla_ckpt._record.replay_state import Fence, displaced, settle_xla
from xla_ckpt._engine.forward import detach_unseen, engine_off
from xla_ckpt._engine.hook_values import HookValue
from xla_ckpt._engine.entries import Absent
from xla_ckpt._engine.outside_writes import outside_writes
from xla_ckpt._engine.state import RegionState

__all__ = ["recompute", "Recomputation"]


def _as_cacheable(d: torch.Tensor, cacheable: bool) -> torch.Tensor:
    """``d``, a non-leaf (an alias) when the forward's input was not one autocast caches casts of.

    Autocast caches the cast of a leaf that requires grad: a block whose input is the previous layer's
    output (a non-leaf) casts it at each linear in forward, and once in a replay on a leaf, a false
    ``CheckpointError`` (q, k and v projections of one input under the caller's autocast).
    """
    if cacheable or not d.requires_grad or not d.is_leaf:
        return d
    with torch.enable_grad():
        return d.view_as(d)


def _replay_inputs(region: RegionState, fence: Optional[Fence], same: set[int],
                   stand_ins: set[Any]) -> tuple[tuple, dict]:
    """The replay's arguments; ``same`` gets the ids of the forward's inputs handed over as they are,
    ``stand_ins`` the buffers of the stand-ins for inputs backward never reads."""
    index = {id(t): i for i, t in enumerate(region.inputs) if t is not None}

    def start(t: Any) -> Any:
        if isinstance(t, Absent):
            spec, requires_grad, functional, written = region.absent[t.index]
            # Backward reads nothing of this input: a stand-in of its shape (the replay checks), of the
            # forward input's kind (XLA: functionalized or not; a wrapper subclass such as DTensor), or
            # fn's ops (and Python: ``isinstance``, ``to_local()``) on it would replay as others.
            d = stand_in(spec)
            if torch._is_functional_tensor(d) != functional:
                d = torch._to_functional_tensor(d) if functional else torch._from_functional_tensor(d)
            d.requires_grad_(requires_grad)
            if written and requires_grad:
                with torch.enable_grad():  # fn writes to it (through a view, say): a non-leaf, as for ``written`` below
                    d = d.clone()
            d = _as_cacheable(d, region.input_cacheable[t.index])
            stand_ins.add(_xla.buffer_key(d))
            return d
        if not isinstance(t, torch.Tensor):
            return t
        i = index.get(id(t))
        written = i is not None and i in region.pristine
        if i is not None and fence is None and not written and not region.input_grad[i] and not t.requires_grad:
            # The forward's own object, as without the library: a saved input that needs no grad
            # unpacks as the very tensor the forward saved (``ctx.saved_tensors[0] is b``; torch's
            # test_checkpointing_without_reentrant_saved_object_identity), and fn sees in the replay
            # what it saw in the forward (an ``nn.Parameter`` stays one; a detached alias would not).
            same.add(id(t))
            return t
        base = region.backward.start(region.pristine[i]) if written and i is not None else t
        d = base.detach()
        if fence is not None and _xla.is_xla(d):
            d = fence.apply(d)  # before requires_grad_: backward runs with grad mode off
        d = d.detach().requires_grad_(region.input_grad[i] if i is not None else t.requires_grad)
        if written:
            # fn writes to this input: replay on a fresh copy of its value before the first write
            # (a non-leaf, so the replayed in-place op is allowed on it as it was in forward).
            with torch.enable_grad():
                d = d.clone()
        return d if i is None else _as_cacheable(d, region.input_cacheable[i])

    args, kwargs = region.args, region.kwargs
    if all(map(_flat, args)) and all(map(_flat, kwargs.values())):
        return tuple([start(a) for a in args]), {k: start(v) for k, v in kwargs.items()}
    return tree_map(start, (args, kwargs))


class Recomputation:
    """One recompute of a region: what autograd saves while it runs, handed back by ``run``.

    Args:
        state: the region, after its forward.
    """

    def __init__(self, state: RegionState) -> None:
        self.state = state
        self.outputs: list[Any] = []
        self.replay: Optional[ReplayMode] = None
        self.hooks = 0  # user module hooks the replay reached so far
        self.same: set[int] = set()  # ids of the forward's inputs the replay runs on as they are
        self.removed: Optional[str] = None  # why the replay may differ: a hook removed since (``module_called``)

    def pack(self, t: torch.Tensor) -> Any:
        """Autograd saved ``t`` in the recompute: the tensor the forward's slot at this index stands for."""
        # Detached: the throwaway recompute graph must not hold its own outputs through their
        # grad_fn (softmax, exp save their result): a cycle through C++ that Python's GC cannot
        # break. A detached alias is what an autograd.grad inside fn unpacks during the replay.
        d = self.state.outside.kept.get(len(self.outputs))  # an outside tensor: the forward's, as autograd
        if d is None:
            # Only a value backward reads from the replay is checked: a slot the forward's outside tensor
            # fills is not read from here, whatever the replay computed for it (a stand-in's view included).
            garbage = self.replay.garbage if self.replay is not None else ()
            if garbage and _xla.buffer_key(t) in garbage:
                raise CheckpointError(
                    "internal: backward would read a value the liveness analysis found unneeded (the output of an "
                    "op it skipped, or a region input). Please report this with the function; checkpoint(..., "
                    "verify=True) runs every op and avoids it.")
            # An input the replay got as it is, needing no grad (no graph to cycle through): itself.
            d = t if self.same and id(t) in self.same and not t.requires_grad else detach_unseen(t, self)
        self.outputs.append(d)
        return d

    def user_hook(self, hook: Any, args: tuple) -> Any:
        """A user's module hook reached in the replay: not called again; what it returned in the forward.

        Matched to the forward's next call of the same hook on the same module (a hook removed since
        the forward is skipped over), or of the same hook code where fn registers the hook anew each call.
        A hook the forward did not call here (registered after it) is not called either: without the library
        it would not have run for this forward at all.
        """
        results, module = self.state.hook_results, args[0] if args else None
        j = _match(results, self.hooks, hook, module)
        if j is None:
            return None
        self.hooks = j + 1
        result = results[j][2]
        if result is None:
            return None
        start, hidden = self.state.backward.start, lambda: engine_off(self)
        return tree_map(lambda v: v.stand_in(start, hidden, hook, module) if isinstance(v, HookValue) else v, result)

    def module_called(self, module: Any, registered: Collection[Any]) -> None:
        """The replay calls ``module``, whose user hooks are ``registered`` now. A hook that returned new
        inputs or a new output for it in the forward and is gone (``handle.remove()`` between forward and
        backward, a one-shot hook removing itself) cannot hand that back: fn run again computes other
        values there. Noted, not raised: where nothing recomputed reads them (everything saved) the replay
        is exact; where something does, its CheckpointError (an outside tensor whose values differ, naming
        neither hook nor cause) gets the hook as its likely cause (``run``). XLA's program runs no hooks."""
        if self.removed is not None:
            return
        for j in range(self.hooks, len(self.state.hook_results)):
            hook, m, result = self.state.hook_results[j]
            if m is module and result is not None and not any(_same(hook, h) for h in registered):
                self.removed = (
                    f"Likely cause: the forward hook or pre-hook {getattr(hook, '__name__', hook)!r} of module "
                    f"{type(module).__name__} returned new inputs or a new output in the checkpointed forward and "
                    "was removed before backward; the recomputation runs fn again without it and cannot hand back "
                    "what it returned. Remove the hook after backward (or return None from it), or register it "
                    "on a module outside the checkpointed region."
                )
                return

    def run(self) -> list[Any]:
        """Recompute what autograd saved: the recorded program (XLA), or ``fn`` run again."""
        region = self.state
        region.check_inputs()
        region.outside.check(region.name)
        # What the recompute starts from is made with the caller's dispatch modes (a profiler, an op
        # counter around backward) taken off the stack, as the forward made its inputs: on XLA a tensor
        # a factory op makes under any mode is not functionalized (torch_xla wraps it only when no mode
        # intercepts), and fn's in-place ops on it replay as other ops (bernoulli_ for the forward's
        # bernoulli). fn's own recomputed ops still pass through those modes (FlopCounterMode counts them).
        with _compat.without_callers_modes():
            _offload.prefetch(region.host)  # this region's host copies, and the next region's in backward order
            fence = region.backward.fence()
            program = region.backward.program
            stand_ins: set[Any] = set()
            if program is None:
                args, kwargs = _replay_inputs(region, fence, self.same, stand_ins)
        if program is not None:
            with contextlib.ExitStack() as stack:
                for device_type in region.autocast.types:  # the recorded ops are autocast's outputs already
                    stack.enter_context(torch.autocast(device_type, enabled=False))
                outputs = program.run(region, fence, _barrier)
            region.outside.refresh()
            _settle_later()
            return outputs
        if region.sets_xla_rng:
            raise CheckpointError(
                f"xla_ckpt: {region.name} sets torch_xla's seed itself (xm.set_rng_state, or a torch_xla.sync() / "
                "mark_step, which derives the next seed, inside the checkpointed function): recomputing it runs the "
                "function again, which sets the seed again in backward, and every later draw of the step would "
                "differ from the plain step's. Set the seed or sync before or after the checkpointed call.")
        if fence is not None:
            _barrier(tensors((args, kwargs)) + [fence.zero])
        replay = self.replay = ReplayMode(region, fence, self, stand_ins)
        try:
            with contextlib.ExitStack() as stack:
                if region.outside_written:
                    kept = region.backward.kept(region)
                    stack.enter_context(outside_writes(region.outside_written, region.name, kept))
                # The forward's nesting count and an empty cast cache too: which weight casts fn
                # runs depends on both (``_record/autocast.py``).
                stack.enter_context(region.autocast.restored())
                stack.enter_context(torch.enable_grad())
                stack.enter_context(_saved.recomputing(self))
                stack.enter_context(user_hooks.guarding())
                stack.enter_context(region.backward.visible())
                stack.enter_context(_seeding.GeneratorsRestored(region.sets_cpu_rng, region.records))  # fn's seeds
                stack.enter_context(replay)
                region.fn(*args, **kwargs)
        except CheckpointError as e:
            if self.removed is None:
                raise
            raise CheckpointError(f"{e} {self.removed}") from e
        finally:
            self.replay = None
            _settle_later()
        region.outside.refresh()  # fn's own writes in the replay (running statistics) are not the caller's
        if replay.pos != len(region.records) or len(self.outputs) != region.n_packed:
            raise CheckpointError(
                f"recomputation ran {replay.pos} ops and saved {len(self.outputs)} tensors; the forward ran "
                f"{len(region.records)} ops and saved {region.n_packed}. The checkpointed function must run the "
                "same ops on recompute."
            )
        return self.outputs


def recompute(state: RegionState) -> list[Any]:
    """What autograd saved in the region's forward, recomputed (by slot index)."""
    if state.backward.program is not None:
        # The recorded program runs ATen ops on the forward's tensors and none of fn's Python: no module
        # slot, mode, attribute or parametrization is read, so nothing needs putting back around it.
        return Recomputation(state).run()
    with state.as_found.restored():
        return Recomputation(state).run()


_queued: set[int] = set()  # graph tasks (backward calls) whose end puts torch_xla's base seed back


def _settle_later() -> None:
    """A replayed XLA draw moved torch_xla's base seed (``_record.replay_state.settle_xla``): put it back at the
    end of this backward (one throwaway draw per update since the last sync, so once per backward, not
    per region), or now when no backward runs (a saved tensor unpacked by hand)."""
    if not displaced():  # the common case: no XLA draw was replayed
        return
    task = torch._C._current_graph_task_id()
    if task == -1:
        settle_xla(task)
        return
    if task in _queued:
        return
    _queued.add(task)

    def settle() -> None:
        _queued.discard(task)
        settle_xla(task)

    torch.autograd.Variable._execution_engine.queue_callback(settle)


def _barrier(tensors_: list[torch.Tensor]) -> None:
    # Where the compiler honours it (TPU/GPU), the barrier also pins the recompute after the gradient.
    xla = [t for t in tensors_ if _xla.is_xla(t)]
    if xla and _xla.hardware_type(xla[0].device) != "CPU":
        _xla.optimization_barrier_(xla)


def _flat(a: Any) -> bool:
    """A region argument that is no container: tree_map would hand it to ``start`` as it is."""
    return isinstance(a, (torch.Tensor, Absent)) or type(a) in LEAF_TYPES


def _same(a: Any, b: Any) -> bool:
    """One hook, or the same hook code registered anew: fn registers a hook each call (``h = self.proj.
    register_forward_hook(lambda ...)`` ... ``h.remove()``), so its replay registers another function object."""
    if a is b:
        return True
    code = getattr(a, "__code__", None)
    return code is not None and code is getattr(b, "__code__", None)


def _match(results: list, start: int, hook: Any, module: Any) -> Optional[int]:
    """The forward's next result of ``hook`` on ``module`` from ``start`` (a hook removed since is skipped
    over), else the next of a hook with its code: fn registered it anew for this call."""
    for j in range(start, len(results)):
        if results[j][0] is hook and results[j][1] is module:
            return j
    for j in range(start, len(results)):
        if results[j][1] is module and _same(results[j][0], hook):
            return j
    return None
