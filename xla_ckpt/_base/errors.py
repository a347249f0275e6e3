"""``CheckpointError`` and the pieces of its messages every layer uses (the function's name, the likely cause)."""

from __future__ import annotations

import functools
from typing import Any

import torch

__all__ = ["CheckpointError", "PolicyError", "fn_name", "recompute_mismatch_hint", "refuse_torchscript"]


class CheckpointError(RuntimeError):
    """The recomputation cannot reproduce the forward (non-determinism, mutation, mismatch)."""


class PolicyError(CheckpointError):
    """A checkpoint policy raised while deciding an op: the message names the policy, the op and the
    module; the policy's own exception is ``__cause__`` (its traceback shows the line that raised).

    Example:
        >>> try:
        ...     xla_ckpt.checkpoint(block, x, policy=my_policy)
        ... except xla_ckpt.PolicyError as e:
        ...     original = e.__cause__
    """


def fn_name(fn: Any) -> str:
    """The checkpointed function's name for messages, quoted (``'Block.forward'``)."""
    if isinstance(fn, functools.partial):  # the wrappers' partial(type(m).forward, m)
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"'{name}'"


def recompute_mismatch_hint(op: object = "", module: str = "") -> str:
    """The likely causes of a recompute that does not match its forward, as one sentence to append.

    Called by the engine when a replayed op, shape or dtype differs from the forward. The usual cause
    is state that the forward changed and the recompute changes again: a buffer the module's forward
    updates by assignment and then reads (in-place writes to buffers are replayed exactly), a key/value
    cache (Hugging Face ``use_cache=True``: each layer appends to ``cache`` / ``past_key_values`` /
    ``layer_past`` and the recompute appends a second time, so a ``cat`` comes back longer), or an
    argument mutated in place.

    Example:
        >>> raise CheckpointError(f"recomputation of {op} ... differs. {recompute_mismatch_hint(op, name)}")
    """
    where = f" in '{module}'" if module else ""
    first = ("A concatenation that grew on recompute: something the forward appended to was appended to again "
             "(a key/value cache, or a buffer the forward grows). " if "cat" in str(op) else "")
    return (
        f"{first}Likely cause{where}: state that the forward changed and the recompute changed again, such as "
        "a buffer or attribute the module's forward updates and then reads (a call counter or a running "
        "statistic assigned with `self.buf = ...` or grown with torch.cat: the replay restores only buffers "
        "written in place), a key/value cache (Hugging Face: use_cache=True, with cache / past_key_values / "
        "layer_past appended to once in forward and again in backward), something the forward builds on its first "
        "call only (lazy initialisation: a register_buffer or submodule made in forward, a rotary cos/sin cache "
        "built or grown for a longer sequence: the recompute finds it built and skips the ops) or an argument "
        "mutated in place. Fix: "
        "update such a buffer in place (self.buf.add_(...); BatchNorm's statistics are exact) or outside the "
        "checkpointed module; call the model with use_cache=False in training (xla_ckpt.apply and "
        "xla_ckpt.checkpointed do this for a module called in train mode with grad), and do not mutate "
        "arguments inside a checkpointed function; build lazy state in __init__ (or to its largest size), or run one "
        "forward under torch.no_grad() first."
    )


def refuse_torchscript(obj: Any, who: str) -> None:
    """Raise a ``TypeError`` naming the fix when ``obj`` is TorchScript (``torch.jit.script`` / ``trace``).

    TorchScript's graph executor profiles a graph's first calls and runs an optimized one after, with
    other ops and other saved tensors: fn run again in backward would raise a false CheckpointError ("saved 9
    tensors; the forward ... saved 8"), and a scripted module's ``forward`` cannot be replaced (a bare
    AttributeError). Scripted *submodules* inside a checkpointed Python module still run.

    Args:
        obj: what was to be checkpointed.
        who: the API called, for the message (``"xla_ckpt.checkpoint"``).

    Example:
        >>> refuse_torchscript(fn, "xla_ckpt.checkpoint")
    """
    if isinstance(obj, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        name = getattr(obj, "original_name", None) or getattr(obj, "name", None) or type(obj).__name__
        raise TypeError(
            f"{who}: '{name}' is TorchScript (torch.jit.script or torch.jit.trace): its graph executor optimizes "
            "the graph between calls, so a recomputation would not run the forward's ops. Checkpoint the Python "
            "module or function it was made from (torch.compile works with xla_ckpt where scripting was for speed)."
        )
