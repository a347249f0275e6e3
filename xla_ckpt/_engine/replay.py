"""Backward of a checkpoint region: replay ``fn`` by position, checking every position against forward.

SAVE (and OFFLOAD) positions hand out the forward's cached outputs, RECOMPUTE positions run again.
Every position first checks what the replay feeds it (op, tensor shapes/dtypes, other argument
values) against the forward's record; a difference is a :class:`CheckpointError` naming the op, the module and the
likely cause, never a gradient computed from other values. Each recomputed random op draws from
the generator state it drew from in forward, whatever the policy saved around it.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xla_ckpt._engine.outside import check_read, check_view_read
from xla_ckpt._base.errors import recompute_mismatch_hint
from xla_ckpt._record.opcall import Decision
from xla_ckpt._record.record import (INFO, CheckpointError, Record, arg_scan, describe_mismatch, op_info, out_meta,
                                    tensors)
from xla_ckpt._record.spec import stand_in
from xla_ckpt._base.xla import buffer_key
from xla_ckpt._base.xla_state import lift
from xla_ckpt._record.replay_state import Fence
from xla_ckpt._engine.state import RegionState

__all__ = ["ReplayMode", "hint"]

RECOMPUTE = Decision.RECOMPUTE
_TO_COPY = torch.ops.aten._to_copy.default

def hint(func: Any, module: str) -> str:
    """Why a replayed position may differ from the forward, and how to fix it."""
    return (
        f"{recompute_mismatch_hint(func, module)} Python-side state read by fn (a counter, `random`, a flag) "
        "or data-dependent control flow has the same effect: the checkpointed function must run the same "
        "ops on the same shapes when recomputed."
    )


class ReplayMode(TorchDispatchMode):
    """Replays one region's forward; see the module docstring."""

    def __init__(self, region: RegionState, fence: Optional[Fence], owner: Any, stand_ins: set[Any]) -> None:
        super().__init__()
        self.region = region
        self.owner = owner  # the recompute this mode runs for (what ``forward.detach_unseen`` looks for)
        verify = region.verify
        self.fence = fence
        self.verify = verify
        self.pos = 0
        self.busy = False  # the fence's own adds are not fn's ops
        # Buffers of stand-ins (for dead ops' outputs, for inputs backward never reads) and, on XLA, of
        # their views: what a live op or autograd reads of one is a liveness error, never a value.
        self.garbage: set[Any] = stand_ins
        self.stand_ins: list[torch.Tensor] = []  # held until the replay ends: their buffers stay unique
        # XLA, when a replayed op reads an outside tensor through views: each view's buffer -> its
        # base's (buffer, tensor), as the forward's dataflow maps them (``_record.liveness``).
        self.bases: Optional[dict[Any, tuple[Any, torch.Tensor]]] = {} if region.outside.views else None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if self.busy:
            return func(*args, **kwargs)
        info = INFO.get(func) or op_info(func)  # inline lookup: this is the per-op path
        if info.skipped:
            out = func(*args, **kwargs)
            if not info.propagate:
                if self.bases is not None:
                    self._alias(args, out)
                if self.garbage and args and isinstance(args[0], torch.Tensor) and buffer_key(args[0]) in self.garbage:
                    # A view of a stand-in (XLA: a buffer of its own; eager: the same storage, a no-op).
                    self.garbage.update([buffer_key(t) for t in tensors(out)])
            return out
        region, pos = self.region, self.pos
        records = region.records
        if pos >= len(records):
            if self._recast(func, args, kwargs):
                return func(*args, **kwargs)
            raise CheckpointError(
                f"recomputation ran more ops than the forward ({len(records)}); extra op {func}. "
                f"{self._mode_hint()}{hint(func, '')}"
            )
        rec = records[pos]
        if rec.op != func:
            if self._recast(func, args, kwargs):
                return func(*args, **kwargs)
            raise CheckpointError(
                f"recomputation diverged at op #{pos} in module '{rec.module}': forward ran {rec.op}, "
                f"recompute ran {func}. {self._cast_hint(func, args) or self._mode_hint() + hint(func, rec.module)}"
            )
        sig, reads = arg_scan(args, kwargs)
        bad = None if sig == rec.sig else describe_mismatch(rec.sig, sig)  # NaN == NaN there
        if bad is not None and self._recast(func, args, kwargs):
            return func(*args, **kwargs)
        self.pos += 1
        if bad is not None:
            raise CheckpointError(
                f"recomputation of {func} in module '{rec.module}' (op #{pos}) was called with other arguments "
                f"than in forward ({bad}). {self._cast_hint(func, args) or self._mode_hint() + hint(func, rec.module)}"
            )
        # A factory op on XLA: fn gets a functional tensor, as in forward (see _base.xla_state.lift).
        out = self._position(func, args, kwargs, rec, pos, reads)
        return out if type(out) is torch.Tensor and not out.is_xla else lift(out, reads)  # type: ignore[attr-defined]

    def _recast(self, func: Any, args: tuple, kwargs: dict) -> bool:
        """Autocast casts a weight here that the forward found in autocast's cache, cast before the region.

        Only under the caller's autocast (nesting above 0 when the region started): the cache then holds
        casts made before the region, and the recompute starts without them (``_record/autocast.py``). The
        cast runs outside the record (no position); what reads it is checked as any outside read is
        (same values as the forward's cast, ``outside.check_read``). On XLA the mode sees tensors below
        autograd (no leaf to recognise): the recorded program, the default there, reads the forward's cast.
        """
        state = self.region.autocast
        if func is not _TO_COPY or not state.nesting or not state.cache or not args:
            return False
        t = args[0]
        # torch's rule for a cacheable cast (aten/src/ATen/autocast_mode.h, cached_cast).
        if not (isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad and not t._is_view()
                and t.dtype == torch.float32):
            return False
        # Not ``is_autocast_enabled``: autocast's own kernel runs with its key excluded, so it reads False here.
        return kwargs.get("dtype") == torch.get_autocast_dtype(t.device.type)

    def _mode_hint(self) -> str:
        """The caller's torch-function modes open around the forward: the recompute runs without them."""
        modes = self.region.as_found.function_modes
        if not modes:
            return ""
        return (f"Likely cause: the torch function mode {', '.join(modes)} was active around the forward; the "
                "recompute runs in backward, where it is not (Tensor.backward() runs without the caller's function "
                "modes), so ops it changed or added run otherwise. Fix: enter the mode inside the checkpointed "
                "function, or call the module outside it. ")

    def _cast_hint(self, func: Any, args: tuple) -> str:
        """Why an unexpected cast on XLA under the caller's autocast is likely the cache's (below autograd
        ``_recast`` cannot tell a weight's cast; on eager a cast it refused is no cache hit)."""
        if func is not _TO_COPY or not self.region.autocast.nesting or not args:
            return ""
        if not (isinstance(args[0], torch.Tensor) and args[0].device.type == "xla"):
            return ""
        return ("Likely cause: autocast's cast cache. The region ran inside your torch.autocast, where a weight cast "
                "before the region (a weight shared with an earlier layer) is reused from the cache; the recompute "
                "casts it again. The recorded program, XLA's default replay, reads the forward's cast; this region "
                "runs fn again (the general replay: fn writes in place, verify=True, or another reason the program "
                "cannot serve it). Fix: open torch.autocast inside the checkpointed functions instead of around "
                "the whole step, so no cast is cached when a region starts.")

    def _position(self, func: Any, args: tuple, kwargs: dict, rec: Record, pos: int, reads: list) -> Any:
        region = self.region
        if rec.decision is not RECOMPUTE:  # SAVE or OFFLOAD: the forward's value
            return self._saved(func, args, kwargs, rec, pos)
        if not rec.live and not self.verify:
            # Nothing backward needs comes from this op: a stand-in, never read (checked below). XLA
            # (no spec): run lazily, nothing executes it; a random op from its forward state, or it
            # would take one seed update more than the plain run.
            # Its draw's end state is not checked: the generator is put back either way, and a draw whose
            # count depends on its inputs (the rejection sampling of ``_standard_gamma``, ``poisson``) draws
            # otherwise from the stand-ins it may read (checking it would raise a false CheckpointError).
            out = stand_in(rec.spec) if rec.spec is not None else self._run(func, args, kwargs, rec, check=False)
            made = tensors(out)
            self.stand_ins.extend(made)
            for t in made:
                self.garbage.add(buffer_key(t))
            return out
        outside = region.outside.reads.get(pos) if region.outside.reads else None
        if outside is not None:
            for i, key, forward in outside:
                check_read(reads[i], key, forward, func, rec.module, pos)
        views = region.outside.views.get(pos) if self.bases is not None else None
        if views is not None:
            for i, expected, read in views:
                key = buffer_key(reads[i])
                key, base = self.bases.get(key, (key, reads[i]))  # type: ignore[union-attr]
                check_view_read(key, base, expected, read, func, rec.module, pos)
        if self.garbage:
            for t in reads:
                if buffer_key(t) in self.garbage:
                    raise CheckpointError(
                        f"internal: {func} (module '{rec.module}', op #{pos}) reads a value the liveness analysis "
                        "found unneeded (the output of an op it skipped, or a region input backward does not read). "
                        "Please report this with the function; checkpoint(..., verify=True) runs every op and "
                        "avoids it."
                    )
        if rec.draw is None:  # ``_run``'s common case, inline: this is the per-op path
            out = func(*args, **kwargs)
        else:
            out = self._run(func, args, kwargs, rec)
            if self.fence is not None:
                out = self._fenced(out)  # see ``Fence.apply_all``
        meta = ((out.shape, out.dtype),) if type(out) is torch.Tensor else out_meta(out)
        if meta != rec.meta:
            raise CheckpointError(
                f"recomputation of {func} in module '{rec.module}' (op #{pos}) produced {_meta(meta)}, the forward "
                f"produced {_meta(rec.meta)}. {hint(func, rec.module)}"
            )
        return out

    def _alias(self, args: tuple, out: Any) -> None:
        """A view op ran (XLA: its outputs are new buffers): they map to the base of its first tensor argument."""
        src = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if src is None:
            return
        bases = self.bases
        assert bases is not None
        key = buffer_key(src)
        base = bases.get(key, (key, src))
        for t in tensors(out):
            bases[buffer_key(t)] = base

    def _saved(self, func: Any, args: tuple, kwargs: dict, rec: Record, pos: int) -> Any:
        cached = self.region.cached(pos, func, rec)
        # Compared only where the recompute starts from the forward's state (its draws replayed, or none).
        if self.verify and ((rec.draw is not None and not rec.draw.lost) or not rec.info.random):
            _compare(self._run(func, args, kwargs, rec), cached, func, rec, pos)
        if self.fence is None:
            return cached
        return self._fenced(cached)

    def _fenced(self, out: Any) -> Any:
        fence = self.fence
        assert fence is not None
        self.busy = True  # the fence's adds are not fn's ops
        try:
            return fence.apply_all(out)
        finally:
            self.busy = False

    @staticmethod
    def _run(func: Any, args: tuple, kwargs: dict, rec: Record, check: bool = True) -> Any:
        if rec.draw is None:
            return func(*args, **kwargs)
        return rec.draw.redraw(func, args, kwargs, rec.module, check)  # see _record.replay_state.Draw


def _meta(meta: tuple) -> str:
    return ", ".join(f"{tuple(s)} {d}".replace("torch.", "") for s, d in meta) or "no tensors"


# verify on XLA: the recompute is compiled into another graph than the forward, and XLA fuses (and so
# rounds float reductions) differently there: the same deterministic op can differ in its last bits
# (9.5e-7 on an fp32 addmm + add). These are torch.testing.assert_close's default
# tolerances per dtype; what verify looks for (an unseeded random source, state read from outside fn)
# differs by far more. Eager devices run the same kernels on the same values: compared bitwise.
XLA_VERIFY_TOL = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5),
                  torch.float64: (1e-7, 1e-7)}


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    tol = XLA_VERIFY_TOL.get(a.dtype) if a.is_xla else None  # type: ignore[attr-defined]
    a, b = a.detach().cpu(), b.detach().cpu()
    if tol is not None:
        return bool(torch.isclose(a, b, rtol=tol[0], atol=tol[1], equal_nan=True).all())
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def _compare(fresh: Any, cached: Any, func: Any, rec: Record, pos: int) -> None:
    # Not strict: an XLA-retained entry holds a Pruned stand-in, not a tensor, for an output nothing reads.
    for i, (f, c) in enumerate(zip(tensors(fresh), tensors(cached), strict=False)):
        if not _equal(f, c):
            diff = (f.detach().cpu().double() - c.detach().cpu().double()).abs()
            worst = float(diff[~torch.isnan(diff)].max()) if diff.numel() else 0.0
            raise CheckpointError(
                f"verify: recomputing {func} in module '{rec.module}' (op #{pos}, output {i}) gave other values "
                f"than the forward saved (max abs difference {worst:.3g}). The op or an op before it is not "
                "deterministic (an unseeded random source, a nondeterministic kernel, state read from outside "
                "fn); with this policy the gradient would still use the saved values, but ops recomputed from "
                "it would not match the forward."
            )
