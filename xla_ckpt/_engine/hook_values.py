"""What a user's module hook returned inside a region's forward, kept for the replay, which does not call it again.

The general replay (``recompute.Recomputation.user_hook``) hands ``fn`` the hook's forward result instead of
calling the hook a second time (a hook fires once, as in the plain run). ``fn`` may write that tensor in place, as in::

    lin.register_forward_hook(lambda m, args, out: out * 0.5)
    def fn(x):
        y = lin(x)
        y.mul_(3.0)          # writes the hook's result
        return (y * y).sum()

The value the hook returned is then gone from the tensor by the time backward runs, and a stand-in that is a
leaf needing grad cannot be written in place at all (a ``RuntimeError`` where the plain run works). So each
tensor is kept as a ``HookValue``: eager keeps a detached alias and copies it just before fn's first write to
it (``EagerForward.before_write``); XLA keeps the value below functionalization, which no later write changes.
In the replay a value fn wrote is handed out as a fresh copy (a non-leaf needing grad when the forward's was
one), so fn can write it again and the kept value stays as the hook returned it for another backward.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Optional

import torch

from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._record.record import tensors

__all__ = ["HookValue", "hook_writes"]


class HookValue:
    """One tensor a user hook returned in the forward (see the module docstring).

    Args:
        t: the tensor the hook returned.
        value: what is kept of it, if not a detached alias (XLA: the tensor below functionalization).

    Example:
        >>> hv = HookValue(out)
        >>> hv.before_write()          # fn is about to write ``out`` in place (eager)
        >>> y = hv.stand_in(start, lambda: engine_off(recomputation), hook, module)
    """

    __slots__ = ("value", "alias", "version", "requires_grad", "leaf", "copied")

    def __init__(self, t: torch.Tensor, value: Optional[torch.Tensor] = None) -> None:
        self.alias = t.detach()  # shares t's version counter: a write to t after the hook shows here
        self.version = t._version
        self.value = self.alias if value is None else value
        self.requires_grad = t.requires_grad
        self.leaf = t.grad_fn is None
        self.copied = False

    def before_write(self) -> None:
        """Eager: fn is about to write this tensor in place; keep the hook's value (once)."""
        if not self.copied:
            self.value = self.value.clone()
            self.copied = True

    def stand_in(self, start: Callable[[torch.Tensor], torch.Tensor],
                 hidden: Callable[[], contextlib.AbstractContextManager[Any]],
                 hook: Any, module: Any) -> torch.Tensor:
        """The tensor the replay hands fn in place of calling the hook.

        Args:
            start: turns the kept value into the kind fn's ops take (XLA: a functional wrapper).
            hidden: makes a context in which ops are not fn's (the replay's mode does not see them).
            hook, module: named in the error.
        """
        written = self.copied or self.alias._version != self.version
        if written and not self.copied and self.value is self.alias:
            # Eager, written where the forward's mode did not see it (after the forward): the value is gone.
            raise CheckpointError(
                f"the tensor that the hook {getattr(hook, '__name__', hook)!r} of module {type(module).__name__} "
                "returned inside a checkpointed region was modified in place after the forward, so the "
                "recomputation cannot hand it back as the hook returned it. Modify a clone of it instead."
            )
        v = start(self.value).detach()
        if not written:
            return v.requires_grad_(self.requires_grad)  # an alias: no copy
        # fn writes it in the replay too: a copy of its own (a non-leaf that needs grad, as in the forward,
        # so the in-place write is allowed), and the kept value stays the hook's for another backward.
        with hidden(), torch.enable_grad():
            if self.requires_grad and not self.leaf:
                return v.requires_grad_(True).clone()
            return v.clone().requires_grad_(self.requires_grad)


def _root(t: torch.Tensor) -> torch.Tensor:
    return t._base if t._base is not None else t


def hook_writes(hook: Any, args: tuple, result: Any, written: list[torch.Tensor], forward: bool) -> Any:
    """A user hook wrote some of its tensor arguments in place: what the replay can hand back, or an error.

    The replay does not call the hook again, so it cannot repeat the write. A forward hook that only
    writes its module's own output (``out.mul_(0.5)``, returning None or ``out``) is the same as one
    returning the written output: that is kept and handed out (a replay skipping the write would give
    silently wrong gradients: 25.0 off on a Linear).
    A write to the module's inputs (by a pre-hook or a forward hook), or to an output that aliases an
    input, changes tensors fn holds outside the module call: a ``CheckpointError``.

    Args:
        hook, args: the hook and what it was called with (``args[0]`` the module; a forward hook's last
            argument its output).
        result: what the hook returned.
        written: the tensors among ``args[1:]`` whose version moved during the hook.
        forward: a forward hook (else a pre-hook).
    """
    module = args[0] if args else None
    only_output = forward and all(id(t) in {id(o) for o in tensors(args[-1])} for t in written)
    if only_output and (result is None or result is args[-1]):
        inputs = {id(_root(t)) for t in tensors(args[1:-1])}
        if not any(id(_root(t)) in inputs for t in written):
            return args[-1]  # the output as the hook left it: kept as if the hook had returned it
    kind = "forward hook" if forward else "forward pre-hook"
    what = "its module's output" if only_output else "its module's inputs"
    raise CheckpointError(
        f"the {kind} {getattr(hook, '__name__', hook)!r} of module {type(module).__name__} writes {what} in place "
        "inside a checkpointed region (or returns a new output as well): the recomputation does not call hooks "
        "again, so it cannot repeat that write, and the tensors fn holds would differ there. Return new tensors "
        "from the hook instead (``return out * 0.5``, or new inputs from a pre-hook), or register the hook on "
        "a module outside the checkpointed region."
    )
