"""``xla_ckpt.checkpoint``: the public entry to one region, its policy given in any form users pass."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from xla_ckpt._api.forms import as_policy
from xla_ckpt._api.torch_args import torch_call
from xla_ckpt._engine import region as _region
from xla_ckpt._policy.registry import resolve

__all__ = ["checkpoint"]

_DEFAULT = "nothing_saveable"


def checkpoint(
    fn: Callable[..., Any],
    *args: Any,
    policy: Any = _DEFAULT,
    verify: bool = False,
    use_reentrant: Optional[bool] = None,
    preserve_rng_state: bool = True,
    determinism_check: str = "default",
    context_fn: Any = None,
    debug: bool = False,
    fn_kwargs: Optional[Mapping[str, Any]] = None,
    **kwargs: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)``, letting ``policy`` decide per op what is saved or recomputed.

    Args:
        fn: the function (or module) to run; it must run the same ops when recomputed.
        *args, **kwargs: its arguments (tensors or not; inputs need not require grad).
        policy: a policy name (``xla_ckpt.policies.names()``), a policy object or any ``(OpCall) -> Decision``
            function; or a preset name, a ``Config``, a dict or a config file, whose rules use one policy
            (``"megatron_selective"``: its blocks' policy). A wrong type is a ``TypeError`` naming the forms.
        verify: also recompute the outputs the policy saved, and raise a ``CheckpointError`` naming
            the first op (and module) whose recomputed value differs from the saved one. Costs the
            full recompute; turn it on when you suspect non-determinism.
        use_reentrant, preserve_rng_state, determinism_check, context_fn, debug:
            ``torch.utils.checkpoint.checkpoint``'s keywords, so migrated calls keep them: each has
            torch's meaning or raises an error naming it and the fix (table in ``_api.torch_args``); a
            ``context_fn`` built by ``create_selective_checkpoint_contexts`` becomes the policy.
            They are never passed to ``fn``.
        fn_kwargs: keyword arguments for ``fn`` under any name, also ``policy``, ``verify`` or one
            of torch's (loose ``**kwargs`` with those names are taken by ``checkpoint`` itself).

    Gradients equal running ``fn`` directly, or a ``CheckpointError`` says why they cannot: RNG states
    (CPU, CUDA, XLA) and autocast are restored for the recompute. Nested calls run inside the outer
    region, each under its own policy. Under ``torch.no_grad()`` ``fn`` simply runs. A policy that raises
    is a ``PolicyError`` (a ``CheckpointError``) naming the op and the module, chained to the policy's exception.

    Example:
        >>> y = xla_ckpt.checkpoint(block, x, policy="dots_saveable")
        >>> y = xla_ckpt.checkpoint(block, x, policy=xla_ckpt.policies.memory_budget(0.3))
        >>> y = xla_ckpt.checkpoint(attn, x, use_reentrant=False, fn_kwargs={"policy": "causal"})
    """
    # The default stays a name: torch's context_fn may replace it.
    if not (policy.__class__ is str and policy == _DEFAULT):
        policy = as_policy(policy, "xla_ckpt.checkpoint")
    policy, kwargs = torch_call(policy, kwargs, fn_kwargs, use_reentrant, preserve_rng_state, determinism_check,
                                context_fn, debug)
    pol = resolve(policy)  # the default's name, or the policy torch's context_fn stands for
    if not isinstance(verify, bool):
        raise TypeError(f"xla_ckpt.checkpoint: verify must be True or False, got {verify!r}")
    return _region.run(fn, args, kwargs, pol, verify)
