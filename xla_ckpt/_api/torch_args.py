"""``torch.utils.checkpoint``'s own keyword arguments, as ``xla_ckpt.checkpoint`` takes them.

Code migrated from ``torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False, ...)`` keeps its
keywords: each one either means what it means in torch, or raises a ``TypeError`` / ``ValueError``
that names it and the fix. None of them is ever passed to ``fn``; a keyword of ``fn``'s own with one of
these names (or ``policy`` / ``verify``) goes in ``fn_kwargs=``.

=====================  =========================================================================
torch keyword          here
=====================  =========================================================================
use_reentrant          False (or None, torch's default since 2.4): the same non-reentrant semantics.
                       True: an error (the reentrant variant is not implemented: drop it).
preserve_rng_state     True: the same (CPU, CUDA and XLA RNG are restored for the recompute).
                       False: an error (a recompute with other random numbers is a wrong gradient).
determinism_check      "default": the same check, stronger (op, shapes, dtypes, arguments per op).
                       "none": an error (the check is what keeps a gradient from being silently wrong).
context_fn             torch's no-op default: accepted. ``functools.partial(create_selective_checkpoint_
                       contexts, policy_fn_or_ops)``: the same selective checkpoint, as the policy
                       ``policies.from_torch(policy_fn)`` / ``policies.save_ops(*ops)``. Any other
                       callable: an error pointing to ``policy=``.
debug                  True or False: accepted; a ``CheckpointError`` always names the op, its
                       position in the region and the module (what torch's debug trace adds).
=====================  =========================================================================
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Optional

from xla_ckpt._policy import builtin, combine
from xla_ckpt._record.opcall import Policy

__all__ = ["check_torch_args", "merge_fn_kwargs", "torch_call"]

_WHO = "xla_ckpt.checkpoint"


def _is_default_context_fn(context_fn: Any) -> bool:
    if context_fn is None:
        return True
    from torch.utils import checkpoint as tuc  # noqa: PLC0415

    return context_fn is getattr(tuc, "noop_context_fn", None)


def _sac_policy(context_fn: Any) -> Optional[Policy]:
    """The policy of ``functools.partial(create_selective_checkpoint_contexts, policy_fn_or_ops)``, else None."""
    from torch.utils import checkpoint as tuc  # noqa: PLC0415

    if not (isinstance(context_fn, functools.partial) and context_fn.func is tuc.create_selective_checkpoint_contexts
            and len(context_fn.args) == 1 and not context_fn.keywords):
        return None
    what = context_fn.args[0]
    if isinstance(what, (list, tuple)):
        return builtin.save_ops(*what)
    return combine.from_torch(what) if callable(what) else None


def check_torch_args(use_reentrant: Optional[bool], preserve_rng_state: bool, determinism_check: str,
                     context_fn: Any, debug: bool) -> Optional[Policy]:
    """Raise for a torch keyword whose meaning xla_ckpt does not give; return the policy a selective-
    checkpoint ``context_fn`` stands for (None for torch's no-op default)."""
    if use_reentrant not in (None, False, True):
        raise TypeError(f"{_WHO}: use_reentrant must be True, False or None (torch's meaning), got {use_reentrant!r}")
    if use_reentrant:
        raise ValueError(
            f"{_WHO}: use_reentrant=True asks for torch's reentrant checkpoint, which xla_ckpt does not implement. "
            "xla_ckpt is non-reentrant (torch's use_reentrant=False, its recommended form): the same gradients, and "
            "it also gives parameter grads when no input requires grad and works with torch.autograd.grad. Fix: "
            "drop use_reentrant or pass use_reentrant=False."
        )
    if preserve_rng_state is not True:
        if preserve_rng_state is not False:
            raise TypeError(f"{_WHO}: preserve_rng_state must be True or False, got {preserve_rng_state!r}")
        raise ValueError(
            f"{_WHO}: preserve_rng_state=False would recompute dropout and other random ops with other random "
            "numbers than the forward, a silently wrong gradient; xla_ckpt always restores the CPU, CUDA and XLA "
            "RNG state for the recompute. Fix: drop preserve_rng_state (or pass True). To skip recomputing "
            "random ops altogether, save them: policy=xla_ckpt.policies.save_ops(torch.ops.aten.native_dropout)."
        )
    if determinism_check != "default":
        if not isinstance(determinism_check, str):
            raise TypeError(f"{_WHO}: determinism_check must be a string ('default'), got {determinism_check!r}")
        raise ValueError(
            f"{_WHO}: determinism_check={determinism_check!r} is not supported: xla_ckpt always checks the recompute "
            "(each op, its arguments, shapes and dtypes against the forward; torch's 'default' checks shapes, "
            "dtypes and devices of saved tensors) and raises a CheckpointError instead of giving a wrong gradient. "
            "Fix: drop determinism_check (or pass 'default')."
        )
    if not isinstance(debug, bool):
        raise TypeError(f"{_WHO}: debug must be True or False, got {debug!r}")
    if _is_default_context_fn(context_fn):
        return None
    policy = _sac_policy(context_fn)
    if policy is None:
        raise ValueError(
            f"{_WHO}: context_fn={context_fn!r} is torch's hook for selective checkpointing; in xla_ckpt the policy "
            "does that job on every backend (eager, XLA, torch.compile). Fix: pass policy= instead, e.g. "
            "policy='dots_saveable', policy=xla_ckpt.policies.save_ops(torch.ops.aten.mm), or any "
            "(OpCall) -> Decision callable; a torch policy_fn(ctx, op, *args, **kwargs) becomes "
            "policy=xla_ckpt.policies.from_torch(policy_fn) (docs/migrating.md)."
        )
    return policy


def merge_fn_kwargs(kwargs: dict[str, Any], fn_kwargs: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """``fn``'s keyword arguments: the loose ``**kwargs`` and ``fn_kwargs`` (which may use any name)."""
    if fn_kwargs is None:
        return kwargs
    if not isinstance(fn_kwargs, Mapping) or not all(isinstance(k, str) for k in fn_kwargs):
        raise TypeError(f"{_WHO}: fn_kwargs must be a dict of str keys (fn's keyword arguments), got {fn_kwargs!r}")
    both = sorted(set(kwargs) & set(fn_kwargs))
    if both:
        raise TypeError(f"{_WHO}: keyword {', '.join(map(repr, both))} given both loose and in fn_kwargs; pass it once "
                        "(in fn_kwargs)")
    return {**kwargs, **fn_kwargs}


def torch_call(policy: Any, kwargs: dict[str, Any], fn_kwargs: Optional[Mapping[str, Any]],
               use_reentrant: Optional[bool], preserve_rng_state: bool, determinism_check: str, context_fn: Any,
               debug: bool) -> tuple[Any, dict[str, Any]]:
    """``checkpoint``'s policy and ``fn``'s keyword arguments, after torch's keywords are checked."""
    from_context = check_torch_args(use_reentrant, preserve_rng_state, determinism_check, context_fn, debug)
    if from_context is not None:
        if not (isinstance(policy, str) and policy == "nothing_saveable"):  # the default: not given
            raise ValueError(f"{_WHO}: both policy={policy!r} and a selective-checkpoint context_fn "
                             f"({from_context!r}) were given; pass one of them")
        policy = from_context
    return policy, merge_fn_kwargs(kwargs, fn_kwargs)
