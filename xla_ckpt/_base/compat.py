"""Differences between the torch versions xla_ckpt supports, in one place.

Supported: torch 2.9 (with torch_xla 2.9: the only matching pair) up to the newest torch pip offers
here (2.13 is tested in CI, without torch_xla). Everything version-dependent is asked here, by
feature, never by comparing version strings elsewhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import inspect
import types
from typing import Any, Iterator, Optional

import torch

from xla_ckpt._base.warn import warn_once

__all__ = [
    "TORCH_VERSION",
    "is_compiling",
    "SAC_GIVES_OP_OUTPUT",
    "HAS_ANNOTATE",
    "annotate",
    "current_node_meta",
    "object_by_id",
    "built_in_compiled_frame",
    "deref",
    "without_callers_modes",
    "preserve_version",
    "func_transform",
    "plain_under_func_transform",
    "forward_ad_active",
    "default_device",
    "plain_under_forward_ad",
    "plain_with_hooks_disabled",
]


def _version(v: str) -> tuple[int, int]:
    major, minor = v.split("+")[0].split(".")[:2]
    return int(major), int(minor)


TORCH_VERSION: tuple[int, int] = _version(torch.__version__)


def deref(ref: Any) -> Any:
    """The tensor behind a weak reference, or None; safe to hold while C++ drops its own references.

    A tensor whose Python object was kept alive by C++ (autograd's graph) and is then reached through
    a weakref must be handed back to Python (``_fix_weakref``), or freeing the C++ side deallocates it
    under our reference ("Deallocating Tensor that still has live PyObject references").
    """
    t = ref()
    if t is not None:
        fix = getattr(t, "_fix_weakref", None)
        if fix is not None:
            fix()
    return t


def is_compiling() -> bool:
    """True while Dynamo traces (``torch.compile``), or while torch.export / AOTAutograd trace.

    Dynamo folds this to a constant, so a branch on it costs no graph break.
    """
    return torch.compiler.is_compiling()


def _sac_gives_op_output() -> bool:
    from torch.utils.checkpoint import SelectiveCheckpointContext  # noqa: PLC0415

    return "op_output" in inspect.signature(SelectiveCheckpointContext.__init__).parameters


# Constants, not calls: Dynamo reads them without tracing anything.
SAC_GIVES_OP_OUTPUT: bool = _sac_gives_op_output()
"""torch >= 2.13 asks a selective-checkpoint ``policy_fn`` *after* the op, with ``ctx.op_output``;
before, it asks before the op runs and the policy sees no output (``OpCall.out`` is None)."""
RECOMPUTES_INPUT_CLONE: bool = TORCH_VERSION < (2, 15)
"""AOTAutograd clones a graph input that requires grad and is written in place; torch 2.9's min-cut
recomputes a region's reads of that clone from the input itself, which the graph's epilogue has written
by backward (autograd's version check raises; torch's own checkpoint too). torch 2.15 reads the clone
(measured on 2.9 and 2.15; versions between are treated as 2.9: the library then saves, or names the
error). ``_compile.input_writes`` follows the clone to the input where this holds."""
HAS_ANNOTATE: bool = hasattr(torch.fx.traceback, "annotate")
"""``torch.fx.traceback.annotate`` (torch >= 2.13): custom node metadata that survives compile."""


def annotate(meta: dict[str, Any]) -> Any:
    """``torch.fx.traceback.annotate(meta)``; only call when ``HAS_ANNOTATE``."""
    return torch.fx.traceback.annotate(meta)  # type: ignore[attr-defined, unused-ignore]  # torch >= 2.13


def current_node_meta() -> dict[str, Any]:
    """Metadata of the FX node being traced right now ({} outside a meta-preserving trace)."""
    fxt = torch.fx.traceback
    if not fxt.has_preserved_node_meta():
        return {}
    return fxt.get_current_meta() or {}


def object_by_id(key: int) -> Any:
    """The live object whose ``id()`` is ``key`` (CPython).

    Only for ids Dynamo computed from objects reachable from the frame being compiled: Dynamo guards
    on their identity (ID_MATCH) and keeps the frame alive while AOTAutograd traces, which is the
    only time the compiled lowering looks an id up. Dynamo can hand only Python constants through a
    ``context_fn`` (it rebuilds the partial from constants), not arbitrary policy objects.
    """
    return ctypes.cast(key, ctypes.py_object).value


def built_in_compiled_frame(obj: Any) -> bool:
    """Whether ``obj``, found by :func:`object_by_id`, is an object the compiled frame itself builds.

    Dynamo runs such a constructor only when the compiled frame runs, after AOTAutograd traced it. On
    torch 2.9 ``id()`` gives the real, half-built object (a dataclass with its fields not yet set); on
    2.15 a fake id, the id of Dynamo's own ``VariableTracker`` for it (alive while that trace runs).
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return any(f.name not in vars(obj) for f in dataclasses.fields(obj))
    tracker = getattr(getattr(getattr(torch, "_dynamo", None), "variables", None), "VariableTracker", None)
    return tracker is not None and isinstance(obj, tracker)


_MODE_KEYS = tuple(getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "__members__", {}).values())


@contextlib.contextmanager
def without_callers_modes() -> Iterator[None]:
    """The caller's dispatch modes (a profiler, an op counter) off the stack for the ``with`` body.

    Left alone when none is active, or when an infrastructure mode is (fake tensors, tracing,
    functionalization: what the body makes must stay theirs). Private torch API, here in one place.
    """
    if torch._C._len_torch_dispatch_stack() == 0 or any(torch._C._get_dispatch_mode(k) is not None for k in _MODE_KEYS):
        yield
        return
    from torch.utils._python_dispatch import _disable_current_modes  # noqa: PLC0415

    with _disable_current_modes():
        yield


def preserve_version(t: torch.Tensor) -> contextlib.AbstractContextManager[None]:
    """``t``'s version counter is put back when the block ends: writes in it are the library's own."""
    return torch.autograd._unsafe_preserve_version_counter(t)


def func_transform() -> Optional[str]:
    """The innermost active ``torch.func`` transform ("grad", "vmap", "jvp", "functionalize"), or None.

    Its tensors are wrappers (``TensorWrapper``, ``BatchedTensor``) with no storage. Private torch API
    (functorch's interpreter stack), here in one place.
    """
    interpreter = torch._C._functorch.peek_interpreter_stack()
    return None if interpreter is None else interpreter.key().name.lower()


def plain_under_func_transform(name: str) -> bool:
    """Whether a region entered now must run as plain PyTorch: a ``torch.func`` transform is active.

    Checkpointing rests on saved-tensor hooks and on the identity of tensor storages, neither of
    which torch.func has (torch's own ``checkpoint`` raises "torch.func.{grad, vjp, jacrev, hessian}
    don't yet support saved tensor hooks" there, and vmap cannot batch it). Running the function
    plainly gives exactly what it gives without the library, saving nothing: warned once per function.

    Args:
        name: the checkpointed function's name, for the notice.

    Example:
        >>> if plain_under_func_transform("Block.forward"):
        ...     return fn(*args)
    """
    transform = func_transform()
    if transform is None:
        return False
    warn_once(("func-transform", name), (
        f"xla_ckpt: {name} runs under torch.func ({transform}): it runs as plain PyTorch there, nothing is "
        "checkpointed (torch.func does not support the saved-tensor hooks checkpointing rests on; torch's "
        "own checkpoint fails there). Values and gradients are those without xla_ckpt. To save memory, "
        "take gradients with loss.backward() or torch.autograd.grad outside torch.func. Said once per function."
    ), stacklevel=3)
    return True


def default_device() -> Optional[torch.device]:
    """The device factory ops without one get here (``with torch.device(d)``, ``set_default_device``), or
    None where no device context is active (the CPU).

    Both are a ``DeviceContext`` on the thread's torch-function mode stack; the empty stack, the common
    case, is checked first (``get_default_device`` walks the stack: 4.6 us a call here).
    """
    if torch._C._len_torch_function_stack() == 0:
        return None
    return torch.get_default_device()


def forward_ad_active() -> bool:
    """Whether forward-mode AD is on: a ``torch.autograd.forward_ad.dual_level()`` is open.

    Dual levels are process-wide in torch (one stack in C++, mirrored by the Python module's
    ``_current_level``, private; here in one place).
    """
    from torch.autograd import forward_ad  # noqa: PLC0415

    return getattr(forward_ad, "_current_level", -1) >= 0


def plain_under_forward_ad(name: str) -> bool:
    """Whether a region entered now must run as plain PyTorch: forward-mode AD is on (``dual_level``).

    Forward AD computes tangents as fn's ops run, through ops the region's mode would take for fn's
    own (its tangent tensors have no storage of their own to key: the engine would raise a bare
    RuntimeError), and torch's own checkpoint fails there too (its ``autograd.Function`` has no
    ``jvp``). Running the function plainly gives exactly the values, tangents and gradients it gives
    without the library, saving nothing: warned once per function.

    Args:
        name: the checkpointed function's name, for the notice.

    Example:
        >>> if plain_under_forward_ad("Block.forward"):
        ...     return fn(*args)
    """
    if not forward_ad_active():
        return False
    warn_once(("forward-ad", name), (
        f"xla_ckpt: {name} runs under forward-mode AD (torch.autograd.forward_ad.dual_level): it runs as "
        "plain PyTorch there, nothing is checkpointed (forward AD computes tangents through the ops a region "
        "records; torch's own checkpoint fails there). Values, tangents and gradients are those without "
        "xla_ckpt. To save memory, run the training step outside the dual level. Said once per function."
    ), stacklevel=3)
    return True


def plain_with_hooks_disabled(name: str) -> bool:
    """Whether a region entered now must run as plain PyTorch: saved-tensor hooks are disabled here.

    ``torch.autograd.graph.disable_saved_tensors_hooks(message)`` (entered by libraries that own what
    autograd saves) makes pushing a hook pair raise a bare RuntimeError with that message, naming
    neither the library nor the module: checkpointing rests on those hooks (torch's own checkpoint raises
    the same bare error). Running the function plainly gives exactly what it gives without the library,
    saving nothing: warned once per function, with the disabler's message.

    Args:
        name: the checkpointed function's name, for the notice.
    """
    if torch._C._autograd._saved_tensors_hooks_is_enabled():  # type: ignore[attr-defined]  # not in the stub
        return False
    why = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()
    warn_once(("hooks-disabled", name), (
        f"xla_ckpt: {name} runs where saved-tensor hooks are disabled ({why!r}): it runs as plain PyTorch "
        "there, nothing is checkpointed (checkpointing rests on those hooks). Values and gradients are those "
        "without xla_ckpt. Said once per function."
    ), stacklevel=3)
    return True


def backward_keeping_function_modes(roots: list[torch.Tensor], grads: list[torch.Tensor]) -> None:
    """Run ``torch.autograd.backward(roots, grads)`` with the caller's torch-function modes still active.

    torch >= 2.13 sends ``autograd.backward`` through the torch-function mode stack, and a mode is popped
    while it handles a call: the whole backward (and the engine's replay of the forward in it) would run
    without the mode. ``estimate(attention="flash")`` needs its SDPA mode in the replay too, so this
    calls autograd's engine directly, as ``autograd.backward`` does once no override is left.

    Args:
        roots: the outputs to differentiate (each requires grad).
        grads: one gradient per root.
    """
    from torch.autograd.graph import _engine_run_backward  # noqa: PLC0415  (torch >= 2.4, private)

    _engine_run_backward(tuple(roots), tuple(grads), False, False, (), allow_unreachable=True,
                         accumulate_grad=True)


def dynamo_skips_as_root(code: types.CodeType) -> None:
    """Dynamo does not start a graph at a frame of ``code``, but still inlines it into a graph it traces.

    For the library's instance ``forward`` objects outside checkpoint regions: called from a frame Dynamo
    skipped (a graph break inside a model's layer loop) each one would otherwise become a small graph of its
    own, splitting the lazy step (test_openxla_activation_annotation_inside_regions: peak 3,888,548 bytes
    against 3,705,932), as ``torch.nn``'s own forwards never do. Idempotent; torch 2.9 through 2.15 have
    ``skip_code`` (``FrameAction.SKIP`` for the frame, the default for what it calls).
    """
    from torch._dynamo.eval_frame import skip_code  # noqa: PLC0415

    skip_code(code)
