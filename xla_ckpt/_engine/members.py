"""The checkpointed module's parameters and buffers as its forward found them, put back for its recompute.

A region's recompute reads the module's tensors again through its attributes (fn run again, or on XLA
the recorded program, which finds them by module: ``outside.by_buffer``), where plain autograd reads
the tensors the forward ran with. The two differ when the forward ran with tensors swapped in for the
call only: ``torch.func.functional_call(model, {"emb.weight": w}, ...)`` puts ``w`` into the module's
``_parameters`` and takes it out again when the call returns, before backward; a recompute would then
read the module's own weight (a CheckpointError, "values differ from the forward's", on CPU and XLA). The
same holds for a parameter the user assigns anew between forward and backward, and for a buffer the
forward itself reassigns (``self.buf = self.buf + 1``): plain autograd's graph holds the old tensor.

So a region notes, when it starts, which tensor each of its module's parameter and buffer slots holds,
and its recompute runs with those tensors in the slots that hold another one now, putting back what it
found when it ends (also on errors). Only plain tensors are swapped: FSDP2 reshards a module after its
forward by putting DTensor shards into the same slots, and gathers them again itself in the recompute.
Identity, and ``requires_grad`` of leaves: a GAN step freezing its discriminator
(``p.requires_grad_(False)`` for its parameters) after the forward through it and before backward would
make the replay save fewer tensors than the forward (a CheckpointError, "recomputation ... saved 4 tensors; the forward
... saved 6"), where plain autograd differentiates the graph the forward recorded. A tensor written in place
is the outside check's business (``outside.py``).

The same holds for each submodule's ``training`` flag: ``model.eval()`` between the forward and backward
(an evaluation pass before ``loss.backward()``) would make the replay skip BatchNorm's statistics and
dropout (a CheckpointError, "recomputation diverged ... forward ran aten.add_"), where plain autograd
differentiates the graph the forward recorded; the recompute runs with the flags the forward found:
the checkpointed module's subtree as the region starts, any other module as the forward first calls it
(a function region's modules; ``AsFound.module_ran``).

``torch.nn.utils.parametrize.cached()`` is the same kind of state, process-wide: opened around the
step (as torch's docs show, ``with P.cached(): out = model(x)``, backward after it closed), the forward
computes a parametrized weight once and reads it from the cache after; the replay, the cache closed,
would compute it at each read: a CheckpointError ("recomputation diverged ... ran aten.tril"), every policy on
CPU. The region notes whether caching was on and what the cache held as it started, and its recompute
runs with that (a copy: what the forward added is computed again, as the forward computed it).

So is the default device: a forward run inside ``with torch.device(d)`` (backward outside it) makes
``torch.ones(4)`` in fn on ``d``, and fn run again would make it on the CPU (a CheckpointError, "called with
other arguments than in forward", on XLA's general replay and on every eager device). The recompute runs
inside the device context the forward found.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import torch
from torch import nn
from torch.nn.utils import parametrize as _parametrize

from xla_ckpt._base import compat as _compat
from xla_ckpt._base.subclass import PLAIN

__all__ = ["AsFound"]

_MISSING = object()


class AsFound:
    """What a region's recompute must find as its forward found it: the checkpointed module's slots (and
    whether their leaves required grad), each module's train/eval mode, ``parametrize.cached()``'s cache,
    the default device.

    Args:
        module: the checkpointed module (its subtree is noted now), or None for a function region.

    Example:
        >>> found = AsFound(block)          # the region starts
        >>> found.module_ran(block.attn)    # fn calls a module (its mode, if not noted yet)
        >>> with found.restored():          # backward: the recompute
        ...     replay()
    """

    def __init__(self, module: Optional[nn.Module]) -> None:
        modules = list(module.modules()) if module is not None else []
        # (the module's ``_parameters`` or ``_buffers`` dict, the name, the tensor there, whether it required
        # grad). A TorchScript module's are views of its C++ slots (``OrderedDictWrapper``: no ``get``, so the
        # recompute would raise an AttributeError); nothing swaps tensors into them (``functional_call`` cannot).
        self.slots: list[tuple[dict[str, Any], str, torch.Tensor, bool]] = [
            (d, name, t, t.requires_grad) for m in modules for d in (m._parameters, m._buffers)
            if isinstance(d, dict) for name, t in d.items() if t is not None]
        # Each module's ``training`` flag: the subtree's as the region starts, others' at their first call.
        self.modes: dict[int, tuple[nn.Module, bool]] = {id(m): (m, m.training) for m in modules}
        # What ``parametrize.cached()``'s cache holds, if caching is on (else None).
        self.cache = dict(_parametrize._cache) if _parametrize._cache_enabled else None
        self.device = _compat.default_device()  # None: no device context (the CPU)
        # The caller's torch-function modes: autograd runs the recompute without them (named when it diverges).
        self.function_modes = _function_modes()

    def module_ran(self, module: nn.Module) -> None:
        """fn calls ``module``: its first call notes its mode (a function region's modules)."""
        if id(module) not in self.modes:
            self.modes[id(module)] = (module, module.training)

    @contextlib.contextmanager
    def restored(self) -> Iterator[None]:
        """The slots that hold another plain tensor than in the forward hold the forward's while this runs,
        modules are in the mode the forward found them in, parametrizations cached as the forward started,
        factory ops on the forward's default device; everything ends as it was found (also on errors)."""
        cache = self.cache
        enabled, table = _parametrize._cache_enabled, _parametrize._cache
        # parametrize's cache is process-wide, and ``cached()`` is a counter another thread may move while
        # this runs (a replay on another thread, the fuzz's ``_ReplayingThread``): so this adds to the count
        # and takes the same amount off again, instead of writing back the count it found (which would leave
        # caching on for good, and the cache's stale tensors readable by the next module with a reused id).
        delta = 0
        swap = cache is not None or enabled
        if swap:
            delta = (1 if cache is not None else 0) - enabled
            _parametrize._cache_enabled += delta
            _parametrize._cache = dict(cache) if cache is not None else {}
        attrs: list[tuple[dict, dict, dict]] = []
        swapped: list[tuple[dict, str, Any]] = []
        flipped: list[torch.Tensor] = []
        moded: list[nn.Module] = []
        device = contextlib.nullcontext() if _compat.default_device() == self.device else torch.device(
            self.device if self.device is not None else "cpu")
        try:
            for m, training in self.modes.values():
                if m.training != training:
                    m.training = training  # the flag only: ``train()`` would recurse into modules outside the region
                    moded.append(m)
            for d, name, t, grad in self.slots:
                if t.requires_grad != grad and t.is_leaf:
                    t.requires_grad_(grad)
                    flipped.append(t)
                now = d.get(name, _MISSING)
                if now is t or type(now) not in PLAIN or type(t) not in PLAIN:
                    continue
                swapped.append((d, name, now))
                d[name] = t
            # Each module's attributes as the replay finds them (after the flips above): fn run again assigns
            # them again (``self.attn = probs``, ``self.calls += 1``), which plain autograd never does.
            attrs = [(m.__dict__, dict(m.__dict__), _contents(m.__dict__)) for m, _ in self.modes.values()]
            with device:
                yield
        finally:
            for d, before, contents in attrs:
                _put_back(d, before, contents)
            for d, name, now in reversed(swapped):  # reversed: a slot listed twice ends as it was found
                d[name] = now
            for t in flipped:
                t.requires_grad_(not t.requires_grad)
            for m in moded:
                m.training = not m.training
            if swap:
                _parametrize._cache_enabled -= delta
                _parametrize._cache = table
                if not _parametrize._cache_enabled:
                    table.clear()  # as ``cached()`` does when its count drops to 0 meanwhile


def _function_modes() -> tuple[str, ...]:
    """The class names of the caller's torch-function modes on this thread's stack (``TorchFunctionMode``),
    without the device context (``with torch.device(d)``, noted above) and the library's own."""
    if torch._C._len_torch_function_stack() == 0:  # the common case: nothing to walk
        return ()
    from torch.overrides import _get_current_function_mode_stack  # noqa: PLC0415
    from torch.utils._device import DeviceContext  # noqa: PLC0415

    return tuple(type(m).__name__ for m in _get_current_function_mode_stack()
                 if not isinstance(m, DeviceContext) and not type(m).__module__.startswith("xla_ckpt."))


def _contents(d: dict) -> dict[str, Any]:
    """Copies of the plain lists and dicts among a module's own attributes (``self.aux_losses``), not its
    ``_parameters`` / ``_buffers`` / hook tables, which FSDP2 and the slots above change for the replay."""
    return {k: (list(v) if type(v) is list else dict(v)) for k, v in d.items()
            if type(v) in (list, dict) and not k.startswith("_")}


def _put_back(d: dict, before: dict, contents: dict[str, Any]) -> None:
    """A module's ``__dict__`` as it was before the replay: what fn run again assigned (a tensor it stores for
    later, a Python call counter) is the forward's again, what it added is gone, and a list or dict attribute
    it appended to (``self.aux_losses.append(loss)``) holds what it held."""
    for k, c in contents.items():
        v = before[k]
        if type(v) is list:
            if len(v) != len(c) or any(a is not b for a, b in zip(v, c, strict=True)):
                v[:] = c
        elif v.keys() != c.keys() or any(v[key] is not x for key, x in c.items()):
            v.clear()
            v.update(c)
    if len(d) == len(before) and all(d.get(k, _MISSING) is v for k, v in before.items()):
        return
    for k in [k for k in d if k not in before]:
        del d[k]
    for k, v in before.items():
        if d.get(k, _MISSING) is not v:
            d[k] = v
