"""Which parts of a region's forward backward can read: the rest is dropped after forward.

Backward reads only what autograd saved inside the region (the packed tensors). The replay produces
a packed tensor either from the cache (a SAVE position) or by running its op, which needs the op's
inputs, and so on back to the region's inputs. Everything outside that set is dead:
- a SAVE output no packed tensor depends on is dropped from the cache at the end of forward
  (so ``everything_saveable`` keeps what autograd would keep, never more);
- a RECOMPUTE position nothing needs is not computed by the eager replay (an uninitialised tensor
  of the recorded shape stands in: it is never read, which the replay checks);
- a region input no live op reads is not held by the region.

Producers are tracked by buffer (``_base.xla.buffer_key``): eager views share their base's storage, XLA
views are mapped to their base's producer as they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from xla_ckpt._base.subclass import PLAIN, wrapped
from xla_ckpt._base.xla import buffer_key

__all__ = ["Liveness", "Dataflow", "analyse", "aliased_inputs", "INPUT", "EXTERNAL"]

# Producer codes below zero: -1 external (parameters, closures), INPUT - i: region input i.
EXTERNAL = -1
INPUT = -2


@dataclass(frozen=True)
class Liveness:
    live: frozenset[int]  # RECOMPUTE positions the replay must compute
    cached: frozenset[int]  # SAVE positions whose cached output backward can read
    inputs: frozenset[int]  # region inputs the replay reads


def analyse(
    deps: list[tuple[int, ...]],
    saved: set[int],
    packed: list[int],
    always: list[int],
) -> Liveness:
    """Walk back from the packed tensors' producers (and ops that must run) through recomputed ops.

    Args:
        deps: per position, the producers of its tensor arguments (codes as above).
        saved: positions whose outputs are in the cache.
        packed: producer of each tensor autograd saved inside the region.
        always: positions the replay must reach whatever is needed (writes, ops returning Python
            values): recomputed if not saved, handed out from the cache if saved.
    """
    live: set[int] = set()
    cached: set[int] = set()
    inputs: set[int] = set()
    stack = list(packed) + list(always)
    seen: set[int] = set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        if p <= INPUT:
            inputs.add(INPUT - p)
        elif p == EXTERNAL:
            continue
        elif p in saved:
            # Saved ops that must run (their results go back to Python: a custom op's ``(Tensor, int)``,
            # ``item()``) hand out the cached results, Python values included: a saved op is never rerun
            # (torch's SAC runs it once too). Ops that write are never saved (rule 2 of ``_policy.decide``).
            cached.add(p)
        else:
            live.add(p)
            stack.extend(deps[p])
    return Liveness(frozenset(live), frozenset(cached), frozenset(inputs))


class Dataflow:
    """Records, during a region's forward, which position produced each buffer and what each op read."""

    def __init__(self, inputs: list[torch.Tensor]) -> None:
        self.producer: dict[Any, int] = {}
        self.deps: list[tuple[int, ...]] = []
        self.dep_keys: list[tuple[Any, ...]] = []  # per position, the buffers it read
        self.packed: list[int] = []
        self.packed_keys: list[Any] = []  # buffer of each packed tensor (outside ones: see ``_engine.outside``)
        self.always: list[int] = []
        # Tensors from outside the region (parameters, closures) read by each position, and on XLA
        # the base buffer of each view of one (a view is a new buffer there): see ``_engine.outside``.
        self.outside_at: dict[int, list[tuple[int, Any, torch.Tensor]]] = {}  # per position: (argument, buffer, tensor)
        self.outside_base: dict[Any, Any] = {}
        # XLA: the base tensor behind each such buffer (a closure, a parameter, a constant fn built):
        # a replay that reads it through views again is checked against it (``_engine.outside``).
        self.outside_tensor: dict[Any, torch.Tensor] = {}
        # XLA: the buffer each view of a region value views, through chains of views (autograd's views
        # share their base's version counter: a write through one makes what was saved from another stale).
        self.view_root: dict[Any, Any] = {}
        self.built: dict[Any, int] = {}  # wrapper subclasses built in Python, by buffer: see ``_built``
        keys = [buffer_key(t) for t in inputs]
        # Inputs that share a buffer are read through each other: keep them together (never dropped).
        self.shared_inputs = len(set(keys)) != len(keys)
        for i, k in enumerate(keys):
            self.producer.setdefault(k, INPUT - i)

    def op(self, reads: list[torch.Tensor], outs: list[torch.Tensor], only_tensors: bool, must_run: bool) -> None:
        """One position (in order): the producers of the tensors it reads, then its outputs become theirs.

        ``only_tensors``: the op returned tensors only (else its results go back to Python: it must run).
        """
        pos = len(self.deps)
        producer = self.producer
        key_list, dep_list = [], []
        for t in reads:  # one loop, no comprehensions (each a call per op in Python 3.11)
            k = buffer_key(t)
            key_list.append(k)
            dep_list.append(producer.get(k, EXTERNAL))
        keys, deps = tuple(key_list), tuple(dep_list)
        self.dep_keys.append(keys)
        if EXTERNAL in deps:
            for t in reads:  # inline, no call per op: plain tensors are all but every read
                if type(t) not in PLAIN:
                    deps = tuple([self._built(t, k) if d == EXTERNAL else d
                                  for t, k, d in zip(reads, keys, deps, strict=True)])
                    break
        self.deps.append(deps)
        if EXTERNAL in deps:
            self.outside_at[pos] = [(i, k, t) for i, (k, d, t) in enumerate(zip(keys, deps, reads, strict=True))
                                    if d == EXTERNAL]
        for t in outs:
            producer[buffer_key(t)] = pos
            if type(t) is not torch.Tensor:
                self._inner_made(t, pos)  # fn may unwrap it (``to_local()``): the inner tensors are made here
        if must_run or not outs or not only_tensors:
            self.always.append(pos)  # writes, and ops whose results go back to Python

    def alias(self, args: tuple, out: Any) -> Optional[int]:
        """An XLA view op (its outputs are new buffers): they belong to their base's producer, which is
        returned (None: a view of a tensor from outside the region)."""
        for src in args:
            if isinstance(src, torch.Tensor):
                break
        else:
            return None
        base = buffer_key(src)
        p = self.producer.get(base)
        if p is None:  # a view of an outside tensor (a parameter's t_copy): remember its base buffer
            if base in self.outside_base:
                base = self.outside_base[base]
            else:
                self.outside_tensor.setdefault(base, src)
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    self.outside_base[buffer_key(t)] = base
            return None
        root = self.view_root.get(base, base)
        if isinstance(out, torch.Tensor):
            k = buffer_key(out)
            self.producer[k] = p
            self.view_root[k] = root
            return p
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                k = buffer_key(t)
                self.producer[k] = p
                self.view_root[k] = root
        return p

    def pack(self, key: Any, t: Optional[torch.Tensor] = None) -> None:
        p = self.producer.get(key, EXTERNAL)
        self.packed.append(self._built(t, key) if p == EXTERNAL and type(t) not in PLAIN and t is not None else p)
        self.packed_keys.append(key)

    def _inner_made(self, t: torch.Tensor, pos: int) -> None:
        for x in wrapped(t) or ():
            self.producer[buffer_key(x)] = pos
            self._inner_made(x, pos)

    def _built(self, t: torch.Tensor, key: Any) -> int:
        """The producer of a tensor no op of the region returned: EXTERNAL, unless it is a wrapper subclass
        built in Python from region values (``DTensor.from_local(h)``, ``Pair(h, g)``: a constructor, no op).

        Its memory is the wrapped tensors', made here: their producers must run in the replay, which builds
        the wrapper again from them. They become roots (``always``), so the wrapper can count as any one's
        output. Partly made outside (wrapping a parameter too) it stays EXTERNAL, checked by value as
        outside tensors are (``_engine.outside``), and its inner producers still run, so the replay's
        wrapper holds the forward's values and the check compares like with like.
        """
        code = self.built.get(key)
        if code is not None:
            return code
        inner = wrapped(t)
        if inner is None:
            return EXTERNAL
        codes = [self.producer.get(buffer_key(x), EXTERNAL) for x in inner]
        codes = [self._built(x, buffer_key(x)) if c == EXTERNAL else c for x, c in zip(inner, codes, strict=True)]
        made = [c for c in codes if c != EXTERNAL]
        self.always.extend(made)
        code = made[-1] if made and len(made) == len(codes) else EXTERNAL
        self.built[key] = code
        return code

    def analyse(self, saved: set[int]) -> Liveness:
        return analyse(self.deps, saved, self.packed, self.always)

    def read_keys(self, lv: Liveness, packed_keys: Any) -> set[Any]:
        """Buffers backward or a live op reads: the outputs of a cached op that must stay."""
        keys = set(packed_keys)
        for p in lv.live:
            keys.update(self.dep_keys[p])
        return keys


def aliased_inputs(inputs: list[Optional[torch.Tensor]], keys: dict[Any, int]) -> set[Any]:
    """Indices (and buffer keys) of inputs that share memory with another input: by storage (eager: a
    view shares its base's) or, where each view is a buffer of its own (XLA), by autograd's ``_base``."""
    if len(inputs) < 2:
        return set()
    out: set[Any] = set()
    roots: dict[int, int] = {}
    for i, t in enumerate(inputs):
        if t is None:
            continue
        root = id(t._base if t._base is not None else t)
        j = roots.setdefault(root, i)
        if j != i:
            out.update((i, j))
    if len(keys) < sum(t is not None for t in inputs):  # two inputs on one buffer (eager storage, XLA twice)
        seen: dict[Any, int] = {}
        for i, t in enumerate(inputs):
            if t is not None:
                k = buffer_key(t)
                if seen.setdefault(k, i) != i:
                    out.update((i, seen[k], k))
    return out
