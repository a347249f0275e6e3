"""Policies made of policies: ``any_of``, ``all_of``, and ``from_torch`` (a torch SAC policy function)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from xla_ckpt._record.opcall import Decision, OpCall, Policy, ask as _ask
from xla_ckpt._record.opcall import selects_by_tag as _selects_by_tag
from xla_ckpt._policy.plan import plans
from xla_ckpt._policy.registry import register, resolve

__all__ = ["any_of", "all_of", "from_torch"]

SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE


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


register("any_of", lambda policies: any_of(*policies))
register("all_of", lambda policies: all_of(*policies))
register("from_torch", lambda fn: from_torch(fn))
