"""Random ops marked for recompute that the min-cut did not recompute: torch's RNG pass, told so.

A random op the policy recomputes is marked ``PREFER_RECOMPUTE``; after the min-cut, torch's
``functionalize_rng_ops`` pairs each such op of the joint graph with its copy in the forward graph
(``run_and_save_rng_state``) and in the backward graph (``run_with_rng_state``), so the recompute
draws the forward's numbers. An op the backward does not need (``b * torch.randn_like(b)`` with ``b``
not requiring grad, ``x + noise``, a mask whose comparison the min-cut saved) has no backward copy,
and torch before 2.11 looks it up anyway: ``KeyError: 'randn_like'`` out of the compile
(``BackendCompilerFailed``), where the same program compiled without xla_ckpt runs. torch 2.11
skips such ops (pytorch/pytorch#172730); :func:`present_only` does the same on every version: an
op with no backward copy just runs in the forward, drawing as the plain compile does.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from xla_ckpt._base.errors import CheckpointError

__all__ = ["present_only"]


def _random(node: Any) -> bool:
    return node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())


def _names(gm: Any) -> set[str]:
    return {n.name for n in gm.graph.nodes if _random(n)}


def present_only(functionalize: Callable[..., Any]) -> Callable[..., Any]:
    """torch's ``functionalize_rng_ops``, given only the recomputed random ops that both graphs run."""
    if getattr(functionalize, "_xla_ckpt_rng", False):
        return functionalize

    @functools.wraps(functionalize)
    def wrapper(joint_module: Any, fw_module: Any, bw_module: Any, *args: Any, **kwargs: Any) -> Any:
        from torch._functorch.partitioners import must_recompute  # noqa: PLC0415

        fw, bw = _names(fw_module), _names(bw_module)
        unmarked = []
        for node in joint_module.graph.nodes:
            if not (_random(node) and must_recompute(node)) or (node.name in fw and node.name in bw):
                continue
            if node.name in bw:  # recomputed without a forward run to take the numbers from: fresh numbers
                raise CheckpointError(
                    f"xla_ckpt: random op {node.target} ({node.name}) is recomputed in the backward graph but "
                    "its forward graph does not run it, so the recompute would draw fresh random numbers. "
                    "Save it (the policy's Decision.SAVE for this op) or run the region uncompiled.")
            unmarked.append((node, node.meta.pop("recompute")))
        try:
            return functionalize(joint_module, fw_module, bw_module, *args, **kwargs)
        finally:
            for node, mark in unmarked:
                node.meta["recompute"] = mark

    wrapper._xla_ckpt_rng = True  # type: ignore[attr-defined]
    return wrapper
