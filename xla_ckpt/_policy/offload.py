"""Policies that answer ``Decision.OFFLOAD``: ``offload(policy)`` and JAX's ``save_and_offload_only_these_names``.

Re-exported and registered by :mod:`xla_ckpt.policies` (the one registry); what OFFLOAD does on each
device is in :mod:`xla_ckpt._engine.offload`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from xla_ckpt._policy.plan import plans
from xla_ckpt._policy.registry import register, resolve
from xla_ckpt._record.opcall import Decision, OpCall, Policy, ask, check_names, selects_by_tag

__all__ = ["offload", "save_and_offload_only_these_names"]

SAVE, OFFLOAD, RECOMPUTE = Decision.SAVE, Decision.OFFLOAD, Decision.RECOMPUTE


@dataclass(frozen=True)
class offload:  # noqa: N801
    """Offload what ``policy`` saves: its SAVE becomes OFFLOAD, its other answers stay.

    Args:
        policy: a registered name or any ``(OpCall) -> Decision``.

    Example:
        >>> xla_ckpt.checkpoint(block, x, policy=policies.offload("dots_saveable"))
        >>> # in a config: policy = { name = "offload", policy = "dots_saveable" }
    """

    policy: Policy

    def __init__(self, policy: Policy | str) -> None:
        inner = resolve(policy, where="policies.offload")
        if plans(inner):
            raise TypeError(f"policies.offload: {inner!r} plans a whole region and cannot be wrapped op by op; "
                            "use it alone")
        object.__setattr__(self, "policy", inner)

    @property
    def selects_by_tag(self) -> bool:
        return selects_by_tag(self.policy)

    def __call__(self, call: OpCall) -> Decision:
        d = ask(self.policy, call, "policies.offload")
        return OFFLOAD if d is SAVE else d

    def __repr__(self) -> str:
        return f"offload({self.policy!r})"


@dataclass(frozen=True)
class save_and_offload_only_these_names:  # noqa: N801
    """Save outputs tagged with a name in ``names_which_can_be_saved``, offload (``Decision.OFFLOAD``)
    those tagged with a name in ``names_which_can_be_offloaded``, recompute the rest (untagged ones too).

    JAX's policy of the same name: keyword-only, and a name may not be in both lists. JAX's
    ``offload_src`` / ``offload_dst`` have no counterpart here: the host tier follows the device.

    Example:
        >>> policies.save_and_offload_only_these_names(names_which_can_be_saved=["qkv"],
        ...                                            names_which_can_be_offloaded=["mlp_up"])
    """

    names_which_can_be_saved: tuple[str, ...]
    names_which_can_be_offloaded: tuple[str, ...]
    selects_by_tag: ClassVar[bool] = True  # the engine warns when a region has no tag

    def __init__(self, *, names_which_can_be_saved: Any = (), names_which_can_be_offloaded: Any = ()) -> None:
        where = "policies.save_and_offload_only_these_names"
        lists = {}
        for key, value in (("names_which_can_be_saved", names_which_can_be_saved),
                           ("names_which_can_be_offloaded", names_which_can_be_offloaded)):
            if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
                raise TypeError(f"{where}: {key} must be a list of tag names, got {value!r}")
            lists[key] = check_names(tuple(value), f"{where}: {key}")
        both = sorted(set(lists["names_which_can_be_saved"]) & set(lists["names_which_can_be_offloaded"]))
        if both:
            raise ValueError(f"{where}: {both!r} in both names_which_can_be_saved and names_which_can_be_offloaded; "
                             "a name is either saved on the device or offloaded to the host, not both")
        for key, value in lists.items():
            object.__setattr__(self, key, value)

    def __call__(self, call: OpCall) -> Decision:
        if call.tag is None:
            return RECOMPUTE
        if call.tag in self.names_which_can_be_saved:
            return SAVE
        return OFFLOAD if call.tag in self.names_which_can_be_offloaded else RECOMPUTE

    def __repr__(self) -> str:
        return (f"save_and_offload_only_these_names(names_which_can_be_saved={list(self.names_which_can_be_saved)!r}, "
                f"names_which_can_be_offloaded={list(self.names_which_can_be_offloaded)!r})")


register("offload", lambda policy: offload(policy))
register(
    "save_and_offload_only_these_names",
    lambda names_which_can_be_saved=(), names_which_can_be_offloaded=(): save_and_offload_only_these_names(
        names_which_can_be_saved=names_which_can_be_saved, names_which_can_be_offloaded=names_which_can_be_offloaded),
)
