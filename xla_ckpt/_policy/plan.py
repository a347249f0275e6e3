"""Region-level planning: a policy that sees the whole region before deciding (``plan``).

A per-op policy answers one ``OpCall`` at a time. A *planning* policy also has a ``plan(view)``
method: the engine keeps every op it would decide on (provisionally saved) until the forward of the
region ends, then hands it a :class:`RegionView` (every op, what depends on what, what autograd
saved) and applies the decisions it returns, before liveness drops what backward cannot read.

The cost: until the region's forward ends, its planned outputs stay alive (as without
checkpointing, for one region at a time), and the ``OpCall`` objects keep their arguments.
``RegionView.cost`` evaluates a choice exactly as the engine will keep it (``_record.liveness``): bytes of
the cached outputs backward reads and of the region inputs the replay reads, and what the replay
must recompute, ops that rebuild a saved op's inputs included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Optional, Protocol, Sequence, runtime_checkable

import torch

from xla_ckpt._base import xla as _xla
from xla_ckpt._record.liveness import Dataflow, Liveness, analyse
from xla_ckpt._record.opcall import Decision, OpCall
from xla_ckpt._record.record import tensors

__all__ = ["Cost", "Planner", "RegionView", "plans"]


@runtime_checkable
class Planner(Protocol):
    """A policy that decides a whole region at once: ``plan(view)`` returns one Decision per ``view.free``."""

    def plan(self, view: "RegionView") -> Sequence[Decision]: ...


def plans(policy: Any) -> bool:
    """Whether ``policy`` is a planning policy (has a callable ``plan``)."""
    return callable(getattr(policy, "plan", None))


@dataclass(frozen=True, order=True)
class Cost:
    """What a choice of saved ops costs: bytes kept for backward, and work the replay recomputes.

    ``recompute`` is torch's FLOP estimate for matmul-class ops and one unit per output element for
    every other op (what an elementwise op costs); ``flops`` is the matmul-class part alone.
    """

    nbytes: int
    recompute: int
    flops: int


def op_cost(call: Optional[OpCall]) -> tuple[int, int]:
    """(recompute units, FLOPs) of re-running ``call``: FLOPs when torch has a formula, else its output elements."""
    if call is None:
        return 0, 0  # an op decided before planning began (another policy's): not counted
    flops = call.flops
    if flops:
        return flops, flops
    return sum(t.numel() for t in tensors(call.out)), 0


class RegionView:
    """One region at the end of its forward, as a planning policy sees it.

    Attributes:
        calls: every op of the region in order (None for ops run before a nested planner began).
        free: the positions this policy decides; ``plan`` returns one Decision for each, in order.
    """

    def __init__(
        self,
        calls: Sequence[Optional[OpCall]],
        free: Sequence[int],
        fixed_saved: Collection[int],
        flow: Dataflow,
        inputs: Sequence[Optional[torch.Tensor]],
        packed_keys: Collection[Any],
        prune: bool,
    ) -> None:
        self.calls = tuple(calls)
        self.free = tuple(free)
        self._fixed = frozenset(fixed_saved) - frozenset(free)
        self._deps, self._packed, self._always = flow.deps, flow.packed, flow.always
        self._dep_keys = flow.dep_keys
        self._packed_keys = frozenset(packed_keys)
        self._prune = prune
        costs = [op_cost(c) for c in self.calls]
        self._units = [u for u, _ in costs]
        self._flops = [f for _, f in costs]
        # Per position: its outputs' buffers and bytes; a multi-output op keeps only those read (eager).
        self._outs: list[tuple[tuple[Any, int], ...]] = [
            tuple((_xla.buffer_key(t), _xla.buffer_nbytes(t)) for t in tensors(c.out)) if c is not None else ()
            for c in self.calls
        ]
        self._inputs = [(_xla.buffer_key(t), _xla.buffer_nbytes(t)) if t is not None else None for t in inputs]
        self._all_inputs = flow.shared_inputs  # inputs sharing a buffer are never dropped

    def cost(self, save: Collection[int]) -> Cost:
        """What the region keeps and recomputes when exactly ``save`` (a subset of ``free``) is saved."""
        return self.evaluate(save)[0]

    def evaluate(self, save: Collection[int]) -> tuple[Cost, Liveness]:
        """``cost(save)`` and the liveness behind it (which ops the replay runs, which saved ones it reads)."""
        lv = analyse(self._deps, set(self._fixed) | set(save), self._packed, self._always)
        units = flops = 0
        read: Optional[set[Any]] = None
        if self._prune:
            read = set(self._packed_keys)
        for p in lv.live:
            units += self._units[p]
            flops += self._flops[p]
            if read is not None:
                read.update(self._dep_keys[p])
        seen: set[Any] = set()
        nbytes = 0
        for p in lv.cached:
            outs = self._outs[p]
            for key, n in outs:
                if key in seen or (read is not None and len(outs) > 1 and key not in read):
                    continue
                seen.add(key)
                nbytes += n
        held = range(len(self._inputs)) if self._all_inputs else lv.inputs
        for i in held:
            entry = self._inputs[i]
            if entry is not None and entry[0] not in seen:
                seen.add(entry[0])
                nbytes += entry[1]
        return Cost(nbytes, units, flops), lv

    def structure(self) -> Any:
        """What a plan can depend on (hashable): each op with its output sizes, the dataflow, the free
        positions; equal for identical blocks, so a planner may reuse its answer."""
        ops = tuple((c.op, tuple(n for _, n in outs)) if c is not None else None
                    for c, outs in zip(self.calls, self._outs, strict=True))
        return (ops, tuple(self._deps), tuple(self._packed), tuple(self._always), self.free, self._fixed,
                tuple(e[1] if e is not None else None for e in self._inputs))

    @property
    def baseline(self) -> Cost:
        """Every free op saved: what the region keeps without checkpointing (nothing recomputed)."""
        return self.cost(self.free)

    def __repr__(self) -> str:
        return f"RegionView({len(self.calls)} ops, {len(self.free)} free)"


def check_plan(policy: Any, view: RegionView, decisions: Any) -> list[Decision]:
    """``plan``'s answer as a list, or a TypeError naming the policy and what it returned."""
    out = list(decisions) if isinstance(decisions, (list, tuple)) else None
    if out is None or len(out) != len(view.free) or not all(isinstance(d, Decision) for d in out):
        raise TypeError(
            f"planning policy {policy!r}: plan() must return a list of {len(view.free)} Decisions (one per "
            f"view.free position), got {decisions!r:.200}"
        )
    return out
