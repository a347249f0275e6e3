"""The forward under torch_xla (lazy): in-place traces, views as new buffers, the recorded program.

The dispatch mode sees tensors below functionalization: an in-place op reaches it as torch_xla's
trace of a new value (old, new), every view is a new buffer mapped back to its base, and an undeclared
write (a batch norm's running statistics) is noted before the op. The forward's ops are recorded
(``direct.Recorder``) so the recompute can run them as a program instead of ``fn``, where the
forward allows.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from xla_ckpt._base import modules as _modules
from xla_ckpt._base.errors import CheckpointError, fn_name as _fn_name
from xla_ckpt._base.xla import buffer_key
from xla_ckpt._base.xla_state import KEEPS_VALUE, ir_identity, ir_root
from xla_ckpt._engine.direct import Recorder, direct_replay
from xla_ckpt._engine.forward import FRESH, Forward, Slot, _Unpacks
from xla_ckpt._engine.hook_values import HookValue
from xla_ckpt._engine.outside import by_buffer, owner_module
from xla_ckpt._engine.state import RegionState
from xla_ckpt._record.opcall import Policy
from xla_ckpt._record.liveness import EXTERNAL, INPUT
from xla_ckpt._record.record import OpInfo, written

__all__ = ["XlaForward"]

_LIFTS = frozenset({torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default})


class XlaForward(Forward):
    """XLA (lazy): the mode sees tensors below functionalization, where an in-place op is a new value
    and every view a new buffer; the forward is recorded as a program (``direct``) where it allows."""

    def __init__(self, state: RegionState, policy: Policy, owner: _Unpacks) -> None:
        super().__init__(state, policy, owner)
        if not state.verify and direct_replay():
            self.recorder = Recorder()
            self.calls = []  # the recorder builds its program from every position's OpCall
        # Buffers no op of the region produced that are fn's all the same, so a write to one is no
        # outside write: what user hooks returned (``hook_value``), constants fn built (``lift_fresh``).
        self.own_keys: set[Any] = set()
        self.writer: Any = None  # the OpCall of the latest op whose write is judged at the next op
        # Each region value's lazy value when it was made (tensor, identity, position: the op's, or -1 - i
        # for input i and its views), to find writes that bypass the dispatcher (``ended``). Held until
        # the forward ends (as the recorder holds the outputs).
        self.ident = ident = ir_identity()
        self.made_ids: list[tuple[torch.Tensor, Any, int]] = [
            (t, ident(t), -1 - i) for i, t in enumerate(state.inputs)
            if t is not None and type(t) is torch.Tensor and t.is_xla]  # type: ignore[attr-defined]
        # Buffers written through the dispatcher (the roots of their views), and whether an input was:
        # functionalization brings a written base and its views up to date under the same XLA tensor.
        self.written_roots: set[Any] = set()
        self.input_written = False

    def made(self, outs: list[torch.Tensor]) -> None:
        pos = len(self.flow.deps) - 1
        ids, ident = self.made_ids, self.ident
        for t in outs:
            if type(t) is torch.Tensor and t.is_xla:  # type: ignore[attr-defined]
                ids.append((t, ident(t), pos))

    def ended(self) -> None:
        # torch_xla calls that write a tensor outside the dispatcher (``xm.all_reduce(reduce_type, [t])``:
        # the list form reduces in place) change its lazy value under the same XLA tensor. The record never saw
        # the write: a recomputed op would read the value from before it (wrong gradients: an input's
        # gradient off with nothing_saveable). Syncs, barriers and sharding annotations keep the value.
        made, self.made_ids = self.made_ids, []
        now = self.ident
        changed = [(t, pos) for t, ident, pos in made if now(t) != ident]
        if not changed:
            return
        flow = self.flow
        read = set(flow.packed_keys)
        for keys in flow.dep_keys:
            read.update(keys)
        roots = self.written_roots
        for t, pos in changed:
            key = buffer_key(t)
            if (pos < 0 and self.input_written) or flow.view_root.get(key, key) in roots:
                continue  # a write the mode saw, brought up to date by functionalization
            node = ir_root(t)
            if node is None or node in KEEPS_VALUE or key not in read:
                continue  # the same value, or one nothing in the region reads or saves
            if pos < 0:
                what = f"input #{-1 - pos} of {_fn_name(self.state.fn)} (or a view of it)"
            else:
                rec = self.state.records[pos]
                what = f"the output of {rec.op} in module '{rec.module}'"
            raise CheckpointError(
                f"{what} was written outside PyTorch's dispatcher ({node}) and then read or saved inside the "
                "checkpointed function: the recomputation cannot see or repeat such a write (a torch_xla call "
                "that writes a list of tensors in place, such as xm.all_reduce(reduce_type, [t])). Use its "
                "functional form (t = xm.all_reduce(reduce_type, t) returns a new tensor), call it outside "
                "the checkpointed function, or leave this module unwrapped.")

    def skipped(self, func: Any, info: OpInfo, args: tuple, kwargs: dict) -> Any:
        if info.propagate:
            self.on_write(args[0], args[1])  # torch_xla's trace of an in-place op: old, new value
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        self.on_view(func, args, kwargs, out)
        return out

    def before_writes(self, info: OpInfo, args: tuple, kwargs: dict) -> None:
        # A declared write reaches ``on_write`` as torch_xla's new value; only the undeclared ones here.
        if not info.mutable:
            targets = written(info, args, kwargs)
            # torch_xla's kernel writes them under the same tensor (a batch norm's statistics, which
            # instance_norm repeats inside the region: ``xla::moving_average``): the op replays it.
            self._wrote(targets)
            self.before_undeclared_write(targets)

    def _wrote(self, targets: list[torch.Tensor]) -> None:
        """An op the mode sees writes ``targets`` (``ended`` passes their changed values)."""
        view_root = self.flow.view_root
        for t in targets:
            key = buffer_key(t)
            self.written_roots.add(view_root.get(key, key))
            if self._input_behind(key) is not None:
                self.input_written = True

    def pack(self, t: torch.Tensor) -> Slot:
        # A detach makes a new functional wrapper (~10 us, ~100 per GPT step): the alias is made
        # only if fn unpacks this slot during its forward (``_early_out``).
        self.early.append(t)
        key = buffer_key(t)
        self.flow.pack(key)
        return Slot(self.owner, self.state.pack(t, key))

    def _early_out(self, t: torch.Tensor) -> torch.Tensor:
        return t.detach()

    def hook_value(self, t: torch.Tensor) -> HookValue:
        # The value below functionalization: an in-place write makes a new one there, this one stays.
        hv = HookValue(t, torch._from_functional_tensor(t) if torch._is_functional_tensor(t) else None)
        self.own_keys.add(buffer_key(hv.value))  # fn may write it: a value of the region, not an outside tensor
        return hv

    def on_write(self, old: torch.Tensor, new: torch.Tensor) -> None:
        """torch_xla traces an in-place op as a new value: ``old`` is the value before the write, ``new`` after."""
        # XLA tensors are immutable underneath: ``old`` keeps the value before the write.
        key = buffer_key(old)
        flow = self.flow
        base = flow.outside_base.get(key)
        # A view of an outside tensor counts as outside even when an op "made" it: torch_xla's functional
        # ``copy`` returns its first argument's tensor id, so ``alias(running_mean).copy_(...)`` (how ATen's
        # instance_norm writes its running statistics back) would leave the write unnoted and the replay would
        # read the written statistics (a CheckpointError at ``repeat``; CPU is exact).
        if key not in flow.producer or base is not None:
            if old.shape != new.shape and not (self.own_keys and key in self.own_keys) and self.refused is None:
                # Raised once the op is done (``flush``): torch_xla's in-place trace left half done
                # crashes the process at the next op on the buffer (a segfault in a probe).
                self.refused = _resizes_outside(self.pending[0] if self.pending is not None else None)
            if base is None and not (self.own_keys and key in self.own_keys):
                # From outside the region: the mode sees no version-carrying tensor, so the module's own
                # tensor (a norm's running statistics) is found by buffer, which now holds ``new``, in the
                # running module or the checkpointed one; None for any other (a closure).
                self.outside_write(buffer_key(new), lambda: old)
            elif base is not None and base not in self.own_keys:
                # Through a view of one (``self.buf.t().add_(1)``): the tensor still holds its buffer
                # from before the write (functionalization updates it when next read), the value to start from.
                src = flow.outside_tensor[base]
                self.outside_write(base, lambda: src, pending=True)
        i = self._input_behind(key)
        self._wrote([old])
        # Slots saved since the op before this one ended (its outputs, this op's inputs): judged at the next
        # op by their versions (``RegionState.settle_writes``); this op's write is reported after it ran.
        later = self.state.writing(key, self._before_write(i, key, old), input_index=i, since=self.own_from)
        if later:
            self.settle_next.extend(later)
            self.writer = self.pending[0] if self.pending is not None else None
        if flow.view_root:
            self.state.stale_views(flow.view_root.get(key, key), flow.view_root)
        if self.recorder is not None and not self._fills(key, new):
            self.recorder.refuse("fn writes in place")

    def uncounted_writes(self, slots: list[int]) -> None:
        raise _fills_own_save(self.writer)

    def _input_behind(self, key: Any) -> Optional[int]:
        """The input whose buffer ``key`` is, or a view of (XLA: every view is a buffer of its own)."""
        p = self.flow.producer.get(key, EXTERNAL)
        return INPUT - p if p <= INPUT else None

    def _before_write(self, i: Optional[int], key: Any, old: torch.Tensor) -> Callable[[int], torch.Tensor]:
        """Input ``i``'s value before a write to buffer ``key``: ``old`` when the write is to the input
        itself; for a write through a view of it, the input's own value below functionalization, which
        the write has not reached yet (functionalization brings a base up to date only when it is next
        read; an earlier write through any view took the copy already)."""
        if i is None or self.state.input_keys.get(key) == i:
            return lambda _: old
        t = self.state.inputs[i]
        assert t is not None  # inputs are let go only when the forward ends
        return lambda _: torch._from_functional_tensor(t) if torch._is_functional_tensor(t) else t

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
        return rec.info.random or rec.op.overloadpacket in FRESH

    def outside_write(self, now: Any, before: Callable[[], torch.Tensor], pending: bool = False) -> None:
        """fn writes a tensor from outside the region, whose buffer is ``now``; ``before()``: its old value.

        ``pending``: written through a view, ``now`` is the buffer the tensor holds until it is next read.
        """
        hit = (by_buffer(_modules.current_module(), pending).get(now)
               or by_buffer(owner_module(self.state.fn), pending).get(now))
        self.state.writing_outside(now, hit[2] if hit is not None else None, before)

    def before_undeclared_write(self, targets: list[torch.Tensor]) -> None:
        """An op about to update ``targets`` in place without its schema saying so (a batch norm's
        running statistics): outside tensors keep their value before it for the replay."""
        producer = self.flow.producer
        for t in targets:
            key = buffer_key(t)
            if key not in producer:
                self.outside_write(key, t.clone)

    def on_view(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        p = self.flow.alias(args, out)  # XLA views are new buffers: map them to their base
        if p is not None:  # a view of a region value, noted for ``ended`` (an input's views: ``-1 - i``)
            pos, ident = (p if p >= 0 else -1 - (INPUT - p)), self.ident
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if type(t) is torch.Tensor and t.is_xla:  # type: ignore[attr-defined]
                    self.made_ids.append((t, ident(t), pos))
        if func in _LIFTS:
            # ``torch.tensor(...)`` in fn: the mode sees only the lift of a tensor made below it. Fresh,
            # nobody else holds it: fn writing it is no outside write (fn run again builds it anew).
            self.own_keys.add(self.flow.outside_base.get(buffer_key(out), buffer_key(out)))
        if self.recorder is not None:
            self.recorder.view(len(self.flow.deps), func, args, kwargs, out)


def _refused(call: Any, what: str) -> CheckpointError:
    """``what`` the op of ``call`` (the OpCall being decided, None if unknown) does that XLA cannot replay."""
    op, module = (call.op, call.module) if call is not None else ("an op", "")
    return CheckpointError(f"{op} in module '{module}' {what}")


def _resizes_outside(call: Any) -> CheckpointError:
    # Below functionalization the put-back of the old value cannot resize the buffer (probe: the replay
    # saw the new shape, the put-back copy failed in torch_xla); eager resizes it (``xla_state.assign``).
    return _refused(call, (
        "resizes a tensor from outside the checkpointed function (a buffer such as "
        "a QAT observer's, made empty and resized at its first call) on XLA, where the recomputation cannot "
        "give it back the shape it had. Run one forward under torch.no_grad() first (the buffers keep their "
        "shape afterwards), or checkpoint this module on CPU/CUDA, where it is supported."
    ))


def _fills_own_save(call: Any) -> CheckpointError:
    # Eager judges such a write by versions, as autograd does (``EagerForward.before_write``). Below
    # functionalization the slot keeps the buffer from before the write, and the replay's too: accepting
    # the write gave wrong values in a probe, so XLA refuses it while the forward runs.
    return _refused(call, (
        "writes a tensor autograd saved for backward, a write autograd does not "
        "count (F.rrelu fills the noise its own node saved so, in eval mode too; a write through .data right "
        "after the op that saved it is another); on XLA the recomputation cannot give backward the written "
        "value. Call it outside the checkpointed function, use another activation (in eval mode rrelu is "
        "F.leaky_relu with slope (lower + upper) / 2), or checkpoint this module on CPU/CUDA, where it is "
        "supported."
    ))
