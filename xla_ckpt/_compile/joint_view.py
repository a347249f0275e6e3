"""Reading AOTAutograd's joint graph as the planner's ``RegionView`` needs it (``_compile.budget``).

A region's values are graph nodes: a buffer is ``(producer, item)``, reached through views, ``detach`` and a
multi-output op's ``getitem`` (which make no buffer of their own); shapes come from the fake values
(``node.meta["val"]``), copied to meta tensors so ``_base.xla.buffer_key`` names each buffer once.
"""

from __future__ import annotations

import operator
from typing import Any, Optional, cast

import torch
from torch.fx import Node

from xla_ckpt._compile.opcall import skipped

__all__ = ["transparent", "buffer_of", "meta_tensor", "Symbolic", "forward_nodes", "saved_names", "key_name",
           "meta_or", "external", "backward_readers"]


def transparent(n: Node) -> bool:
    """Nodes that make no buffer of their own: views, detach, ``_unsafe_view``, a multi-output op's item."""
    if n.op != "call_function":
        return False
    t = n.target
    if t is operator.getitem:
        return True
    return isinstance(t, torch._ops.OpOverload) and skipped(t) and bool(n.args) and isinstance(n.args[0], Node)


def buffer_of(n: Node) -> tuple[Node, Optional[int]]:
    """The buffer behind node ``n``: ``(producer, index)``, through views and ``getitem``."""
    index: Optional[int] = None
    while transparent(n):
        if n.target is operator.getitem:
            index = n.args[1] if isinstance(n.args[1], int) else None
        n = cast(Node, n.args[0])  # a view's or getitem's first argument: the node it reads
    return n, index


def meta_tensor(v: Any) -> Optional[torch.Tensor]:
    if not isinstance(v, torch.Tensor):
        return None
    if any(not isinstance(s, int) for s in (*v.shape, *v.stride())):
        raise Symbolic()
    return torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")


class Symbolic(Exception):
    """A region with symbolic shapes (``dynamic=True``): not planned."""


def forward_nodes(graph: Any, num_fwd_outputs: int) -> set[Node]:
    """Nodes the forward's outputs need (AOTAutograd's required forward nodes)."""
    out = next(n for n in reversed(graph.nodes) if n.op == "output")
    stack: list[Node] = []
    torch.fx.node.map_arg(tuple(out.args[0][:num_fwd_outputs]), stack.append)
    seen: set[Node] = set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def saved_names(positions: list[Node], lv: Any, reads: list[list[Any]], packed: list[Any]) -> list[str]:
    """Names of the values the plan keeps: a saved node, or the items read of a multi-output one."""
    read = set(packed).union(*(reads[p] for p in lv.live))
    names = []
    for p in sorted(lv.cached):
        n = positions[p]
        if isinstance(n.meta.get("val"), (tuple, list)):
            names += [u.name for u in n.users if u.target is operator.getitem and (n, u.args[1]) in read]
        else:
            names.append(n.name)
    return names


def key_name(key: tuple[Node, Optional[int]]) -> str:
    """The graph's name for a buffer: the node, or its ``getitem`` item."""
    node, index = key
    if index is None:
        return node.name
    return next((u.name for u in node.users if u.target is operator.getitem and u.args[1] == index), node.name)


def meta_or(a: Any) -> Any:
    v = a.meta.get("val") if isinstance(a, Node) else a
    return meta_tensor(v) if isinstance(v, torch.Tensor) else v


def external(n: Node, static: set[Node]) -> bool:
    """Parameters and constants: outside every region's bytes (as in eager)."""
    return n in static or n.op == "get_attr"


def backward_readers(positions: list[Node], input_keys: list[Any], fw: set[Node]) -> list[Node]:
    """Nodes outside the forward that read a region buffer (directly or through views): backward's reads."""
    out: list[Node] = []
    seen: set[Node] = set()
    stack = [*positions, *(k[0] for k in input_keys)]
    while stack:
        n = stack.pop()
        for u in n.users:
            if u in seen:
                continue
            seen.add(u)
            if transparent(u):
                stack.append(u)  # a view's readers read its base
            if u not in fw and u.op != "output":
                out.append(u)
    return out
