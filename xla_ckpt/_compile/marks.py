"""Under ``torch.compile``: the same policy lowered to torch's selective-checkpoint marks.

The eager engine (dispatch modes, a cache, replay) cannot be traced by Dynamo. Under compile,
``checkpoint()`` instead calls non-reentrant ``torch.utils.checkpoint`` with a ``context_fn`` whose
``policy_fn`` asks our policy: SAVE becomes ``MUST_SAVE``, RECOMPUTE ``PREFER_RECOMPUTE``, and
OFFLOAD ``MUST_SAVE`` (torch's SAC has no offload mark: kept on the device, warned once). The
marks land on the joint graph (``node.meta["recompute"]``) and the min-cut partitioner honours
them (inductor, and torch_tpu's ``"tpu"`` backend, which also fences recompute chains).

On XLA (``backend="openxla"``) a compile of a region also gets, for that compile only
(``_base.compile_scope``): the ``torch.xla`` device module torch's checkpoint looks up (torch_xla 2.9 has
none), and the fenced min-cut (``_compile.fence``) that ties each recomputed chain to its gradient.
Random ops in a region are saved there (the bridge cannot run torch's functionalised RNG).
A region Dynamo cannot trace (a graph break inside it) runs in the lazy engine there (``_torch_checkpoint``).
The per-op lowering itself (the ``policy_fn``, random ops, tags) is ``_compile.lowering``.

What a policy sees differs from eager in three documented ways:
- ``OpCall.out`` is torch's ``ctx.op_output`` (a fake tensor: shapes, no values) on torch >= 2.13,
  and None before (torch asks before the op runs); ``nbytes`` and ``flops`` come from metadata on
  every version.
- ``OpCall.module`` is rebuilt from the graph's ``nn_module_stack`` to the name the eager engine uses.
- ``OpCall.tag`` needs torch >= 2.13 (see :mod:`xla_ckpt._api.tag`); before, it is None, said once.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, Callable, Optional

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from xla_ckpt._base import compat as _compat
from xla_ckpt._base import xla as _xla
from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._base.warn import warn_once
from xla_ckpt._compile.deferred import ForwardContext
from xla_ckpt._compile.lowering import Lowering, warn_old_torch
from xla_ckpt._compile.prepare import prepare_this_compile, routed_region, with_side_effects
from xla_ckpt._hooks.saved import user_hooks
from xla_ckpt._record.opcall import Policy
from xla_ckpt._policy.plan import plans

__all__ = ["checkpoint", "context_fn", "TORCH_ARGS"]

# The keywords ``torch.utils.checkpoint.checkpoint`` takes itself: the engine's entry binds a keyword of ``fn``'s
# own by one of these names in a partial before calling ``checkpoint`` below.
TORCH_ARGS = ("use_reentrant", "preserve_rng_state", "determinism_check", "context_fn", "debug")


def _contexts(policy_id: int, module_id: int, direct: bool, on_xla: bool = False) -> Any:
    """The ``context_fn``: runs while AOTAutograd traces the region, once per trace."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts  # noqa: PLC0415

    if not _compat.SAC_GIVES_OP_OUTPUT:
        warn_old_torch()
    policy = _compat.object_by_id(policy_id)
    module = _compat.object_by_id(module_id) if module_id else None
    _check_built(policy, module)
    # Plain autograd passes what the compiled forward saves through a user's pair (a lossy bf16 pack,
    # save_on_cpu); a value recomputed in backward from packed inputs would not be unpack(pack(value)):
    # silently other grads than the plain compile (4e-3 on a bf16 pair). Unmarked, each passes the pair.
    save_all = user_hooks(tracing=True) is not None
    if save_all:
        warn_once(("compiled", "user-saved-hooks"),
                  "xla_ckpt: a torch.autograd.graph.saved_tensors_hooks pair is open around a checkpointed region "
                  "while torch.compile traces it: the region is partitioned as the plain compile (nothing is "
                  "recomputed from packed values), so checkpointing saves no memory in this graph. Compile without "
                  "the pair open, or run the model uncompiled (the eager engine recomputes exactly).")
    lowering = Lowering(policy, module, direct, on_xla, save_all)
    forward, recompute = create_selective_checkpoint_contexts(lowering.policy_fn)
    return ForwardContext(forward, lowering.deferred), recompute


def _check_built(policy: Any, module: Optional[nn.Module]) -> None:
    """Raise if ``policy`` is an object the compiled frame builds itself (Dynamo has not built it yet).

    The lowering would otherwise fail deep inside the policy with a bare error (torch 2.9:
    ``'save_ops' object has no attribute 'ops'``; 2.15: ``'FrozenDataClassVariable' object is not callable``).
    """
    if not _compat.built_in_compiled_frame(policy):
        return
    named = module is not None and not _compat.built_in_compiled_frame(module)
    where = f" in module {type(module).__name__}" if named else ""
    # A VariableTracker (torch 2.15) names the class it stands for; a function made there has none.
    cls = getattr(policy, "value_type", None) if not dataclasses.is_dataclass(policy) else type(policy)
    name = f"{cls.__name__}(...)" if isinstance(cls, type) and cls is not types.FunctionType else "(a function)"
    raise CheckpointError(
        f"xla_ckpt: the policy {name} of a checkpointed region{where} is built inside the compiled "
        "function, and torch.compile only builds it when the compiled code runs, after it traced the region. "
        "Build the policy once outside the compiled function (module level, in __init__, or through "
        "xla_ckpt.apply's config) and pass that object."
    )


def _region_module(fn: Callable[..., Any]) -> tuple[Optional[nn.Module], bool]:
    """The module a region runs (for names): ``fn`` itself, or the ``self`` of a wrapper's partial."""
    if isinstance(fn, nn.Module):
        return fn, True
    if isinstance(fn, functools.partial) and fn.args and isinstance(fn.args[0], nn.Module):
        return fn.args[0], False
    return None, False


def context_fn(policy: Policy, fn: Callable[..., Any], on_xla: bool = False) -> Callable[[], Any]:
    """The ``context_fn`` for ``torch.utils.checkpoint`` that lowers ``policy`` (traceable by Dynamo)."""
    module, direct = _region_module(fn)
    return functools.partial(_contexts, id(policy), id(module) if module is not None else 0, direct, on_xla)


def checkpoint(fn: Callable[..., Any], args: tuple, kwargs: dict, policy: Policy,
               lazy: Optional[Callable[..., Any]] = None) -> Any:
    """``checkpoint()`` under ``torch.compile``: torch's non-reentrant checkpoint with our policy's marks.

    ``lazy(fn, args, kwargs, policy)`` runs the region in the eager / lazy engine: the engine passes it
    (this layer is below the engine), for a region Dynamo ends up running eagerly (a graph break, e.g.
    on a hook's side effect); without it such a region runs torch's checkpoint eagerly.

    RNG replay is torch's (inductor functionalises random ops); nesting and in-place ops inside the
    region follow torch's selective checkpointing rules under compile.
    """
    on_xla = any(isinstance(t, torch.Tensor) and _xla.is_xla(t) for t in tree_leaves((args, kwargs)))
    # A planning policy (memory_budget) is planned on the joint graph before torch's min-cut
    # (``_compile.budget``), not with torch's activation_memory_budget: with dropout in two regions
    # that one's gradients differed from the unwrapped model's (0.02-0.09, XLA and CPU aot_eager).
    prepare_this_compile(on_xla, plans(policy))
    module, _ = _region_module(fn)
    routed = routed_region(id(module) if module is not None else 0)  # kernels' routing write: traced, once
    return _torch_checkpoint(fn, args, kwargs, policy, on_xla, lazy, routed)


def _torch_checkpoint(fn: Callable[..., Any], args: tuple, kwargs: dict, policy: Policy, on_xla: bool,
                      lazy: Optional[Callable[..., Any]], routed: bool = False) -> Any:
    """torch's checkpoint with our marks; a region Dynamo could not trace runs in our engine.

    A graph break inside a region (``torch._dynamo.graph_break()``, a print, ``xs.mark_sharding`` on an
    activation) makes Dynamo call torch's checkpoint *eagerly* at step time, and on XLA that raises a bare
    ``AttributeError: module 'torch' has no attribute 'xla'`` (torch_xla 2.9 registers no device module; our
    stand-in lives for a compile only). The ``try`` block is there so Dynamo cannot resume this frame
    part-way (it compiles no partial graph inside a try block: ``should_compile_partial_graph``): this frame
    then runs as Python, where ``is_compiling()`` is False, and the region runs in the lazy engine, out of
    Dynamo's reach (``lazy``, which the engine supplies), exactly as it would without ``torch.compile``.
    """
    try:
        # Any device: a region Dynamo gave up on runs in our engine, as without torch.compile (torch's
        # checkpoint run eagerly would fire the region's module hooks again in its recompute).
        if lazy is not None and not torch.compiler.is_compiling():
            return lazy(fn, args, kwargs, policy)
        body = with_side_effects(fn) if routed else fn  # the marks still name fn's module (context_fn)
        return torch.utils.checkpoint.checkpoint(
            body, *args, use_reentrant=False, context_fn=context_fn(policy, fn, on_xla), **kwargs
        )
    finally:
        pass  # the try block itself is what matters (see above)
