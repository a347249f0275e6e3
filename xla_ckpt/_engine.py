"""The selective checkpoint engine: per-op SAVE / OFFLOAD / RECOMPUTE decisions, replayed by position.

Forward (``_ForwardMode``): ``fn`` runs under a dispatch mode; each ATen op becomes an ``OpCall`` that
the policy decides on and a ``Record`` of what the replay must reproduce (``_record.py``). SAVE
outputs are cached (detached aliases); OFFLOAD outputs too, then moved to a host tier at the end of
forward (``_offload.py``); everything autograd saves inside the region is packed as a
slot handle instead of a tensor. At the end of forward the region keeps only what backward can
read (``_retain.py``). Backward: the first unpack of a slot recomputes (``_recompute.py``): the
recorded ATen program on XLA (``_direct.py``), else ``fn`` again under the replay mode
(``_replay.py``), which hands out cached outputs at SAVE positions and recomputes and checks the rest.

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

import contextlib
import functools
import weakref
from dataclasses import replace
from typing import Any, Callable, Mapping, Optional

import torch
from torch.utils._pytree import tree_map

from xla_ckpt import _compat, _compiled, _modules, _offload, _recompute, _retain, _saved, _xla
from xla_ckpt._direct import Program, Recorder
from xla_ckpt._external import Watch, owner_module, watch_outside
from xla_ckpt._params import param_source
from xla_ckpt._policy import MUST_RETURN, Decision, OpCall, Policy, selects_by_tag
from xla_ckpt._forward import ForwardMode, detach_unseen
from xla_ckpt._liveness import Dataflow
from xla_ckpt._plan import plans
from xla_ckpt._record import CheckpointError, OpInfo, Record, fn_name as _name, out_scan, spec_of, stand_in, tensors
from xla_ckpt._replay import ReplayMode
from xla_ckpt._torch_args import TORCH_ARGS, torch_call
from xla_ckpt._replay_state import Draw as _Draw, autocast_state as _autocast_state, devices as _devices
from xla_ckpt.policies import resolve

__all__ = ["checkpoint", "CheckpointError"]

SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE
# XLA regions replay their recorded program where they can (``_direct``); tests switch it off to
# exercise the general replay on XLA too.
DIRECT = [True]


class _Slot(_saved.Packed):
    """Stands in for a tensor autograd saved inside a region; unpacking triggers the recompute."""

    __slots__ = ("region", "index")

    def __init__(self, region: "_Region", index: int) -> None:
        self.region = region  # one way only: a region that held its slots would be a cycle (freed late)
        self.index = index

    def unpack(self) -> torch.Tensor:
        return self.region.unpack(self.index)


class _Used:
    """Marks a recomputed tensor already handed out (a second backward needs a fresh recompute)."""


_USED = _Used()


class _Region:
    """One checkpointed call: its inputs, decisions, cached outputs and recompute."""

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, policy: Policy, verify: bool) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.verify = verify
        self.inputs: list[Optional[torch.Tensor]] = tensors((args, kwargs))  # None: not needed by backward
        devices = _devices(self.inputs)
        self.policies = [policy]
        self.autocast = _autocast_state(devices)
        self.on_xla = any(d.type == "xla" for d in devices)
        self.records: list[Record] = []
        self.cache: dict[int, tuple[Any, tuple[tuple[weakref.ref, int], ...]]] = {}
        # The latest op, decided when the next arrives (so a tag on its output can still name it).
        self.pending: Optional[tuple[OpCall, Policy, OpInfo, tuple, Optional[_Draw], tuple, tuple]] = None
        # What autograd saved, while the forward runs (eager: detached aliases; XLA: the tensors, see
        # pack): an autograd.grad inside fn unpacks it before any recompute could exist. None after
        # forward, so the cycle region -> tensor -> grad_fn -> slot -> region never outlives it.
        self.early: Optional[list[torch.Tensor]] = []
        self.n_packed = 0
        self.recomputed: Optional[list[Any]] = None
        self.replaying: Optional[ReplayMode] = None
        self.grad: Optional[torch.Tensor] = None
        # Region outputs that alias a saved output, weakly, with their version after forward: the
        # caller holds these objects (not our detached aliases) and may modify them in place.
        self.watched: dict[int, list[tuple[weakref.ref, int]]] = {}
        # Inputs fn writes to in place: the replay starts from a copy taken before the first write.
        self.input_keys = {_xla.buffer_key(t): i for i, t in enumerate(self.inputs)}
        self.pristine: dict[int, torch.Tensor] = {}
        self.cache_keys: dict[Any, int] = {}  # eager: storage of each saved output -> its position
        self.pending_written = False  # the pending op's output was written in place before its decision
        # What autograd saved: storage -> slot indices, and each tensor's version when saved; slots
        # whose tensor fn wrote to after saving it (autograd would refuse them at backward).
        self.packed_keys: dict[Any, list[int]] = {}
        self.packed_versions: list[tuple[weakref.ref, int]] = []
        self.dirty: set[int] = set()
        self.input_versions: tuple[int, ...] = ()
        self.flow: Optional[Dataflow] = Dataflow(self.inputs)  # until the end of forward
        self.absent: dict[int, tuple] = {}  # inputs backward does not read: (shape, stride, dtype, device, requires_grad, functional)
        self.host: Optional[_offload.Link] = None  # the OFFLOAD entries moved to the host tier (_offload)
        self.outside = Watch()  # outside tensors backward reads: versions, the replay's reads (_external)
        # XLA: the forward's ops, recorded until the end of forward, and the program replayed in
        # place of fn when it can be (``_direct``); None: the general replay runs fn again.
        self.recorder: Optional[Recorder] = Recorder() if (self.on_xla and not verify and DIRECT[0]) else None
        self.program: Optional[Program] = None
        # Planning policies (``_plan``): every OpCall until the end of forward, and per planner the
        # positions it decides (provisionally saved until then).
        self.calls: Optional[list[Optional[OpCall]]] = [] if plans(policy) else None
        self.planned: dict[int, tuple[Policy, list[int]]] = {}

    # -- forward ------------------------------------------------------------------------------
    def before_write(self, targets: list[torch.Tensor]) -> None:
        """An eager in-place op is about to write ``targets``: the write is judged here, where it happens.

        A region input gets a copy of its value before the first write (the replay starts from it);
        a saved output (or the latest op's, still undecided) is demoted to recompute, so the replay
        runs the op and then the write again instead of writing twice into the forward's value.
        """
        for t in targets:
            key = _xla.buffer_key(t)
            self.dirty.update(self.packed_keys.get(key, ()))
            i = self.input_keys.get(key)
            if i is not None and i not in self.pristine:
                self.pristine[i] = self.inputs[i].detach().clone()
            pos = self.cache_keys.pop(key, None)
            if pos is not None and pos in self.cache:
                del self.cache[pos]
                self.records[pos] = replace(self.records[pos], decision=RECOMPUTE)
            if self.pending is not None and not self.pending_written:
                self.pending_written = any(_xla.buffer_key(o) == key for o in tensors(self.pending[0].out))

    def on_xla_write(self, old: torch.Tensor) -> None:
        key = _xla.buffer_key(old)
        self.dirty.update(self.packed_keys.get(key, ()))
        i = self.input_keys.get(key)
        if i is not None and i not in self.pristine:
            self.pristine[i] = old  # the value before the write (XLA tensors are immutable underneath)

    def on_op(self, call: OpCall, info: OpInfo, draw: Optional[_Draw], sig: tuple, reads: list[torch.Tensor]) -> None:
        """One op of fn ran (``sig``, ``reads``: its arguments before it ran, see ``_record.arg_scan``)."""
        self.flush()
        outs, meta, only_tensors = out_scan(call.out)
        if self.flow is not None:
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
        targets = {_xla.buffer_key(x)} | ({_xla.buffer_key(x._base)} if x._base is not None else set())
        if any(_xla.buffer_key(t) in targets for t in tensors(call.out)):
            self.pending = (replace(call, tag=name),) + self.pending[1:]

    def flush(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            written, self.pending_written = self.pending_written, False
            self._decide(*pending, written=written)

    def _decide(self, call: OpCall, policy: Policy, info: OpInfo, versions: tuple[tuple[weakref.ref, int], ...],
                draw: Optional[_Draw], sig: tuple, meta: tuple, written: bool = False) -> None:
        op = call.op
        planner = False
        if info.mutable or written:
            decision = RECOMPUTE  # a mutation must re-run on the replayed tensors
        elif info.random and self.on_xla:
            # torch_xla's RNG cannot be put back exactly (each sync advances a base seed that can only
            # be set together with the running seed), so on XLA random outputs are kept, not redrawn:
            # exact masks, and the caller's RNG state after backward is the unchecked run's.
            decision = SAVE
        elif plans(policy):
            planner, decision = True, SAVE  # decided with the whole region at the end of forward
        else:
            decision = policy(call)
            if not isinstance(decision, Decision):
                raise TypeError(
                    f"checkpoint policy {policy!r} returned {decision!r} for {op} in module '{call.module}'; "
                    f"{MUST_RETURN}"
                )
        pos = len(self.records)
        if self.calls is not None:
            self.calls.append(call)
        if planner:
            self.planned.setdefault(id(policy), (policy, []))[1].append(pos)
        self.records.append(
            Record(op, info, decision, sig, meta, call.module, call.tag,
                   draw, None if (self.on_xla or decision.keeps) else spec_of(call.out))
        )
        if decision.keeps:  # SAVE, or OFFLOAD (moved to the host tier at the end of forward)
            # Detached aliases: no copy, and no reference cycle through the autograd graph.
            out = call.out
            cached = out.detach() if isinstance(out, torch.Tensor) else tree_map(
                lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out)
            self.cache[pos] = (cached, versions)
            if not self.on_xla:
                for t in tensors(cached):
                    self.cache_keys[_xla.buffer_key(t)] = pos

    def finish_forward(self, outputs: list[torch.Tensor]) -> None:
        self.flush()
        for pos, (_, versions) in list(self.cache.items()):
            if _written(versions):
                # Mutated in place later inside fn: replaying the op (and the mutation) stays exact.
                del self.cache[pos]
                self.records[pos] = replace(self.records[pos], decision=RECOMPUTE)
        self.input_versions = tuple(t._version if t is not None else 0 for t in self.inputs)
        flow, self.flow = self.flow, None
        early, self.early = self.early, None
        planned, self.planned, calls, self.calls = self.planned, {}, self.calls, None
        if self.n_packed == 0:
            # Autograd saved nothing in this region (its outputs need no grad, e.g. a frozen block):
            # it is never replayed, so it keeps nothing and reports nothing.
            self.cache.clear()
            self.cache_keys.clear()
            return
        assert flow is not None and early is not None
        if selects_by_tag(self.policies[0]) and not any(rec.tag for rec in self.records):
            _warn_untagged(self.policies[0], self.fn)
        for policy, positions in planned.values():
            _retain.plan(self, policy, positions, calls or [], flow)
        live = self._keep_only_live(flow, early)
        self.outside = watch_outside(flow, live, self.records, early, owner_module(self.fn), self.on_xla)
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            self.program = recorder.build(self, flow.packed_keys, flow.dep_keys, self.outside.kept)
        self.host = _offload.move_out(self, outputs)
        for ledger in _saved.state.ledgers:
            for t in self.inputs:
                if t is None:
                    continue
                ledger.record(t, param_source(t), grad_fn="region input")
            for pos, (cached, _) in self.cache.items():
                rec = self.records[pos]
                host = isinstance(cached, _offload.Offloaded)
                for t in cached.host_tensors() if host else tensors(cached):
                    ledger.record(t, param_source(t), grad_fn=str(rec.op.overloadpacket), module=rec.module,
                                  tag=rec.tag, offloaded=host)

    def _keep_only_live(self, flow: Dataflow, early: list[torch.Tensor]) -> Optional[frozenset[int]]:
        """Drop what backward cannot read; return the positions the replay runs (see ``_retain``)."""
        return _retain.keep_only_live(self, flow, early)

    def abandon(self) -> None:
        """fn raised: drop what the region holds (nothing it made outlives the call)."""
        self.early = None
        self.recorder = None
        self.cache.clear()
        self.pending = None
        self.calls, self.planned = None, {}

    def watch(self, outputs: list[torch.Tensor]) -> None:
        keys = {}
        for pos, (cached, _) in self.cache.items():
            for t in tensors(cached):
                keys[_xla.buffer_key(t)] = pos
        for t in outputs:
            pos = keys.get(_xla.buffer_key(t if t._base is None else t._base))
            if pos is not None:
                self.watched.setdefault(pos, []).append((weakref.ref(t), t._version))

    def pack(self, t: torch.Tensor) -> Any:
        if _saved.state.recompute is self:
            assert self.recomputed is not None
            # Detached: the throwaway recompute graph must not hold its own outputs through their
            # grad_fn (softmax, exp save their result): a cycle through C++ that Python's GC cannot
            # break. A detached alias is what an autograd.grad inside fn unpacks during the replay.
            garbage = self.replaying.garbage if self.replaying is not None else ()
            if garbage and _xla.buffer_key(t) in garbage:
                raise CheckpointError(
                    "internal: backward would read the output of an op the liveness analysis skipped. Please "
                    "report this with the function; checkpoint(..., verify=True) runs every op and avoids it."
                )
            d = self.outside.kept.get(len(self.recomputed))  # an outside tensor: the forward's, as autograd
            if d is None:
                d = detach_unseen(t, self)
            self.recomputed.append(d)
            return d
        assert self.early is not None
        # On XLA a detach makes a new functional wrapper (~10 us, ~100 per GPT step): the alias is
        # made only if fn unpacks this slot during its forward (see unpack). Eager keeps the alias
        # (``_promote`` may cache it). ``early`` is dropped when the forward ends: no lasting cycle.
        self.early.append(t if self.on_xla else detach_unseen(t, self))
        # Autograd checks a saved tensor's version at unpack; our slot must do the same (see unpack).
        self.packed_versions.append((weakref.ref(t), t._version))
        key = _xla.buffer_key(t)
        n = self.n_packed
        slots = self.packed_keys.get(key)
        if slots is None:
            self.packed_keys[key] = [n]
        else:
            slots.append(n)
        if self.flow is not None:
            self.flow.pack(key)
        self.n_packed = n + 1
        return _Slot(self, n)

    def capture_grad(self, grad: torch.Tensor) -> None:
        if self.grad is None and grad is not None and grad.numel() > 0:
            self.grad = grad.detach()

    # -- backward -----------------------------------------------------------------------------
    def cached(self, pos: int, func: Any, rec: Record) -> Any:
        """The forward's output at a SAVE / OFFLOAD position, after checking nobody modified it since."""
        cached, versions = self.cache[pos]
        if _written(versions + tuple(self.watched.get(pos, ()))):
            kept = "offloaded" if rec.decision is OFFLOAD else "saved"
            raise CheckpointError(
                f"an output of {func} (module '{rec.module}') that the policy {kept} "
                "was modified in place after the checkpointed forward; the gradient would be wrong. Clone it "
                "before modifying it, or let the policy recompute this op."
            )
        if isinstance(cached, _offload.Offloaded):
            cached = cached.fetch()  # back from the host tier (waits for its prefetch)
        if isinstance(cached, tuple) and any(isinstance(t, _retain.Pruned) for t in cached):
            return tuple(stand_in(t.spec) if isinstance(t, _retain.Pruned) else t for t in cached)
        return cached

    def unpack(self, index: int) -> torch.Tensor:
        if self.early is None:
            self._check_inputs()  # the more specific message first: a region input changed after forward
        ref, version = self.packed_versions[index]
        t = _compat.deref(ref)
        if index in self.dirty or (t is not None and t._version != version):
            what = f", output of {type(t.grad_fn).__name__}" if t is not None and t.grad_fn is not None else ""
            raise CheckpointError(
                f"one of the variables needed for gradient computation has been modified by an inplace "
                f"operation (saved tensor #{index}{what} of the checkpointed function {_name(self.fn)}, modified after "
                "autograd saved it). Plain autograd raises the same error here; clone the tensor before "
                "modifying it, or modify a copy."
            )
        if self.early is not None:
            if self.recorder is not None:
                self.recorder.refuse("fn unpacks a saved tensor during its forward (autograd.grad inside fn)")
            t = self.early[index]
            return t.detach() if self.on_xla else t
        if self.recomputed is None or self.recomputed[index] is _USED:
            self._recompute()
        assert self.recomputed is not None
        t = self.recomputed[index]
        self.recomputed[index] = _USED
        return t

    def _recompute(self) -> None:
        _recompute.recompute(self)

    def _check_inputs(self) -> None:
        for i, (t, v) in enumerate(zip(self.inputs, self.input_versions)):
            if t is not None and t._version != v:
                raise CheckpointError(
                    f"input #{i} of the checkpointed function {_name(self.fn)} (a tensor of shape "
                    f"{tuple(t.shape)}) was modified by an inplace operation after the forward (version {v} "
                    f"-> {t._version}); the recomputation needs its value from the forward. Clone it before "
                    "modifying it (autograd raises the same error for tensors it saves)."
                )

def _written(versions: tuple[tuple[weakref.ref, int], ...]) -> bool:
    for ref, v in versions:
        t = _compat.deref(ref)
        if t is not None and t._version != v:
            return True
    return False


def checkpoint(
    fn: Callable[..., Any],
    *args: Any,
    policy: Any = "nothing_saveable",
    verify: bool = False,
    use_reentrant: Optional[bool] = None,
    preserve_rng_state: bool = True,
    determinism_check: str = "default",
    context_fn: Any = None,
    debug: bool = False,
    fn_kwargs: Optional[Mapping[str, Any]] = None,
    **kwargs: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)``, letting ``policy`` decide per op what is saved or recomputed.

    Args:
        fn: the function (or module) to run; it must run the same ops when recomputed.
        *args, **kwargs: its arguments (tensors or not; inputs need not require grad).
        policy: a registered name (``xla_ckpt.policies.names()``) or any ``(OpCall) -> Decision``.
        verify: also recompute the outputs the policy saved, and raise a ``CheckpointError`` naming
            the first op (and module) whose recomputed value differs from the saved one. Costs the
            full recompute; turn it on when you suspect non-determinism.
        use_reentrant, preserve_rng_state, determinism_check, context_fn, debug:
            ``torch.utils.checkpoint.checkpoint``'s keywords, so migrated calls keep them: each has
            torch's meaning or raises an error naming it and the fix (table in ``_torch_args``); a
            ``context_fn`` built by ``create_selective_checkpoint_contexts`` becomes the policy.
            They are never passed to ``fn``.
        fn_kwargs: keyword arguments for ``fn`` under any name, also ``policy``, ``verify`` or one
            of torch's (loose ``**kwargs`` with those names are taken by ``checkpoint`` itself).

    Gradients equal running ``fn`` directly, or a ``CheckpointError`` says why they cannot: RNG states
    (CPU, CUDA, XLA) and autocast are restored for the recompute. Nested calls run inside the outer
    region, each under its own policy. Under ``torch.no_grad()`` ``fn`` simply runs.

    Example:
        >>> y = xla_ckpt.checkpoint(block, x, policy="dots_saveable")
        >>> y = xla_ckpt.checkpoint(attn, x, use_reentrant=False, fn_kwargs={"policy": "causal"})
    """
    policy, kwargs = torch_call(policy, kwargs, fn_kwargs, use_reentrant, preserve_rng_state, determinism_check,
                                context_fn, debug)
    pol = resolve(policy)
    if not isinstance(verify, bool):
        raise TypeError(f"xla_ckpt.checkpoint: verify must be True or False, got {verify!r}")
    if _compat.is_compiling():
        if any(k in TORCH_ARGS for k in kwargs):  # fn's own keyword named like torch's: not torch's
            fn, kwargs = functools.partial(fn, **kwargs), {}
        return _compiled.checkpoint(fn, args, kwargs, pol)  # Dynamo cannot trace the engine: torch's SAC marks
    st = _saved.state
    if not torch.is_grad_enabled() or st.recompute is not None:
        # No graph to save for, or we are inside a replay (the replay mode sees these ops).
        return fn(*args, **kwargs)
    if st.region is not None:
        region = st.region
        if plans(pol) and region.calls is None:
            region.calls = [None] * len(region.records)  # ops before this one are not the planner's
        region.policies.append(pol)
        try:
            return fn(*args, **kwargs)  # each op is decided under the policy current when it ran
        finally:
            region.policies.pop()
    region = _Region(fn, args, kwargs, pol, verify)
    try:
        # On XLA, torch_xla lowers einsum below dispatch modes: run its composite so policies see its bmm.
        visible = _xla.einsum_visible() if region.on_xla else contextlib.nullcontext()
        with _saved.hooks_for(), _modules.tracking(), visible, ForwardMode(region):
            st.region = region
            try:
                out = fn(*args, **kwargs)
            finally:
                st.region = None
        region.finish_forward(tensors(out))  # outside the mode: its own detach() calls are not the function's ops
    except BaseException:
        region.abandon()
        raise
    region.watch(tensors(out))
    if region.on_xla:
        for t in tensors(out):
            if t.requires_grad:
                # Weakly: the hook lives as long as the output's graph node, which the caller may keep
                # (e.g. the loss) after backward; the region, its inputs and its cache must not.
                t.register_hook(functools.partial(_capture_grad, weakref.ref(region)))
    return out


def _warn_untagged(policy: Policy, fn: Any) -> None:
    """A name policy on a region with no tag keeps nothing by name: say so, once per function and policy."""
    name = _name(fn)
    _offload.warn_once(
        f"untagged {policy!r} {name}",
        f"xla_ckpt: the policy {policy!r} of {name} selects values by tag name, but no op of this region "
        "was tagged (xla_ckpt.tag), so its names match nothing here (models that do not tag, such as Hugging "
        "Face's, have no tags). Tag the values in the model's forward, or choose by op instead "
        "(dots_with_no_batch_dims_saveable, policies.save_ops). Said once per function and policy.")


def _capture_grad(ref: "weakref.ref[_Region]", grad: torch.Tensor) -> None:
    region = ref()
    if region is not None:
        region.capture_grad(grad)
