"""Fenced recompute in a compiled backward: each recomputed chain waits for the gradient that first needs it.

After AOTAutograd's min-cut partitioner honours the policy's marks, the backward graph recomputes
each region's dropped values from what the forward saved. Nothing in that graph orders a
recomputation after the gradient that needs it, so XLA is free to run every region's recompute at the
start of backward, all alive at once: the compiled backward then keeps little of the saving
(default GPT, XLA:CPU: megatron_selective 0.94x and full 0.84x of compiled ``none``).

:func:`fence_backward` adds the lazy engine's fence (``_record.replay_state.Fence``; docs/design.md,
"The fence on XLA, measured") to the partitioned backward graph: for each region (``ac_graph_id``) it finds
the first backward node that reads the region's recomputed values, takes one element ``s`` of a
gradient that node reads, forms ``z = where(s != s, s, 0)`` (zero unless the gradient is NaN: the
compiler cannot fold it) and adds ``z`` to every saved tensor the recomputation starts from. The
recompute then cannot run before that gradient exists. Values are unchanged (``t + 0``; a NaN
gradient stays NaN). Parameters are not fenced (a weight-sized copy for nothing: a recompute that
reads a weight also reads a fenced activation).

:func:`fenced` wraps any partition function (AOTAutograd + min-cut + marks, as torch_tpu's backend);
under ``backend="openxla"`` the library installs it for the compile of a checkpointed XLA region
(``_base.compile_scope``), because that backend's default partitioner calls torch's min-cut by name.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch.fx import GraphModule, Node

__all__ = ["fence_backward", "fenced", "FENCE_KEY"]

aten = torch.ops.aten
FENCE_KEY = "xla_ckpt_fence"  # node meta on the nodes the fence adds (tests count them)


def _recompute_marks() -> tuple[Any, ...]:
    from torch.utils.checkpoint import CheckpointPolicy  # noqa: PLC0415

    return (CheckpointPolicy.PREFER_RECOMPUTE, CheckpointPolicy.MUST_RECOMPUTE)


def _val(n: Any) -> Any:
    return n.meta.get("val") if isinstance(n, Node) else None


def _is_float_tensor(n: Node) -> bool:
    v = _val(n)
    return isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() > 0


def _is_parameter(n: Node) -> bool:
    # AOTAutograd names the forward's inputs primals_*; the backward keeps the name for a saved input.
    return n.op == "placeholder" and n.name.startswith("primals")


def fence_backward(bw: GraphModule) -> int:
    """Tie every recomputed chain of ``bw`` to the gradient that first needs it; returns the chains fenced.

    Example:
        >>> fw, bw = min_cut_rematerialization_partition(joint, inputs, num_fwd_outputs=n)
        >>> fence_backward(bw)
    """
    graph = bw.graph
    nodes = list(graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    grad_dep: set[Node] = set()
    for n in nodes:
        if (n.op == "placeholder" and n.name.startswith("tangents")) or any(i in grad_dep for i in n.all_input_nodes):
            grad_dep.add(n)
    marks = _recompute_marks()
    chains: dict[Any, list[Node]] = {}
    for n in nodes:
        if n.op == "call_function" and n not in grad_dep and n.meta.get("recompute") in marks:
            chains.setdefault(n.meta.get("ac_graph_id"), []).append(n)
    fenced_chains = 0
    for chain in chains.values():
        members = set(chain)
        consumers = [u for n in chain for u in n.users if u not in members]
        if not consumers:
            continue
        first = min(consumers, key=order.__getitem__)
        grads = [i for i in first.all_input_nodes if i in grad_dep and _is_float_tensor(i)]
        if not grads:  # the chain feeds another recompute first: the latest gradient before it
            grads = [n for n in nodes[: order[first]] if n in grad_dep and _is_float_tensor(n)][-1:]
        if not grads:
            continue
        starts = sorted({i for n in chain for i in n.all_input_nodes
                         if i not in members and i not in grad_dep and not _is_parameter(i) and _is_float_tensor(i)},
                        key=order.__getitem__)
        if not starts:
            continue
        _fence(graph, grads[0], starts, members)
        fenced_chains += 1
    if fenced_chains:
        _topological_sort(graph)
        graph.lint()
        bw.recompile()
    return fenced_chains


def _fence(graph: Any, grad: Node, starts: list[Node], members: set[Node]) -> None:
    """``start + where(s != s, s, 0)`` for each start, read by the chain instead of the start."""
    with graph.inserting_after(grad):
        flat = graph.call_function(aten.reshape.default, (grad, [-1]))
    with graph.inserting_after(flat):
        s = graph.call_function(aten.select.int, (flat, 0, 0))
    with graph.inserting_after(s):
        nan = graph.call_function(aten.ne.Tensor, (s, s))
    with graph.inserting_after(nan):
        z = graph.call_function(aten.where.ScalarOther, (nan, s, 0.0))
    added = [flat, s, nan, z]
    by_dtype: dict[torch.dtype, Node] = {_val(grad).dtype: z}
    last = z
    for t in starts:
        dtype = _val(t).dtype
        if dtype not in by_dtype:
            with graph.inserting_after(last):
                by_dtype[dtype] = last = graph.call_function(aten._to_copy.default, (z,), {"dtype": dtype})
            added.append(last)
        with graph.inserting_after(last):
            last = graph.call_function(aten.add.Tensor, (t, by_dtype[dtype]))
        last.meta["val"] = _val(t)
        added.append(last)
        for user in list(t.users):
            if user in members:
                user.replace_input_with(t, last)
    for n in added:
        n.meta[FENCE_KEY] = True


def _topological_sort(graph: Any) -> None:
    """Reorder ``graph`` so every node follows its inputs, otherwise keeping the current order."""
    import heapq  # noqa: PLC0415

    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    waiting = {n: len(set(n.all_input_nodes)) for n in nodes}
    ready = [(pos[n], n.name) for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    by_name = {n.name: n for n in nodes}
    out: list[Node] = []
    while ready:
        _, name = heapq.heappop(ready)
        n = by_name[name]
        out.append(n)
        for u in n.users:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (pos[u], u.name))
    if len(out) != len(nodes):
        raise RuntimeError("xla_ckpt: the fenced backward graph has a cycle (a bug: please report it)")
    # Placeholders stay first and the output last (both are already in place in a topological order).
    cur = out[0]
    for n in out[1:]:
        cur.append(n)
        cur = n


def fenced(partition_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``partition_fn`` whose backward graph is fenced (:func:`fence_backward`); for ``aot_autograd``.

    Example:
        >>> backend = aot_autograd(fw_compiler=..., partition_fn=fenced(min_cut_rematerialization_partition))
    """
    if getattr(partition_fn, "_xla_ckpt_fenced", False):
        return partition_fn

    @functools.wraps(partition_fn)
    def partition(*args: Any, **kwargs: Any) -> Any:
        fw, bw = partition_fn(*args, **kwargs)
        fence_backward(bw)
        separate_saved_writes(fw, kwargs.get("num_fwd_outputs"))
        return fw, bw

    partition._xla_ckpt_fenced = True  # type: ignore[attr-defined]
    return partition


def separate_saved_writes(fw: GraphModule, num_fwd_outputs: Any) -> int:
    """Save its own copy (``add(v, 0)``) of each value the forward writes to one of its inputs and also
    saves for backward; returns the copies made.

    Such a value appears twice in the forward's return: first as the new value AOTAutograd's epilogue
    copies into the input (a buffer the region advances, ``self.n.add_(1)``; the write is saved,
    ``_compile.input_writes``), then as a value backward reads (``1 + 0.1 * n`` recomputed from it).
    Under ``openxla`` torch_xla's bridge would take the saved value's device data for a constant of the
    backward graph (after the epilogue's copy it is the buffer's): backward would read the first step's value
    at every step, silently (x.grad 1.1, 1.1, 1.1 where the plain compile gives 1.1, 1.2, 1.3). ``clone`` is no
    copy there (the same lazy IR value). The partition does not say which of the forward's first
    ``num_fwd_outputs`` outputs are written inputs and which the user's, so every value the forward both
    returns there and saves is copied: its bytes once more, for a graph output that backward reads too.
    """
    if not isinstance(num_fwd_outputs, int):
        return 0
    graph = fw.graph
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    outs = list(output.args[0])
    writes = {n for n in outs[:num_fwd_outputs] if isinstance(n, Node) and n.op == "call_function"}
    copies = 0
    for i in range(num_fwd_outputs, len(outs)):
        n = outs[i]
        v = _val(n)
        # add(v, 0) keeps every dtype but bool's (promoted to an integer): a bool value stays as it was
        if isinstance(n, Node) and n in writes and isinstance(v, torch.Tensor) and v.dtype != torch.bool:
            with graph.inserting_before(output):
                outs[i] = graph.call_function(aten.add.Tensor, (n, 0))
            outs[i].meta["val"] = v
            copies += 1
    if copies:
        output.update_arg(0, tuple(outs))
        graph.lint()
        fw.recompile()
    return copies
