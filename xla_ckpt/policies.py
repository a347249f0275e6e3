"""Checkpoint policies as values, and the one registry of their names (the public module).

A policy is any callable ``(OpCall) -> Decision``. Parametrised ones are frozen dataclasses with a
readable repr. ``names()`` is the only list of names: docs, config validation and tests read it.

Example:
    >>> from xla_ckpt import policies
    >>> policies.get("save_only_these_names", names=["qkv"])
    save_only_these_names('qkv')
    >>> xla_ckpt.checkpoint(block, x, policy=policies.any_of(policies.dots_saveable, keep_norms))
    >>> xla_ckpt.checkpoint(block, x, policy=policies.offload("dots_saveable"))  # matmuls to host memory
"""

from xla_ckpt._policy.budget import memory_budget
from xla_ckpt._policy.builtin import (
    DOT_OPS,
    dots_saveable,
    dots_with_no_batch_dims_saveable,
    everything_saveable,
    nothing_saveable,
    recompute_ops,
    save_any_names_but_these,
    save_anything_except_these_names,
    save_only_these_names,
    save_ops,
)
from xla_ckpt._policy.combine import all_of, any_of, from_torch
from xla_ckpt._policy.offload import offload, save_and_offload_only_these_names
from xla_ckpt._policy.registry import _REGISTRY as _REGISTRY  # tests register throwaway presets in it
from xla_ckpt._policy.registry import get, names, register, resolve, suggest

__all__ = [
    "everything_saveable",
    "nothing_saveable",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "save_only_these_names",
    "save_any_names_but_these",
    "save_anything_except_these_names",
    "save_and_offload_only_these_names",
    "save_ops",
    "recompute_ops",
    "any_of",
    "all_of",
    "offload",
    "from_torch",
    "memory_budget",
    "get",
    "names",
    "register",
    "resolve",
    "suggest",
    "DOT_OPS",
]
