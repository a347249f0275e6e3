"""The one place an op's checkpoint decision is made, for every lowering (eager, lazy XLA, torch.compile).

Each lowering gathers the facts only it can see (whether the op writes, whether the forward's values must
be kept) and asks ``decide``; the rules and their order live here alone, as JAX's remat rule decides in one
place whatever interprets it:

1. The forward's values must be kept (``keep``): a draw no generator can make again (XLA's ``randperm``),
   a random op compiled for XLA (the partitioner cannot replay its RNG there), a write to an input's copy
   under compile. A hard SAVE.
2. The op writes (``writes``: its schema says so, or its output was written before it was decided): it must
   run again on the recomputed tensors. A hard RECOMPUTE.
3. A planning policy (``planning``) decides with the whole region at the end of forward: SAVE until then.
4. Otherwise the policy's own answer, checked: anything but a ``Decision`` is an error, and an exception
   the policy raises is re-raised as a ``PolicyError`` naming the op and the module, chained to it.

Hard decisions correspond to torch's ``MUST_*`` marks; the rest are preferences (``PREFER_*``) a planner or
torch's min-cut may revisit.

Example:
    >>> decision, why = decide(policies.get("dots_saveable"), call, keep=False, writes=False, planning=False)
    >>> why is Why.POLICY
    True
"""

from __future__ import annotations

import enum
from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._record.opcall import Decision, OpCall, Policy, not_a_decision, policy_raised

__all__ = ["Why", "decide"]


class Why(enum.Enum):
    """Which rule of ``decide`` gave the decision (see the module docstring)."""

    KEEP = 1  # rule 1: hard SAVE
    WRITES = 2  # rule 2: hard RECOMPUTE
    PLANNED = 3  # rule 3: SAVE until the region's plan decides
    POLICY = 4  # rule 4: the policy's answer

    @property
    def hard(self) -> bool:
        """Whether no planner or partitioner may change the decision (torch's ``MUST_*``)."""
        return self is Why.KEEP or self is Why.WRITES


_SAVE, _RECOMPUTE = Decision.SAVE, Decision.RECOMPUTE


def decide(policy: Policy, call: OpCall, keep: bool, writes: bool, planning: bool,
           where: str = "checkpoint policy") -> tuple[Decision, Why]:
    """Decide one op (the rules above, in order); ``where`` names the lowering in errors.

    Args:
        policy: the region's policy (``planning``: it plans the whole region, ``_policy.plan.plans``).
        call: the op being decided.
        keep: the forward's values must be kept (rule 1).
        writes: the op writes in place (rule 2).
        planning: ``_policy.plan.plans(policy)``, computed once per policy by the caller (the per-op path).
        where: the lowering, for error messages.
    """
    if keep:
        return _SAVE, Why.KEEP
    if writes:
        return _RECOMPUTE, Why.WRITES
    if planning:
        return _SAVE, Why.PLANNED
    try:
        decision = policy(call)
    except CheckpointError:
        raise
    except Exception as e:
        raise policy_raised(policy, call, e, where) from e
    if decision.__class__ is not Decision:  # not isinstance: this is the per-op path
        raise not_a_decision(policy, call, decision, where)
    return decision, Why.POLICY

