"""Built-in checkpoint policies, as values, and the one registry of their names.

A policy is any callable ``(OpCall) -> Decision``. Parametrised ones are frozen dataclasses with a
readable repr. ``names()`` is the only list of names: docs, config validation and tests read it.

Example:
    >>> from xla_ckpt import policies
    >>> policies.get("save_only_these_names", names=["qkv"])
    save_only_these_names('qkv')
    >>> xla_ckpt.checkpoint(block, x, policy=policies.any_of(policies.dots_saveable, keep_norms))
    >>> xla_ckpt.checkpoint(block, x, policy=policies.offload("dots_saveable"))  # matmuls to host memory
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional

import torch

from xla_ckpt._budget import memory_budget
from xla_ckpt._dots import DOT_PACKETS, dot_batch
from xla_ckpt._offload_policies import offload, save_and_offload_only_these_names
from xla_ckpt._plan import plans
from xla_ckpt._policy import Decision, OpCall, OpLike, Policy, ask as _ask, check_names as _check_names, matches, op_matcher
from xla_ckpt._policy import selects_by_tag as _selects_by_tag
from xla_ckpt._policy import op_name, resolve_op

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


def _check_policies(ps: tuple[Any, ...], where: str) -> tuple[Policy, ...]:
    if not ps:
        raise TypeError(f"{where}: needs at least one policy")
    out = tuple(resolve(p, where=where) for p in ps)
    for p in out:
        if plans(p):
            raise TypeError(f"{where}: {p!r} plans a whole region and cannot be combined op by op; use it alone")
    return out


@dataclass(frozen=True)
class any_of:  # noqa: N801
    """The most keeping answer: SAVE if any policy says SAVE, else OFFLOAD if any says OFFLOAD, else RECOMPUTE.

    (Decisions ordered by what stays on the device: SAVE > OFFLOAD > RECOMPUTE; ``any_of`` takes the
    maximum, ``all_of`` the minimum. Without OFFLOAD this is "save when any says SAVE".)
    """

    policies: tuple[Policy, ...]

    def __init__(self, *policies: Policy | str) -> None:
        object.__setattr__(self, "policies", _check_policies(policies, "policies.any_of"))

    @property
    def selects_by_tag(self) -> bool:
        return any(map(_selects_by_tag, self.policies))

    def __call__(self, call: OpCall) -> Decision:
        best = RECOMPUTE
        for p in self.policies:
            d = _ask(p, call, "policies.any_of")
            if d is SAVE:
                return SAVE
            if d is OFFLOAD:
                best = OFFLOAD
        return best

    def __repr__(self) -> str:
        return f"any_of({', '.join(map(repr, self.policies))})"


@dataclass(frozen=True)
class all_of:  # noqa: N801
    """The least keeping answer: RECOMPUTE if any policy says RECOMPUTE, else OFFLOAD if any says OFFLOAD, else SAVE.

    An op is kept only when every policy keeps it, and kept on the device only when every policy says SAVE.
    """

    policies: tuple[Policy, ...]

    def __init__(self, *policies: Policy | str) -> None:
        object.__setattr__(self, "policies", _check_policies(policies, "policies.all_of"))

    @property
    def selects_by_tag(self) -> bool:
        return any(map(_selects_by_tag, self.policies))

    def __call__(self, call: OpCall) -> Decision:
        worst = SAVE
        for p in self.policies:
            d = _ask(p, call, "policies.all_of")
            if d is RECOMPUTE:
                return RECOMPUTE
            if d is OFFLOAD:
                worst = OFFLOAD
        return worst

    def __repr__(self) -> str:
        return f"all_of({', '.join(map(repr, self.policies))})"


@dataclass(frozen=True)
class from_torch:  # noqa: N801
    """Adapt a torch SAC policy ``(ctx, op, *args, **kwargs) -> CheckpointPolicy | bool``.

    ``MUST_SAVE``/``PREFER_SAVE``/``True`` mean SAVE; the recompute ones and ``False`` mean RECOMPUTE.
    """

    fn: Callable[..., Any]

    def __call__(self, call: OpCall) -> Decision:
        from torch.utils.checkpoint import CheckpointPolicy, SelectiveCheckpointContext  # noqa: PLC0415

        out = self.fn(SelectiveCheckpointContext(is_recompute=False), call.op, *call.args, **call.kwargs)
        if isinstance(out, bool):
            return SAVE if out else RECOMPUTE
        if out in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            return SAVE
        if out in (CheckpointPolicy.MUST_RECOMPUTE, CheckpointPolicy.PREFER_RECOMPUTE):
            return RECOMPUTE
        raise TypeError(
            f"policies.from_torch({getattr(self.fn, '__name__', self.fn)!r}) returned {out!r} for {call.op}; "
            "a torch SAC policy must return a CheckpointPolicy or a bool"
        )

    def __repr__(self) -> str:
        return f"from_torch({getattr(self.fn, '__qualname__', repr(self.fn))})"


def _builtin(name: str) -> Policy:
    return globals()[name]


def _ops_policy(kind: str, names: tuple[str, ...]) -> Policy:
    return globals()[kind](*(resolve_op(n) for n in names))


# --------------------------------------------------------------------------- the registry

_REGISTRY: dict[str, Callable[..., Policy]] = {}


def register(name: str, factory: Callable[..., Policy]) -> None:
    """Add a policy factory under ``name`` (``get(name, **params)`` calls ``factory(**params)``)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"policies.register: name must be an identifier, got {name!r}")
    if name in _REGISTRY:
        raise ValueError(f"policies.register: {name!r} is already registered")
    if not callable(factory):
        raise TypeError(f"policies.register: factory for {name!r} must be callable, got {factory!r}")
    _REGISTRY[name] = factory


def names() -> list[str]:
    """Every registered policy name, sorted."""
    return sorted(_REGISTRY)


def suggest(name: str) -> str:
    """A sentence for an unknown policy ``name``: the registered names it likely meant, and the preset
    it may be (presets such as ``dots`` name a whole ``apply`` config, not a policy)."""
    from xla_ckpt._presets import preset_names  # noqa: PLC0415  (a file listing, importing nothing of ours)

    text = str(name)
    close = [n for n in names() if text and (n.startswith(text) or text in n)]
    close += [n for n in difflib.get_close_matches(text, names(), n=3) if n not in close]
    out = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    if text in preset_names():
        out += (f" {text!r} is a preset (a whole config for apply: xla_ckpt.apply(model, {text!r})), not a "
                "policy for one module.")
    return out


def get(name: str, **params: Any) -> Policy:
    """The policy registered as ``name``, built with ``params``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown checkpoint policy {name!r}; valid names: {', '.join(names())}.{suggest(name)}")
    factory = _REGISTRY[name]
    try:
        allowed = list(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        allowed = None
    if allowed is not None and (set(params) - set(allowed) or any(
            p.default is inspect.Parameter.empty and k not in params
            for k, p in inspect.signature(factory).parameters.items())):
        takes = ", ".join(allowed) if allowed else "no parameters"
        raise TypeError(f"policy {name!r}: bad parameters {params!r}; it takes: {takes}")
    try:
        return factory(**params)
    except TypeError as e:
        raise TypeError(f"policy {name!r}: bad parameters {params!r}: {e}") from None


def resolve(policy: Any, where: str = "policy") -> Policy:
    """A policy from a registered name or a callable; anything else is a clear error."""
    if isinstance(policy, str):
        return get(policy)
    if callable(policy):
        return policy
    raise TypeError(f"{where}: expected a policy name ({', '.join(names())}) or a callable, got {policy!r}")


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
register(
    "save_and_offload_only_these_names",
    lambda names_which_can_be_saved=(), names_which_can_be_offloaded=(): save_and_offload_only_these_names(
        names_which_can_be_saved=names_which_can_be_saved, names_which_can_be_offloaded=names_which_can_be_offloaded),
)
register("any_of", lambda policies: any_of(*policies))
register("all_of", lambda policies: all_of(*policies))
register("offload", lambda policy: offload(policy))
register("from_torch", lambda fn: from_torch(fn))
register("memory_budget", lambda fraction: memory_budget(fraction))
