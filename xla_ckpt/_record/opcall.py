"""What a policy sees (``OpCall``) and what it answers (``Decision``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Optional, Union

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils._pytree import tree_leaves

from xla_ckpt._base import xla as _xla
from xla_ckpt._base.errors import PolicyError

__all__ = ["Decision", "OpCall", "Policy", "OpLike", "op_matcher", "MUST_RETURN", "ask", "not_a_decision",
           "policy_raised", "check_names"]


class Decision(enum.Enum):
    """What happens to an op's outputs inside :func:`xla_ckpt.checkpoint`.

    ``SAVE`` keeps them on the device; ``OFFLOAD`` keeps them too, in host memory between forward and
    backward (CUDA: pinned memory and a side stream; XLA: torch_xla's placement annotations; see the
    README's "Offload" section for what each device does); ``RECOMPUTE`` drops them and recomputes.
    """

    SAVE = "save"  # kept on the device from forward to backward
    OFFLOAD = "offload"  # kept like SAVE, in host memory from the end of forward until backward needs it
    RECOMPUTE = "recompute"  # dropped after forward, recomputed in backward

    @property
    def keeps(self) -> bool:
        """True for SAVE and OFFLOAD: the forward's value is what backward reads (no recompute)."""
        return self is not Decision.RECOMPUTE

    def __repr__(self) -> str:
        return f"Decision.{self.name}"


MUST_RETURN = "a policy must return xla_ckpt.Decision.SAVE, Decision.OFFLOAD or Decision.RECOMPUTE"


@dataclass(frozen=True, eq=False)
class OpCall:
    """One ATen op run inside a checkpoint region, as a policy sees it.

    Attributes:
        op: the ``OpOverload`` (e.g. ``torch.ops.aten.mm.default``).
        args, kwargs: its arguments; ``out``: its outputs (a tensor or a tuple).
        module: fully qualified name of the innermost module running, from the model the user called
            (the outermost module running in this thread; "" is that model itself, or top level).
        tag: the name given with :func:`xla_ckpt.tag` to this op's output, or None.
        nbytes: bytes of the tensor outputs (from shapes); flops: torch's flop-counter estimate, 0 if unknown.
    """

    op: OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any
    module: str = ""
    tag: Optional[str] = None

    @property
    def _sized_out(self) -> Any:
        """What ``nbytes`` and ``flops`` read: the output (under compile, from metadata when it is None)."""
        return self.out

    @cached_property
    def nbytes(self) -> int:
        return sum(_xla.shape_nbytes(t) for t in tree_leaves(self._sized_out) if isinstance(t, torch.Tensor))

    @cached_property
    def flops(self) -> int:
        from torch.utils.flop_counter import flop_registry  # noqa: PLC0415

        formula = flop_registry.get(self.op.overloadpacket)
        if formula is None:
            return 0
        try:
            return int(formula(*self.args, **self.kwargs, out_val=self._sized_out))
        except Exception:  # a formula that cannot read these arguments: unknown, not an error
            return 0

    def __repr__(self) -> str:
        return f"OpCall({self.op}, module={self.module!r}, tag={self.tag!r})"


Policy = Callable[[OpCall], Decision]
OpLike = Union[OpOverload, OpOverloadPacket]


def ask(policy: Policy, call: OpCall, where: str) -> Decision:
    """``policy(call)``, checked: an answer that is not a ``Decision`` is an error, never read as RECOMPUTE;
    an exception of the policy's is a ``PolicyError`` naming the op and the module, chained to it."""
    try:
        decision = policy(call)
    except PolicyError:
        raise  # a member policy's (any_of, offload), named where it raised
    except Exception as exc:
        raise policy_raised(policy, call, exc, where) from exc
    if decision.__class__ is not Decision:
        raise not_a_decision(policy, call, decision, where)
    return decision


def policy_raised(policy: Policy, call: OpCall, exc: BaseException, where: str) -> PolicyError:
    """The error for a policy that raised deciding ``call`` (raise it ``from exc``: the user's traceback stays)."""
    module = f"module '{call.module}'" if call.module else "the region's own code (no submodule)"
    return PolicyError(f"{where}: policy {policy!r} raised {type(exc).__name__}: {exc} while deciding op {call.op} in "
                       f"{module}. The policy's exception is chained below (its traceback shows the line); fix the "
                       "policy, or let it return Decision.SAVE / RECOMPUTE / OFFLOAD for this op.")


def not_a_decision(policy: Policy, call: OpCall, answer: Any, where: str) -> TypeError:
    """The error for a policy answer that is not a ``Decision`` (the engine's hot path checks inline)."""
    return TypeError(f"{where}: policy {policy!r} returned {answer!r} for {call.op} in module "
                     f"'{call.module}'; {MUST_RETURN}")


def selects_by_tag(policy: Any) -> bool:
    """Whether ``policy`` chooses by ``xla_ckpt.tag`` names (a name policy, or a combinator of one)."""
    return bool(getattr(policy, "selects_by_tag", False))


def check_names(names: tuple[Any, ...], where: str) -> tuple[str, ...]:
    """Tag names as a tuple of non-empty strings (none is allowed, as in JAX: nothing matches)."""
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise TypeError(f"{where}: expected tag names (non-empty str), got {bad!r} in {names!r}")
    return tuple(names)


def op_matcher(ops: tuple[Any, ...], where: str) -> frozenset[OpLike]:
    """Validate ``ops`` as op objects (never strings): a packet matches all of its overloads."""
    out = []
    for op in ops:
        if not isinstance(op, (OpOverload, OpOverloadPacket)):
            raise TypeError(
                f"{where}: expected torch op objects such as torch.ops.aten.mm or torch.ops.aten.mm.default, "
                f"got {op!r} ({type(op).__name__}); match ops by object, not by string"
            )
        out.append(op)
    return frozenset(out)


def matches(op: OpOverload, targets: frozenset[OpLike]) -> bool:
    # torch's `op in [aten.mm]` compares an OpOverload to a packet and silently never matches.
    return op in targets or op.overloadpacket in targets


def op_name(op: OpLike) -> str:
    """``aten.mm`` / ``aten.mm.default``: the name :func:`resolve_op` reads back (for pickling, configs)."""
    if isinstance(op, OpOverload):
        return f"{op.namespace}.{op._opname}.{op._overloadname}"
    return f"{op._qualified_op_name.replace('::', '.')}"


def resolve_op(name: str) -> OpLike:
    """The op object named ``ns.op`` (all overloads) or ``ns.op.overload``; KeyError if there is none."""
    parts = name.split(".")
    ns = getattr(torch.ops, parts[0], None) if len(parts) in (2, 3) else None
    packet = getattr(ns, parts[1], None) if ns is not None else None
    if not isinstance(packet, OpOverloadPacket):
        raise KeyError(name)
    if len(parts) == 3:
        if parts[2] not in packet.overloads():
            raise KeyError(name)
        return getattr(packet, parts[2])
    return packet
