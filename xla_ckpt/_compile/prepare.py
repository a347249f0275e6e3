"""What one compile of a checkpointed region needs from torch, set for that compile only (``_base.compile_scope``).

Both functions here are marked as constants for Dynamo, so Dynamo *runs* them while tracing (and bakes
in the result) instead of tracing them: whatever they set is in place before AOTAutograd traces the
region, and ``compile_scope`` puts it back when the compile ends.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch

from xla_ckpt._base import xla as _xla
from xla_ckpt._base.warn import warn_once

__all__ = ["prepare_this_compile", "planner_note", "unfenced"]


@torch.compiler.assume_constant_result
def prepare_this_compile(on_xla: bool) -> bool:
    return _prepare(on_xla)


def _prepare(on_xla: bool) -> bool:
    """What a compile of an XLA region needs from torch, set until the compile ends (``_base.compile_scope``).

    - ``torch.xla``: torch's checkpoint looks the device module up; torch_xla 2.9 has none (see ``_base.xla``).
    - Fenced recompute: ``backend="openxla"`` partitions with torch's default partitioner, which calls
      ``min_cut_rematerialization_partition`` by name for marked graphs; for this compile that name is
      the fenced min-cut (``_compile.fence``), so XLA cannot run every recompute at once.

    Marked as a constant for Dynamo, so Dynamo *runs* it while tracing (and bakes in the result)
    instead of tracing it: both are in place before AOTAutograd traces the region.
    """
    if not on_xla or not _xla.device_module_for_this_compile():
        return False
    from torch._functorch import partitioners  # noqa: PLC0415

    from xla_ckpt._base.compile_scope import set_for_this_compile  # noqa: PLC0415
    from xla_ckpt._compile.fence import fenced  # noqa: PLC0415

    if not _unfenced:
        set_for_this_compile(partitioners, "min_cut_rematerialization_partition",
                             fenced(partitioners.min_cut_rematerialization_partition))
    return True


_unfenced: list[bool] = []  # one entry per open ``unfenced()`` block


@contextlib.contextmanager
def unfenced() -> Iterator[None]:
    """XLA regions compiled in this block get torch's plain min-cut partition, without the fence.

    For the benchmark and tests that measure what the fence buys.
    """
    _unfenced.append(True)
    try:
        yield
    finally:
        _unfenced.pop()


@torch.compiler.assume_constant_result
def planner_note(kind: str, budget: Optional[float]) -> bool:
    """Say once per policy how to keep a budget under compile (run by Dynamo while tracing).

    Takes constants only: the policy object may have been made inside the traced frame.
    """
    if budget is not None and torch._functorch.config.activation_memory_budget == budget:
        return True
    _warn_planner(f"{kind}({budget:g})" if budget is not None else kind, budget)
    return True


def _warn_planner(policy: str, budget: Optional[float]) -> None:
    fix = (f"set torch._functorch.config.activation_memory_budget = {budget:g} before compiling (torch's "
           "budget, for the whole compiled graph, as torchtitan's activation_memory_budget does)"
           if budget is not None else "use a per-op policy under torch.compile")
    warn_once(("compiled", "planner", policy), f"xla_ckpt under torch.compile: {policy} plans eager regions; "
              f"compiled regions run unmarked and torch's partitioner decides. To keep a budget, {fix}.", stacklevel=3)
