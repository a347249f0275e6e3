"""An error found inside torch's selective-checkpoint forward, raised as the region's forward exits.

torch's non-reentrant checkpoint runs a region's forward inside a generator,
``with _checkpoint_hook(frame), forward_context: yield``, and resumes it only when the forward
returned. An exception out of the forward (a policy raising inside the ``policy_fn`` torch's
``_CachingTorchDispatchMode`` calls) leaves that generator suspended: the dispatch mode and the
saved-tensor hooks stay installed for as long as the generator lives, and the exception's traceback
keeps it alive (pytest's report, a notebook's last traceback, ``sys.last_traceback``). Every later op
of the process then goes through the dead region's mode and every saved tensor into its frame
(``nn.Linear(16, 32)`` afterwards raises "random op aten.uniform_ ...").

So a forward-time error is not raised where it is found. :class:`Deferred` keeps it, the policy lets
the forward run on (any mark will do: the step fails), and :class:`ForwardContext`, which is the
``forward_context`` torch enters, leaves torch's mode first and raises the error from its own
``__exit__``: the ``with`` statement then pops the saved-tensor hooks too and the generator finishes,
so nothing is left installed, whatever keeps the traceback. A recompute-time error is raised at once
(torch runs the recompute in a plain ``with``, which exits on an exception).

The mode on the dispatch stack stays torch's own object: higher-order ops (flex_attention, triton
kernels) find their selective-checkpoint rule by the exact type of the mode on the stack.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any, Optional

from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["Deferred", "ForwardContext"]


class Deferred:
    """The first error of a region's forward, kept until the forward exits (see the module docstring)."""

    def __init__(self) -> None:
        self.error: Optional[BaseException] = None

    def keep(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error

    def take(self) -> Optional[BaseException]:
        error, self.error = self.error, None
        return error


class _Open(threading.local):
    def __init__(self) -> None:
        self.stack: list["ForwardContext"] = []


_open = _Open()  # the forward contexts entered and not left, innermost last (nested regions)


def _running(frame: Optional[FrameType]) -> bool:
    """Whether ``frame`` is on the current call stack (not a finished or suspended one)."""
    f: Optional[FrameType] = sys._getframe(1)
    while f is not None:
        if f is frame:
            return True
        f = f.f_back
    return False


class ForwardContext(TorchDispatchMode):
    """torch's forward selective-checkpoint mode, entered and left by this object; then the kept error.

    A ``TorchDispatchMode`` because torch checks that ``context_fn`` returns modes under compile; it
    is never on the dispatch stack itself (``inner`` is).

    Args:
        inner: the forward mode of ``torch.utils.checkpoint.create_selective_checkpoint_contexts``.
        deferred: where the region's ``policy_fn`` keeps a forward-time error.

    Example:
        >>> fwd, rec = create_selective_checkpoint_contexts(lowering.policy_fn)
        >>> return ForwardContext(fwd, lowering.deferred), rec
    """

    def __init__(self, inner: TorchDispatchMode, deferred: Deferred) -> None:
        super().__init__()
        self.inner = inner
        self.deferred = deferred
        self.site: Optional[FrameType] = None

    # torch >= 2.13 numbers each compiled region by writing ``fwd_ctx.ac_graph_id`` on the forward
    # context its ``context_fn`` returned (``tag_activation_checkpoint_impl``); the inner mode copies it
    # into every node's meta, and the partitioner compares the ids of neighbouring nodes
    # (``cleanup_recompute_tags``: left on this wrapper, the id reaches no node and ``None > None`` raises a TypeError).
    # torch 2.9 numbers the nodes itself and never sets it.
    @property
    def ac_graph_id(self) -> Any:
        return getattr(self.inner, "ac_graph_id", None)

    @ac_graph_id.setter
    def ac_graph_id(self, value: Any) -> None:
        self.inner.ac_graph_id = value  # type: ignore[attr-defined]  # set by torch's compiled SAC, not in the stub

    def __enter__(self) -> "ForwardContext":
        self.inner.__enter__()
        # The frame that runs the region (torch's checkpoint(), the generator's caller): an
        # enclosing region is running only while its frame is on the stack (one whose forward
        # raised stays in ``_open`` but is not running any more).
        self.site = sys._getframe(1).f_back
        _open.stack.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _open.stack[:] = [c for c in _open.stack if c is not self]
        self.site = None
        self.inner.__exit__(exc_type, exc, tb)
        error = self.deferred.take()
        if error is None or exc_type is not None:
            return
        outer = next((c for c in reversed(_open.stack) if _running(c.site)), None)
        if outer is not None:
            # A nested region: raised here it would leave the enclosing region's forward, whose
            # generator would stay suspended. The enclosing region raises it as its forward exits.
            outer.deferred.keep(error)
            return
        raise error

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.inner.__torch_dispatch__(func, types, args, kwargs)  # not reached: never on the stack
