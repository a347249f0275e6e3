"""The selective checkpoint engine: per-op SAVE / OFFLOAD / RECOMPUTE decisions, replayed by position.

Forward (``forward.py``): ``fn`` runs under a dispatch mode; each ATen op becomes an ``OpCall`` that
the policy decides on and a ``Record`` of what the replay must reproduce (``_record/record.py``). SAVE
outputs are cached (detached aliases); OFFLOAD outputs too, then moved to a host tier at the end of
forward (``offload.py``); everything autograd saves inside the region is packed as a slot handle
instead of a tensor. At the end of forward the region keeps only what backward can read
(``retain.py``). Backward: the first unpack of a slot recomputes (``recompute.py``): the recorded
ATen program on XLA (``direct.py``), else ``fn`` again under the replay mode (``replay.py``), which
hands out cached outputs at SAVE positions and recomputes and checks the rest. The region's state
(``state.py``) is read by all of them and changed only by its own methods.

What the region protects, so that a gradient is exact or a ``CheckpointError`` (never silently wrong):
- a saved output modified in place later (inside fn: the op is demoted to recompute; after the
  forward: an error at backward);
- region inputs: fn's own in-place updates replay from a copy taken before the first write; an
  input modified after the forward is an error at backward, as autograd's version check is;
- the RNG stream: restored for the replay, advanced by saved random ops too, checked at the end
  (another thread drawing from the same generator is an error, not a different dropout mask).

On XLA the recomputation is fenced on the incoming gradient (see ``Fence``), so the compiler can
neither merge it with its forward twin (CSE) nor schedule it before the gradient exists.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import torch

from xla_ckpt._base import compat as _compat
from xla_ckpt._base import modules as _modules
from xla_ckpt._base.errors import CheckpointError, fn_name as _name, refuse_torchscript
from xla_ckpt._base.warn import warn_once
from xla_ckpt._compile import marks as _compiled
from xla_ckpt._engine import offload as _offload
from xla_ckpt._engine import recompute as _recompute
from xla_ckpt._engine import retain as _retain
from xla_ckpt._engine import seeding as _seeding
from xla_ckpt._engine.device import device_for
from xla_ckpt._engine.forward import Forward
from xla_ckpt._engine.forward_mode import ForwardMode
from xla_ckpt._engine.outside import owner_module, watch_outside
from xla_ckpt._engine.entries import Away
from xla_ckpt._engine.state import RegionState
from xla_ckpt._hooks import saved as _saved
from xla_ckpt._hooks import user_hooks
from xla_ckpt._hooks.params import param_source
from xla_ckpt._record.opcall import Policy, selects_by_tag
from xla_ckpt._record.record import tensors

__all__ = ["run", "CheckpointError"]


class _Used:
    """Marks a recomputed tensor already handed out (a second backward needs a fresh recompute)."""


_USED = _Used()


class _Region:
    """One checkpointed call: its state, its forward while it runs, and its latest recompute's results."""

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, policy: Policy, verify: bool) -> None:
        inputs = tensors((args, kwargs))
        self.state = RegionState(fn, args, kwargs, verify, inputs, device_for(inputs))
        self.policy = policy
        # Until the end of forward. None after it, so the cycle region -> tensor -> grad_fn -> slot ->
        # region (through what the forward holds) never outlives the forward.
        self.forward: Optional[Forward] = self.state.device.forward(self.state, policy, self)
        self.recomputed: Optional[list[Any]] = None

    # -- the forward's end, as named steps ------------------------------------------------------------
    def end_forward(self, outputs: list[torch.Tensor]) -> None:
        """fn returned: keep only what backward reads, build the replay, move what is offloaded, report."""
        fw, self.forward = self.forward, None
        assert fw is not None
        fw.flush()
        fw.ended()
        state = self.state
        state.demote_written()  # kept outputs fn wrote to later: recomputed (op and write replay)
        if state.n_packed == 0:
            state.release()  # autograd saved nothing here: never replayed
            state.settle(state.outside, None)
            return
        if selects_by_tag(self.policy) and not any(rec.tag for rec in state.records):
            _warn_untagged(self.policy, state.fn)
        for policy, positions in fw.planned.values():
            _retain.plan(state, policy, positions, fw.calls or [], fw.flow)
        live = _retain.keep_only_live(state, fw.flow, fw.early)
        outside = watch_outside(fw.flow, live, state.records, fw.early, owner_module(state.fn),
                                state.device.outside())
        if fw.recorder is not None:
            state.backward.settle(fw.recorder.build(state, fw.calls or [], fw.flow.packed_keys, fw.flow.dep_keys,
                                                    outside.kept))
        host = _offload.move_out(state, outputs)
        state.settle(outside, host)
        if __debug__:
            state.check()  # the kept-set invariant, once per region (every test run checks it)
        _report(state)

    def abandon(self) -> None:
        """fn raised: drop what the region holds (nothing it made outlives the call)."""
        self.forward = None
        self.state.release()

    # -- backward ---------------------------------------------------------------------------------
    def unpack(self, index: int) -> torch.Tensor:
        state = self.state
        # Autograd checks a saved tensor's version at unpack; the slot does the same (inline: per op).
        ref, version = state.packed_versions[index]
        t = ref()  # ``_base.compat.deref``, inline
        if t is not None:
            fix = getattr(t, "_fix_weakref", None)
            if fix is not None:
                fix()
        if index in state.dirty or (t is not None and t._version != version):
            if self.forward is None:
                state.check_inputs()  # the more specific message first: a region input changed after forward
            raise _modified(state, index, t)
        if self.forward is not None:
            return self.forward.unpack(index)
        if self.recomputed is None or self.recomputed[index] is _USED:
            self.recomputed = None
            self.recomputed = _recompute.recompute(state)
        t = self.recomputed[index]
        self.recomputed[index] = _USED
        return t


def _modified(state: RegionState, index: int, t: Optional[torch.Tensor]) -> CheckpointError:
    what = f", output of {type(t.grad_fn).__name__}" if t is not None and t.grad_fn is not None else ""
    if t is not None and t._version == state.packed_versions[index][1]:
        # Marked stale by storage (``RegionState.writing``), its version unmoved: autograd did not count it.
        return CheckpointError(
            f"saved tensor #{index}{what} of the checkpointed function {state.name} was written in place "
            "through a tensor that does not share its version counter (a .data write, or a piece of "
            "torch.unsafe_split / unsafe_chunk overlapping it): plain autograd reads the written values in "
            "backward, which the recomputation cannot give it. Write a clone instead, or run this code "
            "outside the checkpointed function.")
    return CheckpointError(
        f"one of the variables needed for gradient computation has been modified by an inplace "
        f"operation (saved tensor #{index}{what} of the checkpointed function {state.name}, modified after "
        "autograd saved it). Plain autograd raises the same error here; clone the tensor before "
        "modifying it, or modify a copy."
    )


def _report(state: RegionState) -> None:
    """What the region keeps, to every open ``saved_activations()`` ledger."""
    for ledger in _saved.state.ledgers:
        for t in state.inputs:
            if t is None:
                continue
            ledger.record(t, param_source(t), grad_fn="region input")
        for pos, (cached, _) in state.cache.items():
            rec = state.records[pos]
            host = isinstance(cached, Away)
            for t in cached.host_tensors() if host else tensors(cached):
                ledger.record(t, param_source(t), grad_fn=str(rec.op.overloadpacket), module=rec.module,
                              tag=rec.tag, offloaded=host)


def run(fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any], policy: Policy, verify: bool = False) -> Any:
    """The engine's entry for one region: ``fn(*args, **kwargs)`` with ``policy`` deciding per op.

    Every value is resolved by the caller (``xla_ckpt.checkpoint`` and ``checkpointed`` in ``_api``): ``policy``
    a policy object, ``verify`` a bool, ``kwargs`` ``fn``'s own keyword arguments (torch's checkpoint keywords
    already checked and taken out). The user's documentation is ``xla_ckpt.checkpoint``'s.

    Example:
        >>> y = run(block, (x,), {}, xla_ckpt.policies.dots_saveable)
    """
    refuse_torchscript(fn, "xla_ckpt.checkpoint")
    if _compat.is_compiling():
        # fn's own keyword named like one of torch's checkpoint's: bound here, or torch's checkpoint would take
        # it. Here and not in `_compile/marks.py`: there, Dynamo's trace of a region that breaks its graph
        # (an SPMD annotation inside a block) ends elsewhere, and the lazy engine that then runs the region
        # kept 128 KiB more (test_openxla_activation_annotation_inside_regions pins the lazy engine's peak).
        if any(k in _compiled.TORCH_ARGS for k in kwargs):
            fn, kwargs = functools.partial(fn, **kwargs), {}
        # Dynamo cannot trace the engine: torch's SAC marks.
        return _compiled.checkpoint(fn, args, kwargs, policy, _lazy_region)
    st = _saved.state
    if not torch.is_grad_enabled() or st.recompute is not None:
        # No graph to save for, or we are inside a replay (the replay mode sees these ops).
        return fn(*args, **kwargs)
    if st.region is not None:
        with st.region.nested(policy):
            return fn(*args, **kwargs)  # each op is decided under the policy current when it ran
    if _compat.plain_under_func_transform(_name(fn)):  # torch.func: plain PyTorch, warned once (_base/compat)
        return fn(*args, **kwargs)
    if _compat.plain_with_hooks_disabled(_name(fn)):  # disable_saved_tensors_hooks: the same
        return fn(*args, **kwargs)
    if _compat.plain_under_forward_ad(_name(fn)):  # forward-mode AD (dual_level): the same
        return fn(*args, **kwargs)
    region = _Region(fn, args, kwargs, policy, verify)
    device = region.state.device
    try:
        assert region.forward is not None
        rng = _seeding.rng_states(region.state.inputs)  # fn setting a seed itself is told by the chain of draws
        with _saved.forward_of(region.forward), _modules.tracking(), user_hooks.guarding(), device.trace(), \
                ForwardMode(region.forward):
            out = fn(*args, **kwargs)
        region.end_forward(tensors(out))  # outside the mode: its own detach() calls are not the function's ops
        moved = _seeding.moved_outside_ops(rng, region.state.records, region.state.hook_rng)
        region.state.note_rng(_seeding.CPU in moved, any(d.type == "xla" for d in moved))
    except BaseException:
        region.abandon()
        raise
    outputs = tensors(out)
    region.state.watch(outputs)
    device.watch_grad(region.state, outputs)
    return out


@torch._dynamo.disable
def _lazy_region(fn: Callable[..., Any], args: tuple, kwargs: dict, policy: Policy) -> Any:
    """A region Dynamo runs eagerly (a graph break inside it): the engine, Dynamo off for its frames."""
    return run(fn, args, kwargs, policy)


def _warn_untagged(policy: Policy, fn: Any) -> None:
    """A name policy on a region with no tag keeps nothing by name: say so, once per function and policy."""
    name = _name(fn)
    warn_once(
        ("untagged", repr(policy), name),
        f"xla_ckpt: the policy {policy!r} of {name} selects values by tag name, but no op of this region "
        "was tagged (xla_ckpt.tag), so its names match nothing here (models that do not tag, such as Hugging "
        "Face's, have no tags). Tag the values in the model's forward, or choose by op instead "
        "(dots_with_no_batch_dims_saveable, policies.save_ops). Said once per function and policy.")

