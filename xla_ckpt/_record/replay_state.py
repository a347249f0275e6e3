"""State a recomputation must reproduce or depend on: random draws and (XLA) the gradient fence.

Autocast state: ``autocast.py``.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Optional

import torch
from torch.utils._pytree import tree_map

from xla_ckpt._base import compat as _compat
from xla_ckpt._base import xla as _xla
from xla_ckpt._base.errors import CheckpointError

__all__ = ["Fence", "Draw", "draw_source", "devices", "displaced", "settle_xla", "generator_lock", "read_state",
           "same_state"]

# One lock per device's generators, held around every forward random op (state before, the op,
# state after) and every replayed one (set, run, check, restore). Without it two threads' replays
# interleave: thread B sets its state, thread A's op draws from it, B restores a state that equals
# A's forward "after", and A's check passes with B's numbers: a silently wrong mask (on torch 2.13,
# about 1 in 3000 steps under load). Other code's plain draws cannot fool the check (they
# only advance the stream); only our restores could. Per device, so that threads driving different
# devices never wait on each other (a random op may run other Python inside: a mode, a tensor
# subclass). Reentrant: a random op may dispatch to another one inside.
_LOCKS: dict[tuple[str, Optional[int]], threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(source: "torch.Generator | torch.device") -> threading.RLock:
    dev = source.device if isinstance(source, torch.Generator) else source
    key = (dev.type, dev.index)
    lock = _LOCKS.get(key)
    if lock is None:
        with _LOCKS_GUARD:
            lock = _LOCKS.setdefault(key, threading.RLock())
    return lock


generator_lock = _lock_for  # the engine's reads of a whole generator (``_engine/seeding.py``) take it too


def devices(tensors: list[torch.Tensor]) -> list[torch.device]:
    return list(dict.fromkeys(t.device for t in tensors))


class Draw:
    """One random op's draw: which generator, and its state just before and just after the op.

    The replay puts the generator in the ``before`` state for this op alone and then back in the state
    it found, so the op draws exactly the forward's numbers whatever ran in between: other random ops
    saved by the policy, the caller's own draws, or another thread sharing the process-wide generator.
    If the state after the op differs from the forward's ``after``, a draw from the same generator
    interleaved with this op (in forward or in the replay): the caller gets an error, never other numbers.
    (A plain draw of another thread that lands inside the replay's window is undone by the restore:
    that thread sees those numbers again. Only a per-thread ``torch.Generator`` avoids it.)
    """

    __slots__ = ("source", "before", "after", "lost")

    def __init__(self, source: "torch.Generator | torch.device", before: Any, after: Any, lost: bool = False) -> None:
        self.source = source
        self.before = before
        self.after = after
        # No generator the library can set moved: the draw cannot be made again (the engine keeps the
        # op's output, whatever the policy says).
        self.lost = lost

    @classmethod
    def record(cls, source: "torch.Generator | torch.device", run: Callable[[], Any],
               quiet: Callable[[], Any]) -> tuple["Draw", Any]:
        """Run the forward's op ``run()``; return its draw and its result.

        ``quiet`` is a context manager under which reading the generator's state is not fn's op
        (the forward mode's own bookkeeping).

        On XLA the op may not draw from torch_xla's seed at all: the ops torch_xla runs on the CPU
        (``poisson``, ``_standard_gamma`` of Gamma/Beta/Dirichlet ``rsample``, ``multinomial``,
        ``geometric_``, ``cauchy_``, ``log_normal_``) draw from torch's CPU generator, and ``randperm``'s
        lowering from neither (two runs from the same seeds differ, without the library too). So the
        CPU generator is read around it as well, and the draw is the generator that moved; when
        neither or both moved it is ``lost``. (Replaying the XLA seed for a CPU draw would give other
        numbers: Gamma's grads 4.5 off under ``nothing_saveable``, silently.)
        """
        cpu = torch.device("cpu") if _is_xla(source) else None
        with _lock_for(source), (_lock_for(cpu) if cpu is not None else contextlib.nullcontext()):
            with quiet():
                before = _get(source)
                cpu_before = _get(cpu) if cpu is not None else None
            out = run()
            with quiet():
                after = _get(source)
                cpu_after = _get(cpu) if cpu is not None else None
        if cpu is None:
            return cls(source, before, after), out
        on_cpu = not _same(cpu_before, cpu_after)
        on_xla = not _same(before, after)
        if on_cpu and not on_xla:
            return cls(cpu, cpu_before, cpu_after), out
        return cls(source, before, after, lost=on_cpu == on_xla), out

    def redraw(self, func: Any, args: tuple, kwargs: dict, module: str, check: bool = True) -> Any:
        """``func(*args, **kwargs)`` drawn from the forward's state: the one redraw of both recomputes (the
        recorded program and fn run again). ``check``: a stream that no longer matches is an error."""
        out, matched = self.replay(lambda: func(*args, **kwargs))
        if check and not matched:
            raise CheckpointError(
                f"the random numbers of {func} in module '{module}' cannot be reproduced: its generator "
                f"({self.source}) was advanced by a draw that interleaved with this op, in the forward or in "
                "the recomputation. Another thread draws from the same process-wide generator (CPU, or one "
                "CUDA/XLA device) outside any checkpoint. Give each thread's random ops their own torch.Generator "
                "(generator=...), or keep other threads from drawing while checkpointed random ops run."
            )
        return out

    def replay(self, run: Callable[[], Any]) -> tuple[Any, bool]:
        """Run ``run()`` from the forward's state; return its result and whether the stream matched."""
        with _lock_for(self.source):
            now = _get(self.source)
            if _is_xla(self.source):
                now = _displace(self.source, now)  # type: ignore[arg-type]
            _set(self.source, self.before)
            try:
                out = run()
                matched = _same(_get(self.source), self.after)
            finally:
                _set(self.source, now)
        return out, matched


def draw_source(kwargs: dict, args: tuple) -> "torch.Generator | torch.device":
    """The generator a random op draws from: its ``generator=`` or the default one of its device."""
    gen = kwargs.get("generator")
    if gen is not None:
        return gen
    dev = kwargs.get("device")
    if dev is None:
        dev = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    return torch.device(dev) if dev is not None else torch.device("cpu")


def _get(source: "torch.Generator | torch.device") -> Any:
    if isinstance(source, torch.Generator):
        return source.get_state()
    if source.type == "cuda":
        return torch.cuda.get_rng_state(source)
    if source.type == "xla":
        return _xla.get_rng_state(source)
    return torch.get_rng_state()


def _set(source: "torch.Generator | torch.device", state: Any) -> None:
    if isinstance(source, torch.Generator):
        source.set_state(state)
    elif source.type == "cuda":
        torch.cuda.set_rng_state(state, source)
    elif source.type == "xla":
        _xla.set_rng_state(state, source)
    else:
        torch.set_rng_state(state)


def _same(a: Any, b: Any) -> bool:
    return bool(torch.equal(a, b)) if isinstance(a, torch.Tensor) else a == b


read_state, same_state = _get, _same  # for ``_engine/seeding.py``: one way to read and compare a generator


def _is_xla(source: "torch.Generator | torch.device") -> bool:
    return isinstance(source, torch.device) and source.type == "xla"


# torch_xla's RNG per device (torch/csrc/lazy/core/lazy_graph_executor.cpp and torch_xla's
# xla_graph_executor.cpp): a base seed, a running seed, and the seed value traced so far. Each traced
# random op takes ``running = running * 214013 + 2531011`` (and the same update on the traced value),
# each sync ``base = base * 7012063 + 1012031; running = base``. ``set_rng_state`` sets base and
# running together, so a replayed draw (set to the forward's state, draw, set back) leaves the running
# seed exact but the base moved: every draw after the next sync would differ from the plain run's. The
# base is read once per backward (``base_seed``) before the first replayed draw moves it, and
# ``settle_xla`` puts it back at the end of backward: set it, then trace as many throwaway draws as
# the running seed is ahead of it (the traced seed value follows from them exactly as in a plain run).
_MUL, _ADD, _SYNC_MUL, _SYNC_ADD, _MASK = 214013, 2531011, 7012063, 1012031, (1 << 64) - 1
_NEAR = 1 << 12  # draws between two replayed random ops of one backward, or up to its end
_FAR = 1 << 22  # draws since the last sync


def _steps(start: int, end: int, bound: int) -> Optional[int]:
    """How many seed updates lead from ``start`` to ``end`` (at most ``bound``), or None."""
    s = start
    for n in range(bound + 1):
        if s == end:
            return n
        s = (s * _MUL + _ADD) & _MASK
    return None


def _synced(s: int) -> int:
    return (s * _SYNC_MUL + _SYNC_ADD) & _MASK


class _Moved:
    """An XLA device whose base seed our replays moved: ``base`` is the plain run's, ``n`` the updates
    from it to ``left``, the state the latest replayed draw set back (base and running both)."""

    __slots__ = ("base", "n", "left", "task")

    def __init__(self, base: int, n: int, left: int) -> None:
        self.base, self.n, self.left = base, n, left
        # The backward it happened in: one that raised never settles, and its entry must not be
        # read by the next backward's replays.
        self.task = torch._C._current_graph_task_id()


_MOVED: dict[tuple[str, Optional[int]], _Moved] = {}


def _where(dev: torch.device, moved: _Moved, now: int) -> tuple[Optional[int], bool]:
    """Updates from ``moved.left`` to ``now``, and whether a sync fell between; (None, False): neither
    reaches ``now`` (the caller set the seed since: the base is theirs)."""
    j = _steps(moved.left, now, _NEAR)
    if j is not None:
        return j, False
    return _steps(_synced(moved.left), now, _NEAR), True


def _sync_error(dev: torch.device) -> CheckpointError:
    return CheckpointError(
        f"torch_xla's RNG stream on {dev} cannot be put back: a sync (torch_xla.sync, xm.mark_step) ran "
        "during backward between the recomputation of a checkpointed random op and later random ops, which "
        "then drew other numbers than without checkpointing. Sync after backward, or keep random ops saved "
        "(a policy that saves them)."
    )


def _displace(dev: torch.device, now: int) -> int:
    """A replayed draw on ``dev`` is about to set the state: note the base seed it moves (lock held).

    Returns the state to set back after the draw (``now``, or the plain run's after a sync that derived
    its seed from a base a replay had moved)."""
    key = (dev.type, dev.index)
    moved = _MOVED.get(key)
    if moved is not None and moved.task != torch._C._current_graph_task_id():
        del _MOVED[key]  # left by a backward that raised: its base is lost with it
        moved = None
    if moved is not None:
        j, synced = _where(dev, moved, now)
        if j is not None and not synced:
            moved.n += j
            moved.left = now
            return now
        if synced:
            if j:
                del _MOVED[key]
                raise _sync_error(dev)
            # A sync right before (and no draw since): it derived its seed from our base; the plain
            # run's is derived from the one we moved.
            _set(dev, _synced(moved.base))
            now = _synced(moved.base)
        del _MOVED[key]
    base = _xla.base_seed(dev)  # also sets the running seed to the base
    n = _steps(base, now, _FAR)
    _set(dev, now)
    if n is None:
        raise CheckpointError(
            f"torch_xla's RNG stream on {dev} cannot be put back after a recomputed random op: its running "
            f"seed is more than {_FAR} draws past the base seed (no sync for that long). Sync more often, or "
            "keep random ops saved (a policy that saves them)."
        )
    _MOVED[key] = _Moved(base, n, now)
    return now


def displaced() -> bool:
    """Whether a replayed draw moved an XLA base seed that ``settle_xla`` has not put back yet."""
    return bool(_MOVED)


def settle_xla(task: int) -> None:
    """Put back every XLA base seed the replayed draws of backward ``task`` (the autograd graph task id, -1
    outside backward) moved: the RNG state is then the plain run's, before and after the next sync. Called
    once per backward, at its end (``recompute``). Entries of other tasks are from a backward that raised."""
    for key in list(_MOVED):
        dev = torch.device(key[0], key[1])  # type: ignore[arg-type]  # index None: the type's default device
        with _lock_for(dev):
            moved = _MOVED.pop(key, None)
            if moved is None or moved.task != task:
                continue
            now = _get(dev)
            j, synced = _where(dev, moved, now)
            if j is None:
                continue  # the caller set the seed since the latest replayed draw: the state is theirs
            if synced and j:
                raise _sync_error(dev)
            base, n = (_synced(moved.base), 0) if synced else (moved.base, moved.n + j)
            _set(dev, base)
            with _compat.without_callers_modes():
                _xla.advance_rng(dev, n)
            if _get(dev) != now and not synced:
                raise CheckpointError(
                    f"internal: torch_xla's RNG stream on {dev} was not put back. Please report this.")


class Fence:
    """A zero that depends on the incoming gradient: ``where(s != s, s, 0)`` for one element ``s``.

    Added to each tensor the recomputation starts from (region inputs, replayed saved outputs), it
    makes the recompute depend on the gradient, so XLA can neither merge it with the forward (the
    operands differ) nor hoist it before the gradient arrives. Zero unless the gradient is NaN,
    where it keeps NaN (``s * 0`` would turn an infinite gradient into NaN). Cost: one scalar read
    and one elementwise add per fenced tensor. XLA:CPU drops ``optimization_barrier`` before
    scheduling (its ``cse_barrier_expander`` pass), so the barrier alone does not hold there.
    """

    def __init__(self, grad: torch.Tensor) -> None:
        s = grad.detach().reshape(-1)[0]
        self.zero = torch.where(s != s, s, torch.zeros_like(s))
        self._by_dtype: dict[torch.dtype, torch.Tensor] = {}

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point() or t.device != self.zero.device:
            # Another device's tensor (a CPU tensor made inside fn, then copied over): the add would
            # move it to XLA, and fn's copy of it would silently vanish from the replay.
            return t
        z = self._by_dtype.get(t.dtype)
        if z is None:
            z = self._by_dtype[t.dtype] = self.zero.to(t.dtype)
        return t + z

    def apply_all(self, out: Any) -> Any:
        """An op's output (a tensor or a structure of them) with each tensor fenced.

        Both recomputes fence a redrawn op's output: the draw reads only its seed and shapes, so XLA
        would otherwise compute the mask before the gradient arrives and hold it (default GPT with
        dropout 0.1, ``full``: compiled peak 141 MiB against 121 fenced).
        """
        if isinstance(out, torch.Tensor):
            return self.apply(out)
        return tree_map(lambda t: self.apply(t) if isinstance(t, torch.Tensor) else t, out)
