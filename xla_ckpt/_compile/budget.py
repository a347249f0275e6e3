"""A planning policy (``memory_budget``) under ``torch.compile``: planned on the joint graph, before the min-cut.

A compile never runs a region's eager forward, so the eager engine's planning point (the end of the
region's forward, ``_engine.retain``) does not exist. What does exist is the joint forward+backward
graph AOTAutograd hands its partitioner: every op of the region with its fake output (shapes), what
each op reads, and, in the backward part, exactly which forward values backward reads. That is the
whole ``RegionView`` the eager planner needs, so the same planner (``policy.plan(view)``: our
liveness, our costs) runs there, and its decisions become the marks torch's min-cut honours:

- while the region is traced, the policy_fn (``_compile.marks``) marks the ops the plan will decide
  ``PREFER_SAVE`` (a mark torch's min-cut ignores: were this step skipped, the region would run
  unmarked, never wrongly) and registers the region's ``ac_graph_id`` (process-wide unique,
  ``torch._higher_order_ops.wrap.tag_nodes``) with its policy; forced marks stay (random ops saved on
  XLA, mutations recomputed, views recomputed from their base);
- :func:`planned` wraps the partition function: before the min-cut runs, :func:`plan_joint` builds each
  registered region's view from the joint graph and rewrites its ``PREFER_SAVE`` marks to ``MUST_SAVE``
  (SAVE) or ``PREFER_RECOMPUTE`` (RECOMPUTE); the min-cut then keeps exactly the planned values (and the
  region inputs recomputed ops read), and on XLA the fence orders the recompute as for the presets.

Random ops: under inductor they are planned like any op (a recomputed one is replayed with its
RNG state: the min-cut functionalises recomputed random ops); on XLA they are saved (``_compile.marks``).
Why not torch's ``activation_memory_budget``: with dropout in two regions its gradients differed from
the unwrapped model's (0.02-0.09, XLA and CPU ``aot_eager``); here the marks are per op, as the presets'.

Positions are graph nodes, not dispatcher ops: an op AOTAutograd decomposes is several positions, and the
baseline (every free node saved) is what this compiled graph keeps without checkpointing.
"""

from __future__ import annotations

import functools
import operator
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch.fx import GraphModule, Node

from xla_ckpt._base.warn import warn_once
from xla_ckpt._compile.joint_view import (Symbolic, backward_readers, buffer_of, external, forward_nodes, key_name,
                                          meta_or, meta_tensor, saved_names, transparent)
from xla_ckpt._compile.opcall import CompiledOpCall
from xla_ckpt._record.liveness import Dataflow
from xla_ckpt._policy.budget import budget_bytes
from xla_ckpt._policy.plan import Cost, RegionView, check_plan

__all__ = ["register_region", "plan_joint", "planned", "sees_unplanned", "RegionPlan"]

_MAX_REGIONS = 4096  # registered regions kept (ids are unique per process; a bound, not a cache)


class _Registry(threading.local):
    def __init__(self) -> None:
        self.regions: dict[Any, Any] = {}  # ac_graph_id -> planning policy
        self.unplanned: set[Any] = set()  # registered by the running compile, not planned yet


_reg = _Registry()


@dataclass(frozen=True)
class RegionPlan:
    """One region planned under compile (tests, the benchmark, ``explain``).

    Attributes:
        graph_id: the region's ``ac_graph_id``; policy: its planning policy.
        positions: graph nodes planned (free), of ``nodes`` in the region.
        baseline: bytes kept with every free node saved; budget: the policy's bytes (None if it has no fraction);
        cost: what the plan keeps and recomputes (``RegionView.cost``); saved: names of the region's nodes
        backward reads from the forward (the rest it recomputes); inputs: the region inputs it holds;
        view, chosen: the ``RegionView`` planned and the positions saved (``view.cost(chosen)`` is ``cost``).
    """

    graph_id: Any
    policy: Any
    positions: int
    nodes: int
    baseline: Cost
    budget: Optional[int]
    cost: Cost
    saved: tuple[str, ...]
    inputs: tuple[str, ...]
    view: Optional[RegionView] = field(default=None, repr=False, compare=False)  # what the planner saw
    chosen: frozenset[int] = field(default=frozenset(), repr=False, compare=False)  # its SAVE positions


def register_region(graph_id: Any, policy: Any) -> None:
    """Remember that the region traced with ``ac_graph_id`` ``graph_id`` is planned by ``policy``."""
    if graph_id is None:
        return
    if len(_reg.regions) >= _MAX_REGIONS and graph_id not in _reg.regions:
        _reg.regions.clear()
    _reg.regions[graph_id] = policy
    if not _reg.unplanned:
        from torch._dynamo import callback_handler  # noqa: PLC0415  (only ever called while compiling)

        if _check_planned not in callback_handler.end_callbacks:
            callback_handler.register_end_callback(_check_planned)
    _reg.unplanned.add(graph_id)


def _check_planned(*_: Any) -> None:
    """Dynamo's compile-end callback: a region registered and never planned ran unmarked; say so once."""
    if not _reg.unplanned:
        return
    _reg.unplanned.clear()
    warn_once(("compiled", "budget-unplanned"),
              "xla_ckpt: a memory_budget region was compiled by a backend whose partitioner xla_ckpt does not "
              "reach (it plans before torch's min-cut under backend='inductor' and 'openxla'; 'aot_eager' and "
              "custom backends pass their own partition_fn): it ran unmarked, torch's partitioner decided. "
              "Wrap the backend's partition_fn with xla_ckpt._compile.budget.planned() to keep the budget.")


def _marks() -> Any:
    from torch.utils.checkpoint import CheckpointPolicy  # noqa: PLC0415

    return CheckpointPolicy


def plan_joint(joint: GraphModule, num_fwd_outputs: int, static_inputs: Any = ()) -> list[RegionPlan]:
    """Plan every registered region of ``joint`` and rewrite its provisional marks (see the module docstring).

    Args:
        joint: AOTAutograd's joint graph, before partitioning.
        num_fwd_outputs: how many of its outputs the forward returns (the rest are gradients).
        static_inputs: indices of the primal inputs that live across steps (parameters, buffers): not
            region inputs, as parameters are not in eager.

    Example:
        >>> plan_joint(joint, num_fwd_outputs=1, static_inputs=[0, 1])
    """
    P = _marks()
    graph = joint.graph
    by_region: dict[Any, list[Node]] = {}
    for n in graph.nodes:
        gid = n.meta.get("ac_graph_id")
        if n.op == "call_function" and gid in _reg.regions and n.meta.get("recompute") is P.PREFER_SAVE:
            by_region.setdefault(gid, [])
    if not by_region:
        return []
    fw = forward_nodes(graph, num_fwd_outputs)
    primals = [n for n in graph.nodes if n.op == "placeholder" and n.name.startswith("primals")]
    static = {primals[i] for i in (static_inputs or ()) if i < len(primals)}
    for n in graph.nodes:
        gid = n.meta.get("ac_graph_id")
        if gid in by_region and n in fw and n.op == "call_function" and not transparent(n):
            by_region[gid].append(n)
    plans: list[RegionPlan] = []
    # Every region of this compile is planned here: one registered but absent from the joint graph came from
    # an earlier trace of the same graph (AOTAutograd traces the forward once to collect metadata, under
    # another ac_graph_id), not from a region the partitioner missed.
    _reg.unplanned.clear()
    for gid, positions in by_region.items():
        try:
            plans.append(_plan_region(gid, _reg.regions[gid], positions, fw, static))
        except Symbolic:
            warn_once(("compiled", "budget-symbolic"), "xla_ckpt: a memory_budget region with symbolic shapes "
                      "(torch.compile(dynamic=True)) is not planned under compile: it runs unmarked (torch's "
                      "partitioner decides). Compile with dynamic=False to keep the budget.")
    return plans


def _plan_region(gid: Any, policy: Any, positions: list[Node], fw: set[Node], static: set[Node]) -> RegionPlan:
    P = _marks()
    pos_of = {n: i for i, n in enumerate(positions)}
    bufs: dict[tuple[Node, Optional[int]], torch.Tensor] = {}

    def buf(key: tuple[Node, Optional[int]]) -> Optional[torch.Tensor]:
        if key not in bufs:
            node, index = key
            v = node.meta.get("val")
            if index is not None and isinstance(v, (tuple, list)):
                v = v[index]
            m = meta_tensor(v)
            if m is None:
                return None
            bufs[key] = m
        return bufs[key]

    def outs(n: Node) -> list[tuple[Node, Optional[int]]]:
        v = n.meta.get("val")
        if isinstance(v, (tuple, list)):
            return [(n, i) for i, x in enumerate(v) if isinstance(x, torch.Tensor)]
        return [(n, None)] if isinstance(v, torch.Tensor) else []

    # Region inputs: buffers read by positions, made outside the region, not parameters.
    input_keys: list[tuple[Node, Optional[int]]] = []
    reads: list[list[tuple[Node, Optional[int]]]] = []
    for n in positions:
        r = []
        for i in n.all_input_nodes:
            k = buffer_of(i)
            if buf(k) is None:
                continue
            r.append(k)
            if k[0] not in pos_of and k not in input_keys and not external(k[0], static):
                input_keys.append(k)
        reads.append(r)
    flow = Dataflow([bufs[k] for k in input_keys])  # each key passed ``buf``: its tensor is in ``bufs``
    calls = []
    for n, r in zip(positions, reads, strict=True):
        out_keys = [k for k in outs(n) if buf(k) is not None]
        flow.op([bufs[k] for k in r], [bufs[k] for k in out_keys], only_tensors=True, must_run=False)
        out = tuple(buf(k) for k in out_keys) if isinstance(n.meta.get("val"), (tuple, list)) else (
            buf(out_keys[0]) if out_keys else None)
        args = torch.fx.node.map_arg(n.args, lambda a: meta_or(a))
        kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: meta_or(a))
        op = n.target if isinstance(n.target, torch._ops.OpOverload) else None
        calls.append(CompiledOpCall(op, args, kwargs, out, "") if op is not None else None)
    # What backward reads: region buffers (outputs, inputs) read by nodes outside the forward.
    packed: list[tuple[Node, Optional[int]]] = []
    for u in backward_readers(positions, input_keys, fw):
        for i in u.all_input_nodes:
            k = buffer_of(i)
            if (k[0] in pos_of or k in input_keys) and k not in packed and buf(k) is not None:
                packed.append(k)
    from xla_ckpt._base.xla import buffer_key  # noqa: PLC0415

    for k in packed:
        flow.pack(buffer_key(bufs[k]))
    marks = [n.meta.get("recompute") for n in positions]
    free = [i for i, m in enumerate(marks) if m is P.PREFER_SAVE and calls[i] is not None]
    fixed = {i for i, m in enumerate(marks) if m in (P.MUST_SAVE, None) or (m is P.PREFER_SAVE and i not in free)}
    view = RegionView(calls, free, fixed, flow, [buf(k) for k in input_keys], flow.packed_keys, prune=True)
    decisions = check_plan(policy, view, policy.plan(view))
    chosen = {p for p, d in zip(free, decisions, strict=True) if d.keeps}
    for p, d in zip(free, decisions, strict=True):
        _set_mark(positions[p], P.MUST_SAVE if d.keeps else P.PREFER_RECOMPUTE)
    fraction = getattr(policy, "fraction", None)
    baseline = view.baseline
    cost, lv = view.evaluate(chosen)
    return RegionPlan(gid, policy, len(free), len(positions), baseline,
                      budget_bytes(fraction, baseline.nbytes) if isinstance(fraction, float) else None,
                      cost, tuple(saved_names(positions, lv, reads, packed)),
                      tuple(key_name(input_keys[i]) for i in sorted(lv.inputs)), view, frozenset(chosen))


def _set_mark(n: Node, mark: Any) -> None:
    """The node's mark, and its ``getitem`` items' (a multi-output op is saved or recomputed whole)."""
    n.meta["recompute"] = mark
    for u in n.users:
        if u.op == "call_function" and u.target is operator.getitem and \
                u.meta.get("ac_graph_id") == n.meta.get("ac_graph_id"):
            u.meta["recompute"] = mark


def planned(partition_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``partition_fn`` that first plans the joint graph's budget regions (:func:`plan_joint`).

    Example:
        >>> backend = aot_autograd(fw_compiler=..., partition_fn=planned(min_cut_rematerialization_partition))
    """
    if getattr(partition_fn, "_xla_ckpt_planned", False):
        return partition_fn

    @functools.wraps(partition_fn)
    def partition(joint: GraphModule, joint_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if "num_fwd_outputs" in kwargs:  # keyword-only in torch's min-cut
            plan_joint(joint, kwargs["num_fwd_outputs"], kwargs.get("static_lifetime_input_indices") or ())
        return partition_fn(joint, joint_inputs, *args, **kwargs)

    partition._xla_ckpt_planned = True  # type: ignore[attr-defined]
    return partition


def sees_unplanned(has_recomputable_ops: Callable[[GraphModule], bool]) -> Callable[[GraphModule], bool]:
    """torch's ``has_recomputable_ops``, also true for a graph holding a region registered and not yet planned.

    torch's ``default_partition`` (``backend="openxla"``'s) calls the min-cut, where regions are planned
    (:func:`planned`), only for a graph with a node marked for recompute; a planning region's ops are
    ``PREFER_SAVE`` until planned, so a region with no other recompute mark would run unmarked (under
    openxla, any small budget region). Once planned, torch's own answer.
    """
    if getattr(has_recomputable_ops, "_xla_ckpt_planned", False):
        return has_recomputable_ops

    @functools.wraps(has_recomputable_ops)
    def sees(fx_g: GraphModule) -> bool:
        if has_recomputable_ops(fx_g):
            return True
        unplanned = _reg.unplanned
        return bool(unplanned) and any(n.meta.get("ac_graph_id") in unplanned for n in fx_g.graph.nodes)

    sees._xla_ckpt_planned = True  # type: ignore[attr-defined]
    return sees
