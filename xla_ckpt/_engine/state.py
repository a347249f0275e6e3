"""A region's state from its forward to its last backward, and the only code that changes a decision.

The region decides each op once, in forward (``forward.py``); at the end of forward it keeps only what
backward can read (``retain.py``), moves what the policy offloads (``offload.py``), and backward
recomputes the rest (``recompute.py``). All of them read this object; none of them writes it. Its
invariant: **position p is in ``cache`` if and only if ``records[p].decision`` keeps it** (SAVE or
OFFLOAD). The methods under "the kept set" are the only code that changes a decision or the cache,
and each keeps the invariant (``check`` asserts it; the tests call it).

Lifecycle of the fields: ``records``, ``cache``, the input and pack bookkeeping grow during forward;
``outside`` and ``host`` are set once when the forward ends (``settle``); nothing changes during
backward but what backward checks. The device's own algorithms and state (XLA: the recorded program,
the incoming gradient) are in ``device`` and ``backward``, chosen once when the region starts
(``_engine.device``).
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any, Callable, Optional

import torch
from torch.utils._pytree import tree_map

from xla_ckpt._base.errors import CheckpointError, fn_name
from xla_ckpt._base.xla import buffer_key
from xla_ckpt._engine.entries import Absent, Away, Pruned, Versions, written
from xla_ckpt._engine.members import AsFound
from xla_ckpt._engine.outside import Watch, owner_module
from xla_ckpt._record.liveness import aliased_inputs
from xla_ckpt._record.opcall import Decision
from xla_ckpt._record.record import Record, tensors
from xla_ckpt._record.spec import stand_in
from xla_ckpt._record.autocast import Autocast
from xla_ckpt._record.replay_state import devices

__all__ = ["RegionState"]

SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE
_SAME: Any = object()  # demote's default: the record keeps its spec


def _detached(out: Any) -> Any:
    # Detached aliases: no copy, and no reference cycle through the autograd graph.
    if isinstance(out, torch.Tensor):
        return out.detach()
    return tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out)


class RegionState:
    """One checkpointed call's inputs, decisions, kept outputs and bookkeeping (see the module docstring).

    Args:
        fn, args, kwargs: the checkpointed call.
        verify: whether backward recomputes and compares the kept outputs too.
        inputs: the tensors of ``(args, kwargs)``, in ``_record.record.tensors`` order.
        device: the device's algorithms (``_engine.device.Device``), chosen for these inputs.

    Example:
        >>> state = RegionState(block, (x,), {}, False, tensors(((x,), {})), device_for(...))
        >>> pos = state.record(rec, out, versions)   # forward: one op decided
        >>> state.demote(pos)                         # end of forward: nothing reads it
    """

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, verify: bool,
                 inputs: list[torch.Tensor], device: Any) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.verify = verify
        self.inputs: list[Optional[torch.Tensor]] = list(inputs)  # None: not needed by backward
        self.autocast = Autocast.capture(devices(inputs))
        self.device = device
        self.backward = device.backward()  # this region's backward (XLA: its program and fence)
        self.records: list[Record] = []
        self.cache: dict[int, tuple[Any, Versions]] = {}
        # Inputs fn writes to in place: the replay starts from a copy taken before the first write.
        self.input_keys = {buffer_key(t): i for i, t in enumerate(inputs)}
        # As fn got them: a write with a value that needs grad (``t.mul_(w[0, 0])``) makes an input need
        # grad after the forward, and the replay must start from it as the forward did.
        self.input_grad = tuple(t.requires_grad for t in inputs)
        # Whether autocast may cache a cast of the input (a leaf that requires grad, not a view): the
        # replay's inputs are made to match, or fn would cast them a different number of times.
        self.input_cacheable = tuple(t.requires_grad and t.is_leaf and not t._is_view() for t in inputs)
        self.pristine: dict[int, torch.Tensor] = {}
        # Inputs that share memory (one a view of another, the same tensor twice): a replay starting
        # from a copy of one cannot repeat a write on the others, so fn writing one is an error.
        self.aliased = aliased_inputs(self.inputs, self.input_keys)
        self.aliased_write: Optional[int] = None
        # Unread inputs: (shape, stride, dtype, device, requires_grad, functional, written by fn).
        self.absent: dict[int, tuple] = {}
        self.input_versions: tuple[int, ...] = ()
        # What autograd saved: storage -> slot indices, and each tensor's version when saved; slots
        # whose tensor fn wrote to after saving it (autograd would refuse them at backward).
        self.packed_keys: dict[Any, list[int]] = {}
        self.packed_versions: list[tuple[weakref.ref, int]] = []
        self.dirty: set[int] = set()
        # Region outputs that alias a kept output, weakly, with their version after forward: the
        # caller holds these objects (not our detached aliases) and may modify them in place.
        self.watched: dict[int, list[tuple[weakref.ref, int]]] = {}
        self.outside = Watch()  # outside tensors backward reads (``outside.py``)
        self.host: Any = None  # the entries moved to the host tier (``offload.Link``), or None
        # What each user module hook returned in the forward, in call order: the replay hands these
        # out instead of calling the hooks again (``_hooks.user_hooks``).
        self.hook_results: list[tuple[Any, Any, Any]] = []
        self.hook_rng: list[tuple[int, Any]] = []  # what user hooks drew in forward, where (``seeding.hook_draws``)
        self.hook_written: set[int] = set()  # positions whose output a user hook wrote in place (eager)
        # Tensors from outside the region that fn writes in place (a norm's running statistics, a
        # counter): buffer -> (the tensor, its value before fn's first write). The replay runs from
        # those values and leaves the tensors as it found them (``outside_writes.outside_writes``).
        self.outside_written: dict[Any, tuple[Optional[torch.Tensor], torch.Tensor]] = {}
        # The checkpointed module's slots, modules' train/eval modes and parametrize.cached()'s cache as the
        # forward found them: the recompute runs with those (``members.py``: functional_call swaps its own in).
        self.as_found = AsFound(owner_module(fn))
        self.sets_cpu_rng = False  # fn set the CPU generator itself in forward (``seeding.py``)
        self.sets_xla_rng = False  # fn set torch_xla's seed itself in forward (``seeding.py``)

    @property
    def n_packed(self) -> int:
        return len(self.packed_versions)

    @property
    def name(self) -> str:
        return fn_name(self.fn)

    # -- the kept set -------------------------------------------------------------------------
    def record(self, rec: Record, out: Any, versions: Versions) -> tuple[int, Any]:
        """Append the forward's next op; a kept one caches (detached aliases of) ``out``.

        Returns its position and the cached value (None when the op is recomputed).
        """
        pos = len(self.records)
        self.records.append(rec)
        if rec.decision is RECOMPUTE:
            return pos, None
        cached = out.detach() if isinstance(out, torch.Tensor) else _detached(out)  # inline: per op
        self.cache[pos] = (cached, versions)
        return pos, cached

    def demote(self, pos: int, spec: Any = _SAME) -> None:
        """A kept position becomes RECOMPUTE (``spec``: its outputs' shapes, for the replay's stand-ins)."""
        self.cache.pop(pos)
        rec = self.records[pos]
        self.records[pos] = replace(rec, decision=RECOMPUTE, spec=rec.spec if spec is _SAME else spec)

    def demote_written(self) -> None:
        """End of forward: kept outputs fn modified in place later are recomputed (op and write replay)."""
        for pos, (_, versions) in list(self.cache.items()):
            if written(versions):
                self.demote(pos)

    def promote(self, pos: int, value: torch.Tensor, versions: Versions) -> None:
        """A recomputed position keeps ``value`` (its own output, which autograd saved) instead."""
        self.records[pos] = replace(self.records[pos], decision=SAVE)
        self.cache[pos] = (value, versions)

    def to_host(self, pos: int) -> None:
        """A kept position is offloaded (a planner's answer): ``offload.move_out`` moves it."""
        self.records[pos] = replace(self.records[pos], decision=OFFLOAD)

    def on_device(self, pos: int) -> None:
        """An offloaded position stays on the device (no host tier, or the caller holds the value)."""
        self.records[pos] = replace(self.records[pos], decision=SAVE)

    def moved(self, pos: int, entry: Away) -> None:
        """An offloaded position's value now waits in the host tier."""
        assert self.records[pos].decision is OFFLOAD
        self.cache[pos] = (entry, self.cache[pos][1])

    def prune(self, pos: int, outputs: tuple) -> None:
        """A kept multi-output op keeps only some outputs (the others are ``Pruned`` stand-ins)."""
        self.cache[pos] = (outputs, self.cache[pos][1])

    def dead(self, pos: int) -> None:
        """Nothing backward reads comes from this recomputed position: the replay hands out a stand-in."""
        self.records[pos] = replace(self.records[pos], live=False)

    def release(self) -> None:
        """Autograd saved nothing here (e.g. a frozen block): never replayed, it keeps and reports nothing."""
        for pos in list(self.cache):
            self.demote(pos)

    def check(self) -> None:
        """Assert the invariant: p is cached iff ``records[p]`` keeps it."""
        kept = {p for p, r in enumerate(self.records) if r.decision is not RECOMPUTE}
        assert kept == set(self.cache), f"kept {sorted(kept)} but cached {sorted(self.cache)}"

    # -- inputs and what autograd saved ---------------------------------------------------------
    def writing(self, key: Any, before: Callable[[int], torch.Tensor], stale: bool = True,
                input_index: Optional[int] = None, since: Optional[int] = None,
                apart: Optional[Callable[[int], bool]] = None) -> list[int]:
        """fn writes in place to the buffer ``key``: slots saved from it are stale, an input keeps its value.

        ``before(i)`` gives input i's value before the write (eager: a clone; XLA: the old tensor).
        ``stale=False``: a write the op's schema does not declare (a batch norm's running statistics):
        autograd saved the op's inputs before it and does not count the write, so neither do we.
        ``input_index``: the input ``key`` is a view of (XLA, where a view is a buffer of its own).
        ``since`` (eager): slots from this index on were saved since the op before the writing one ended
        (by that op's node after it, or the writing op's before it): returned, not marked, for
        :meth:`settle_writes` to judge by their versions once the write is done.
        ``apart(slot)`` (eager): the write provably misses that earlier slot's elements (a piece of one
        ``unsafe_split``, as ``nn.GRUCell`` writes): judged by its version too, as autograd does.
        """
        later: list[int] = []
        if stale:
            slots = self.packed_keys.get(key, ())
            for s in slots:
                if since is not None and (s >= since or (apart is not None and apart(s))):
                    later.append(s)
                else:
                    self.dirty.add(s)
        i = self.input_keys.get(key) if input_index is None else input_index
        if self.aliased and i is not None and self.aliased_write is None and (
                i in self.aliased or key in self.aliased):
            self.aliased_write = i
        if i is not None and i not in self.pristine:
            self.pristine[i] = before(i)
        return later

    def settle_writes(self, slots: list[int]) -> list[int]:
        """An op wrote the tensors these slots saved (see ``writing``): stale where autograd says so.

        Autograd raises at unpack when a saved tensor's version moved since it was saved; a write it does
        not count (``F.rrelu`` filling the noise its own node saved: the version stays) is read by backward
        as written, and the eager replay, running the op again, writes it again. A tensor already gone
        cannot be checked: stale, as a written slot not judged by its version is. Returns the slots found uncounted.
        """
        uncounted = []
        for s in slots:
            ref, version = self.packed_versions[s]
            t = ref()
            if t is None or t._version != version:
                self.dirty.add(s)
            else:
                uncounted.append(s)
        return uncounted

    def stale_views(self, root: Any, view_root: dict[Any, Any]) -> None:
        """fn wrote buffer ``root`` or a view of it (XLA, where each view is a buffer of its own): slots
        saved from any view of it are stale too (autograd's views share their base's version counter)."""
        for k, slots in self.packed_keys.items():
            if view_root.get(k, k) == root:
                self.dirty.update(slots)

    def writing_outside(self, key: Any, t: Optional[torch.Tensor], before: Callable[[], torch.Tensor]) -> None:
        """fn writes in place to ``t`` (buffer ``key``), which no op of the region made and no input is.

        ``t`` is None on XLA for a tensor the checkpointed module does not own (the mode sees only the
        buffer below functionalization): the replay cannot put it back, and says so.
        """
        if key not in self.outside_written:
            self.outside_written[key] = (t, before())

    def hook_ran(self, hook: Any, module: Any, result: Any) -> None:
        """User hook ``hook`` of ``module`` returned ``result`` in the forward (None, or new inputs / a new output)."""
        # Tensors in it are ``HookValue``s (``hook_values``): the replay's stand-ins need grad as the forward's
        # did, so its ops save for backward what the forward's saved.
        self.hook_results.append((hook, module, result))

    def hook_drew(self, links: list[tuple[int, Any]]) -> None:
        """A user hook moved generators in the forward (``seeding.hook_draws``): links of the chain of draws."""
        self.hook_rng.extend(links)

    def hook_wrote(self, pos: int) -> None:
        """A user hook wrote position ``pos``'s output in place: its value is the hook's, not the op's."""
        self.hook_written.add(pos)

    def pack(self, t: torch.Tensor, key: Any) -> int:
        """Autograd saved ``t`` (buffer ``key``) in the forward: its slot index (versions are checked at unpack)."""
        n = len(self.packed_versions)
        self.packed_versions.append((weakref.ref(t), t._version))
        slots = self.packed_keys.get(key)
        if slots is None:
            self.packed_keys[key] = [n]
        else:
            slots.append(n)
        return n

    def drop_inputs(self, unread: dict[int, tuple]) -> None:
        """Let go of inputs backward never reads (``unread``: index -> what a stand-in needs)."""
        self.absent.update({i: spec + (i in self.pristine,) for i, spec in unread.items()})
        gone = {id(self.inputs[i]): i for i in unread}
        self.args, self.kwargs = tree_map(
            lambda a: Absent(gone[id(a)]) if isinstance(a, torch.Tensor) and id(a) in gone else a,
            (self.args, self.kwargs))
        for i in unread:
            self.inputs[i] = None
            self.pristine.pop(i, None)

    def note_rng(self, cpu: bool, xla: bool) -> None:
        """Whether fn moved the CPU generator, torch_xla's seed, outside its random ops in forward (``seeding.py``)."""
        self.sets_cpu_rng, self.sets_xla_rng = cpu, xla

    def settle(self, outside: Watch, host: Any) -> None:
        """The end of forward: what backward checks and reads besides the cache."""
        self.input_versions = tuple(t._version if t is not None else 0 for t in self.inputs)
        self.outside, self.host = outside, host

    def watch(self, outputs: list[torch.Tensor]) -> None:
        """The region's outputs that alias a kept value: a later in-place write to one is an error."""
        keys = {}
        for pos, (cached, _) in self.cache.items():
            for t in ((cached,) if isinstance(cached, torch.Tensor) else tensors(cached)):
                keys[buffer_key(t)] = pos
        for t in outputs:
            at = keys.get(buffer_key(t if t._base is None else t._base))
            if at is not None:
                self.watched.setdefault(at, []).append((weakref.ref(t), t._version))

    # -- backward reads -------------------------------------------------------------------------
    def cached(self, pos: int, func: Any, rec: Record) -> Any:
        """The forward's output at a kept position, after checking nobody modified it since."""
        cached, versions = self.cache[pos]
        if written(versions + tuple(self.watched.get(pos, ()))):
            kept = "offloaded" if rec.decision is OFFLOAD else "saved"
            raise CheckpointError(
                f"an output of {func} (module '{rec.module}') that the policy {kept} "
                "was modified in place after the checkpointed forward; the gradient would be wrong. Clone it "
                "before modifying it, or let the policy recompute this op."
            )
        if isinstance(cached, Away):
            cached = cached.fetch()  # back from the host tier (waits for its prefetch)
        if isinstance(cached, tuple) and any(isinstance(t, Pruned) for t in cached):
            return tuple(stand_in(t.spec) if isinstance(t, Pruned) else t for t in cached)
        return cached

    def check_inputs(self) -> None:
        """An input modified in place after the forward is an error, as autograd's version check is; so
        is fn writing an input that shares memory with another (``aliased``)."""
        if self.aliased_write is not None:
            raise CheckpointError(
                f"the checkpointed function {self.name} writes in place to one of its inputs "
                f"{', '.join(f'#{i}' for i in sorted(i for i in self.aliased if isinstance(i, int)))}, which share "
                "memory (one a view of another, or the same tensor passed twice): the "
                "recomputation starts from copies and cannot repeat the write on both. Pass the base tensor "
                "once and take the view inside the function, or clone one of them before the checkpoint."
            )
        for i, (t, v) in enumerate(zip(self.inputs, self.input_versions, strict=True)):
            if t is not None and t._version != v:
                raise CheckpointError(
                    f"input #{i} of the checkpointed function {self.name} (a tensor of shape "
                    f"{tuple(t.shape)}) was modified by an inplace operation after the forward (version {v} "
                    f"-> {t._version}); the recomputation needs its value from the forward. Clone it before "
                    "modifying it (autograd raises the same error for tensors it saves)."
                )
