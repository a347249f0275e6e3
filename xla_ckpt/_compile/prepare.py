"""What one compile of a checkpointed region needs from torch, set for that compile only (``_base.compile_scope``).

Both functions here are marked as constants for Dynamo, so Dynamo *runs* them while tracing (and bakes
in the result) instead of tracing them: whatever they set is in place before AOTAutograd traces the
region, and ``compile_scope`` puts it back when the compile ends.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from xla_ckpt._base import xla as _xla

__all__ = ["prepare_this_compile", "routed_region", "routes_kernel_funcs", "with_side_effects"]

# XLA regions compile with the fenced min-cut. Off only to measure what the fence buys: the benchmark's
# ``--no-fence`` runs (``bench/openxla_probe.py``) compile with torch's plain min-cut.
_fence = True


@torch.compiler.assume_constant_result
def prepare_this_compile(on_xla: bool, planner: bool = False) -> bool:
    return _prepare(on_xla, planner)


def _prepare(on_xla: bool, planner: bool = False) -> bool:
    """What a compile of a region needs from torch, set until the compile ends (``_base.compile_scope``).

    - ``torch.xla`` (XLA): torch's checkpoint looks the device module up; torch_xla 2.9 has none (see ``_base.xla``).
    - Fenced recompute (XLA): ``backend="openxla"`` partitions with torch's default partitioner, which calls
      ``min_cut_rematerialization_partition`` by name for marked graphs; for this compile that name is
      the fenced min-cut (``_compile.fence``), so XLA cannot run every recompute at once.
    - A planning policy's region (``planner``, any device): the min-cut, by that name and by inductor's
      (``torch._inductor.compile_fx`` imports it), first plans the region on the joint graph (``_compile.budget``);
      ``default_partition`` calls the min-cut for a graph holding such a region (``budget.sees_unplanned``).
    - Every region: torch's RNG pass after the min-cut gets only the random ops both graphs run
      (``_compile.rng``; torch < 2.11 raises a KeyError on one the backward does not need).

    Marked as a constant for Dynamo, so Dynamo *runs* it while tracing (and bakes in the result)
    instead of tracing it: all of it is in place before AOTAutograd traces the region.
    """
    import sys  # noqa: PLC0415

    from torch._functorch import partitioners  # noqa: PLC0415

    from xla_ckpt._base.compile_scope import set_for_this_compile  # noqa: PLC0415
    from xla_ckpt._compile.budget import planned, sees_unplanned  # noqa: PLC0415
    from xla_ckpt._compile.fence import fenced  # noqa: PLC0415
    from xla_ckpt._compile.rng import present_only  # noqa: PLC0415

    set_for_this_compile(partitioners, "functionalize_rng_ops", present_only(partitioners.functionalize_rng_ops))
    if planner:
        for mod in (partitioners, sys.modules.get("torch._inductor.compile_fx")):
            if mod is not None:
                set_for_this_compile(mod, "min_cut_rematerialization_partition",
                                     planned(mod.min_cut_rematerialization_partition))
        # default_partition (openxla's) reaches the min-cut only for a graph with a recompute mark.
        set_for_this_compile(partitioners, "has_recomputable_ops", sees_unplanned(partitioners.has_recomputable_ops))
    if not on_xla or not _xla.device_module_for_this_compile():
        return False
    if _fence:
        set_for_this_compile(partitioners, "min_cut_rematerialization_partition",
                             fenced(partitioners.min_cut_rematerialization_partition))
    return True


def routes_kernel_funcs(module: object) -> bool:
    """Whether a module in ``module`` routes kernel functions per model (the ``kernels`` package's
    ``use_kernelized_func``, which transformers >= 5.25 puts on its attention classes for
    ``apply_rotary_pos_emb``): each such forward sets a global routing table and puts it back before it
    returns. Recognised by the per-instance table that decorator gives each module (``_kernel_funcs``).
    """
    modules = module.modules() if isinstance(module, torch.nn.Module) else ()
    return any(isinstance(m.__dict__.get("_kernel_funcs"), dict) for m in modules)


@torch.compiler.assume_constant_result
def routed_region(module_id: int) -> bool:
    """Whether the region of the module whose ``id`` is ``module_id`` routes kernel functions (Dynamo runs this
    while tracing and bakes in the answer)."""
    from xla_ckpt._base import compat as _compat  # noqa: PLC0415

    return bool(module_id) and routes_kernel_funcs(_compat.object_by_id(module_id))


def with_side_effects(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` for a region's checkpoint, Dynamo allowed to trace its writes to objects from outside the region.

    Dynamo refuses such a write inside a checkpoint's higher-order op (torch's eager checkpoint would do it
    again in its recompute): the routing write of a kernel-routing attention (:func:`routes_kernel_funcs`)
    would break the graph at every checkpointed layer. Traced, the write is done once, in forward. That is exact
    for the routing table (put back within the same forward; what it routed to is baked into the traced
    ops, and the compiled backward recomputes those ops, not the Python) and is what the eager engine does
    with any write of a region's forward (module hooks fire once, in forward). torch's
    ``_disable_side_effect_safety_checks_for_current_subtracer`` allows it for this region's trace only
    (torch >= 2.9); where torch has none, ``fn`` itself (the graph breaks there, values still exact).
    """
    from torch._dynamo import utils  # noqa: PLC0415

    unchecked = getattr(utils, "_disable_side_effect_safety_checks_for_current_subtracer", None)
    return fn if unchecked is None else functools.partial(unchecked, fn)
