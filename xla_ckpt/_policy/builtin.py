"""Built-in checkpoint policies, as values, registered under their names (``_policy.registry``).

A policy is any callable ``(OpCall) -> Decision``. Parametrised ones are frozen dataclasses with a
readable repr.

Example:
    >>> from xla_ckpt import policies
    >>> policies.get("save_only_these_names", names=["qkv"])
    save_only_these_names('qkv')
    >>> xla_ckpt.checkpoint(block, x, policy=policies.any_of(policies.dots_saveable, keep_norms))
    >>> xla_ckpt.checkpoint(block, x, policy=policies.offload("dots_saveable"))  # matmuls to host memory
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional

import torch

from xla_ckpt._record.opcall import Decision, OpCall, OpLike, Policy, check_names as _check_names, matches, op_matcher
from xla_ckpt._record.opcall import op_name, resolve_op
from xla_ckpt._policy.dots import DOT_PACKETS, dot_batch
from xla_ckpt._policy.registry import register

__all__ = [
    "everything_saveable",
    "nothing_saveable",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "save_only_these_names",
    "save_any_names_but_these",
    "save_anything_except_these_names",
    "save_ops",
    "recompute_ops",
    "DOT_OPS",
]

aten = torch.ops.aten
SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE


DOT_OPS: frozenset[OpLike] = DOT_PACKETS
"""Matmul-class ops (packets): mm, addmm, bmm, baddbmm, einsum, convolution, attention kernels."""


@dataclass(frozen=True)
class _Constant:
    decision: Decision
    name: str

    def __call__(self, call: OpCall) -> Decision:
        return self.decision

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[Any, ...]:
        return (_builtin, (self.name,))  # a module-level value: pickles by name


everything_saveable = _Constant(SAVE, "everything_saveable")
"""Save every output: no recompute (memory as without checkpointing)."""
nothing_saveable = _Constant(RECOMPUTE, "nothing_saveable")
"""Recompute everything: only the region's inputs are kept."""


@dataclass(frozen=True)
class _Dots:
    """Save matmul-class outputs whose batch size (read from the shapes) is at most ``max_batch``."""

    max_batch: Optional[int]
    name: str

    def __call__(self, call: OpCall) -> Decision:
        batch = dot_batch(call.op, call.args)
        if batch is None or (self.max_batch is not None and batch > self.max_batch):
            return RECOMPUTE
        return SAVE

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[Any, ...]:
        return (_builtin, (self.name,))


dots_saveable = _Dots(None, "dots_saveable")
"""Save matmul-class outputs (mm, addmm, bmm, baddbmm, einsum, convolution, attention kernels); recompute
the rest (JAX's ``dots_saveable``)."""
dots_with_no_batch_dims_saveable = _Dots(1, "dots_with_no_batch_dims_saveable")
"""Save contractions without batch dimensions (batch size 1, from the shapes: mm, addmm, convolution, a
2-D einsum's bmm of batch 1); recompute batched ones such as attention scores, and everything else:
JAX's ``dots_with_no_batch_dims_saveable``, Megatron's "selective" recomputation."""


@dataclass(frozen=True)
class save_ops:  # noqa: N801  (a value-like policy constructor, named like the built-ins)
    """Save the outputs of these ops (``OpOverload`` or ``OpOverloadPacket``), recompute the rest."""

    ops: frozenset[OpLike]

    def __init__(self, *ops: OpLike) -> None:
        object.__setattr__(self, "ops", op_matcher(ops, "policies.save_ops"))

    def __call__(self, call: OpCall) -> Decision:
        return SAVE if matches(call.op, self.ops) else RECOMPUTE

    def __repr__(self) -> str:
        return f"save_ops({', '.join(sorted(map(str, self.ops)))})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Op objects do not pickle: their names do.
        return (_ops_policy, ('save_ops', tuple(sorted(op_name(o) for o in self.ops))))


@dataclass(frozen=True)
class recompute_ops:  # noqa: N801
    """Recompute the outputs of these ops, save the rest."""

    ops: frozenset[OpLike]

    def __init__(self, *ops: OpLike) -> None:
        object.__setattr__(self, "ops", op_matcher(ops, "policies.recompute_ops"))

    def __call__(self, call: OpCall) -> Decision:
        return RECOMPUTE if matches(call.op, self.ops) else SAVE

    def __repr__(self) -> str:
        return f"recompute_ops({', '.join(sorted(map(str, self.ops)))})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Op objects do not pickle: their names do.
        return (_ops_policy, ('recompute_ops', tuple(sorted(op_name(o) for o in self.ops))))


@dataclass(frozen=True)
class save_only_these_names:  # noqa: N801
    """Save only outputs tagged (``xla_ckpt.tag``) with one of these names; recompute the rest.

    JAX's policy of the same name: untagged outputs are never saved; no names saves nothing.
    """

    names: tuple[str, ...]
    selects_by_tag: ClassVar[bool] = True  # the engine warns when a region has no tag

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", _check_names(names, "policies.save_only_these_names"))

    def __call__(self, call: OpCall) -> Decision:
        return SAVE if call.tag is not None and call.tag in self.names else RECOMPUTE

    def __repr__(self) -> str:
        return f"save_only_these_names({', '.join(map(repr, self.names))})"


@dataclass(frozen=True)
class save_any_names_but_these:  # noqa: N801
    """Save only *tagged* outputs, except those tagged with one of these names; recompute the rest.

    JAX's policy of the same name: untagged outputs are never saved; no names saves every tagged
    output. To save everything except some names, use :class:`save_anything_except_these_names`.
    """

    names: tuple[str, ...]
    selects_by_tag: ClassVar[bool] = True  # the engine warns when a region has no tag

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", _check_names(names, "policies.save_any_names_but_these"))

    def __call__(self, call: OpCall) -> Decision:
        return SAVE if call.tag is not None and call.tag not in self.names else RECOMPUTE

    def __repr__(self) -> str:
        return f"save_any_names_but_these({', '.join(map(repr, self.names))})"


@dataclass(frozen=True)
class save_anything_except_these_names:  # noqa: N801
    """Save every output, tagged or not, except those tagged with one of these names (JAX's policy)."""

    names: tuple[str, ...]
    selects_by_tag: ClassVar[bool] = True  # the engine warns when a region has no tag

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", _check_names(names, "policies.save_anything_except_these_names"))

    def __call__(self, call: OpCall) -> Decision:
        return RECOMPUTE if call.tag is not None and call.tag in self.names else SAVE

    def __repr__(self) -> str:
        return f"save_anything_except_these_names({', '.join(map(repr, self.names))})"


def _builtin(name: str) -> Policy:
    return globals()[name]


def _ops_policy(kind: str, names: tuple[str, ...]) -> Policy:
    return globals()[kind](*(resolve_op(n) for n in names))


def _constant(p: Policy) -> Callable[[], Policy]:
    return lambda: p


register("everything_saveable", _constant(everything_saveable))
register("nothing_saveable", _constant(nothing_saveable))
register("dots_saveable", _constant(dots_saveable))
register("dots_with_no_batch_dims_saveable", _constant(dots_with_no_batch_dims_saveable))
register("save_only_these_names", lambda names=(): save_only_these_names(*names))
register("save_any_names_but_these", lambda names=(): save_any_names_but_these(*names))
register("save_anything_except_these_names", lambda names=(): save_anything_except_these_names(*names))
register("save_ops", lambda ops: save_ops(*ops))
register("recompute_ops", lambda ops: recompute_ops(*ops))
