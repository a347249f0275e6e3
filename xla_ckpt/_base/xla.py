"""Most of what the library asks torch_xla (devices, buffers, RNG, syncs, host offload), imported lazily.

The rest of the library asks this module questions ("is this an XLA tensor?", "which buffer is it?")
so that ``import xla_ckpt`` and every eager feature work on machines without torch_xla. Four other
modules import torch_xla themselves, always inside the function that needs it, because what they use
belongs to their own feature: ``_base/xla_state.py`` (state torch_xla keeps outside the dispatcher:
sharding, SPMD mode), ``_api/scan.py`` and ``_api/scan_stack.py`` (torch_xla's scan, imported only when
a scan runs) and ``_cli/explain.py`` (the ``xla`` device the command line is asked for).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import itertools
import math
import sys
import threading
from types import ModuleType
from typing import Any, Hashable, Iterator, Optional

import torch

from xla_ckpt._base.subclass import PLAIN, wrapped

__all__ = [
    "available",
    "is_xla",
    "buffer_key",
    "buffer_nbytes",
    "shape_nbytes",
    "get_rng_state",
    "set_rng_state",
    "base_seed",
    "advance_rng",
    "hardware_type",
    "materialize",
    "optimization_barrier_",
    "place_to_host",
    "place_to_device",
    "PLACEMENT_TARGET",
    "device_module_for_this_compile",
    "spmd_scan_missing",
]


@functools.cache
def available() -> bool:
    """True when torch_xla can be imported (without importing it)."""
    return importlib.util.find_spec("torch_xla") is not None


def spmd_scan_missing() -> Optional[str]:
    """Under SPMD, what torch_xla's scan lacks to run (``"jax and torchax"``), else None.

    torch_xla 2.9's scan shards each gradient like its forward input with ``shard_as``, a JAX
    function called through torchax (``torch_xla[pallas]``): without them the backward trace fails
    with ``No module named 'jax'``. Never imports torch_xla; asked only with an XLA tensor at hand.
    """
    if "torch_xla" not in sys.modules:
        return None
    import torch_xla.runtime as xr  # noqa: PLC0415

    if not xr.is_spmd():
        return None
    return _jax_interop_missing()


@functools.cache
def _jax_interop_missing() -> Optional[str]:
    from torch_xla._internal import jax_workarounds as jw  # noqa: PLC0415  (torch_xla's own check)

    missing = [n for n, ok in (("jax", jw.maybe_get_jax(log=False)), ("torchax", jw.maybe_get_torchax())) if ok is None]
    return " and ".join(missing) or None


def _torch_xla() -> ModuleType:
    import torch_xla  # noqa: PLC0415  (lazy on purpose)

    return torch_xla


def _xlac() -> Any:
    return _torch_xla()._XLAC


def is_xla(t: torch.Tensor) -> bool:
    """True for a tensor on an XLA device; never imports torch_xla."""
    return t.device.type == "xla"


def shape_nbytes(t: torch.Tensor) -> int:
    """Bytes of ``t`` computed from its shape.

    On XLA ``numel()``/storage sizes can be stale after torch_xla replaces a tensor's data
    (``_replace_xla_tensor``, used by FSDP), so the shape is the only reliable source.
    """
    if type(t) not in PLAIN:
        inner = wrapped(t)
        if inner is not None:
            return sum(shape_nbytes(x) for x in inner)  # DTensor: its local shard, not the global shape
    return math.prod(t.shape) * t.element_size()


def buffer_key(t: torch.Tensor) -> Hashable:
    """Identity of the device buffer behind ``t``: equal keys mean the same memory.

    XLA: every live XLA tensor id becomes its own device buffer once the graph runs, views included
    (functionalization turns them into ``*_copy`` ops), so the key is the XLA tensor id (never reused).
    Eager: views share their base's storage, so the key is the storage's serial number, not its
    address: an address is reused once its storage is freed.
    Neither forces a graph execution or a device-to-host copy.
    """
    if t.is_xla:  # type: ignore[attr-defined]
        # The looked-up function itself, not a call to _tensor_id(): one Python call less per key
        # (about 1,500 keys per default-GPT step on XLA).
        return ("xla", (_TENSOR_ID or _tensor_id())(t))
    if type(t) not in PLAIN:
        inner = wrapped(t)
        if inner is not None:
            return ("wrapper",) + tuple(buffer_key(x) for x in inner)
    storage = t.untyped_storage()
    # The storage's serial number, not its address: a region's intermediate freed in the forward
    # (``rows.flip(0)`` after an ``index_put_``) and a tensor fn then builds outside the dispatcher
    # (``torch.tensor(...)``) can get the same memory; keyed by address, the engine would take the new
    # tensor for the dead op's output, and backward would read that op's recomputed values instead (a
    # silently wrong gradient). Not ``_cdata`` either: a freed StorageImpl's address is
    # reused too. torch keeps one Python object per storage for the storage's whole life (PyObject
    # preservation, as for tensors), so the number lives on it; a copy is a new object, and the
    # ``_cdata`` check keeps a copied ``__dict__`` from sharing it (tests/unit/_base/test_buffer_key.py
    # checks what this relies on). Inline: no Python call per key (tests/unit/_engine/test_trace_cost.py).
    tag = getattr(storage, _SERIAL_ATTR, None)
    if tag is None or tag[0] != storage._cdata:
        tag = (storage._cdata, next(_SERIALS))
        setattr(storage, _SERIAL_ATTR, tag)
    return (t.device, tag[1], storage.nbytes())


# Eager buffers' identities (``buffer_key``): numbered on first sight, never reused in the process.
_SERIALS = itertools.count(1)
_SERIAL_ATTR = "_xla_ckpt_serial"


_TENSOR_ID: Any = None


def _tensor_id() -> Any:
    # Called per op (buffer_key is on the engine's hot path): look the function up once.
    global _TENSOR_ID
    if _TENSOR_ID is None:
        _TENSOR_ID = _xlac()._xla_get_tensor_id
    return _TENSOR_ID


def buffer_nbytes(t: torch.Tensor) -> int:
    """Bytes held by the buffer behind ``t`` (see :func:`buffer_key`); a wrapper subclass: its tensors'."""
    if is_xla(t):
        return shape_nbytes(t)
    if type(t) not in PLAIN:
        inner = wrapped(t)
        if inner is not None:
            return sum(buffer_nbytes(x) for x in inner)
    return t.untyped_storage().nbytes()


# --------------------------------------------------------------------------- RNG


def get_rng_state(device: torch.device) -> Any:
    """The RNG state of one XLA device (an integer seed in torch_xla)."""
    import torch_xla.core.xla_model as xm  # noqa: PLC0415

    return xm.get_rng_state(device)  # type: ignore[arg-type]  # annotated str; torch_xla str()s what it gets


def set_rng_state(state: Any, device: torch.device) -> None:
    import torch_xla.core.xla_model as xm  # noqa: PLC0415

    xm.set_rng_state(state, device)  # type: ignore[arg-type]  # annotated str; torch_xla str()s what it gets


def base_seed(device: torch.device) -> int:
    """torch_xla's base seed of ``device``: the one the next sync derives its seed from.

    Reading it also sets the running seed back to it (``GetBaseSeedData``, made for the dynamo
    bridge): the caller sets the state right after. One 8-byte upload to the device.
    """
    import torch_xla  # noqa: PLC0415

    torch_xla._XLAC._get_base_seed_as_tensor(str(device))
    return get_rng_state(device)


def advance_rng(device: torch.device, n: int) -> None:
    """Trace ``n`` draws on ``device`` (nothing executes them): the running seed moves ``n`` updates
    on from the base, and the seed value the next random op traces follows from it as in a plain run."""
    if n:
        with torch.no_grad():
            t = torch.empty(0, device=device)
            if torch._is_functional_tensor(t):
                t = torch._from_functional_tensor(t)  # below functionalization: 8 us a draw, not 70
            for _ in range(n):
                t.uniform_()  # every XLA random op takes one seed update, whatever its size


# --------------------------------------------------------------------------- fence


def hardware_type(device: torch.device) -> str:
    """'CPU', 'TPU', 'CUDA', ... for an XLA device."""
    return _hardware_type(str(device))


@functools.cache
def _hardware_type(device: str) -> str:
    # Cached per device name: a device's hardware does not change within a process, and torch_xla's
    # lookup parses the name with a regex each call (about 0.1 ms; once per recomputed region).
    import torch_xla.core.xla_model as xm  # noqa: PLC0415

    return str(xm.xla_device_hw(device))


def materialize(tensors: list[torch.Tensor]) -> None:
    """Compute the pending graphs of these XLA tensors now (only theirs), so that they hold device data."""
    if tensors:
        _xlac()._xla_sync_multi(tensors, devices=[], wait=True)


def optimization_barrier_(tensors: list[torch.Tensor]) -> None:
    """In-place XLA optimization barrier (effective on TPU/GPU; removed early by XLA:CPU)."""
    import torch_xla.core.xla_model as xm  # noqa: PLC0415

    xm.optimization_barrier_(tensors)


# --------------------------------------------------------------------------- torch.xla, while compiling

# torch's checkpoint looks up ``getattr(torch, device_type)`` for every region (``_get_device_module``
# in torch/utils/checkpoint.py), also when AOTAutograd traces the ``tag_activation_checkpoint``
# higher-order op that selective checkpointing under torch.compile becomes. torch_xla 2.9 registers
# no ``torch.xla`` module, so ``torch.compile(backend="openxla")`` of a checkpointed model fails with
# "module 'torch' has no attribute 'xla'". Under compile that op forces ``preserve_rng_state=False``
# (torch/_higher_order_ops/wrap.py), so torch only reads the module's ``_initialized`` flag: a stand-in
# that says "not initialised" is all it needs. It exists only while a Dynamo compile runs.
def _stand_in() -> ModuleType:
    mod = ModuleType("torch.xla", "xla_ckpt's stand-in for the device module torch_xla 2.9 does not register.")
    mod._initialized = False  # type: ignore[attr-defined]  # torch then stashes no device RNG state

    def unsupported(*_: Any, **__: Any) -> Any:
        raise RuntimeError(
            "xla_ckpt's stand-in torch.xla module holds no RNG state: it exists only while torch.compile "
            "traces a checkpointed region, where torch's checkpoint does not preserve device RNG."
        )

    for name in ("device", "get_rng_state", "set_rng_state", "current_device", "device_count"):
        setattr(mod, name, unsupported)
    return mod


def device_module_for_this_compile() -> bool:
    """Give ``torch`` an ``xla`` device module until the running Dynamo compile ends; True if one exists.

    Called (executed, not traced: see ``_compile.marks``) while Dynamo traces a checkpointed region. Does
    nothing without torch_xla loaded, or when ``torch.xla`` already exists (a torch_xla that registers
    its own). The stand-in is removed when the compile ends (``_base.compile_scope``).

    Example:
        >>> xla.device_module_for_this_compile()   # inside a compile: torch.xla exists until it ends
    """
    if "torch_xla" not in sys.modules:
        return False
    if not hasattr(torch, "xla"):
        from xla_ckpt._base.compile_scope import set_for_this_compile  # noqa: PLC0415

        set_for_this_compile(torch, "xla", _stand_in())
    return True


# --------------------------------------------------------------------------- host placement

PLACEMENT_TARGET = "annotate_device_placement"  # the custom call both annotations lower to


def place_to_host(t: torch.Tensor) -> torch.Tensor:
    """``t`` annotated to live in pinned host memory (torch_xla's custom call; XLA's host offloader moves it).

    The annotation lowers to ``custom-call(..., custom_call_target="annotate_device_placement")`` with
    ``_xla_buffer_placement="pinned_host"``. Honoured on TPU/GPU; XLA:CPU cannot compile it
    (torch_xla 2.9: "Unknown custom-call API version enum value: 0").
    """
    from torch_xla.experimental.stablehlo_custom_call import place_to_host as annotate  # noqa: PLC0415

    return annotate(t)


def place_to_device(t: torch.Tensor) -> torch.Tensor:
    """``t`` annotated back to device memory (the pair of :func:`place_to_host`)."""
    from torch_xla.experimental.stablehlo_custom_call import place_to_device as annotate  # noqa: PLC0415

    return annotate(t)


# --------------------------------------------------------------------------- einsum

# torch_xla registers aten::einsum at AutogradXLA and lowers it straight to an XLA einsum without
# going back through the dispatcher (torch_xla/csrc/xla_manual_registration.cpp, aten_autograd_ops.cpp):
# a TorchDispatchMode sees no op at all, so a policy cannot save the matmul. Its composite (the
# CompositeImplicitAutograd kernel every other backend runs) goes through permute / view / bmm, which a
# dispatch mode sees.
_einsum_lock = threading.Lock()
_einsum_users = 0
# (torch.einsum, torch.functional.einsum) as the first user found them: put back by the last one,
# so a caller's own replacement of einsum survives the region.
_einsum_before: tuple[Any, Any] = (torch.einsum, torch.functional.einsum)


def _visible_einsum(*args: Any, **kwargs: Any) -> Any:
    """``torch.einsum`` while a region runs: two XLA operands go through the composite (see above)."""
    if args and isinstance(args[0], str) and not kwargs:
        operands = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
        # Two operands only: a longer chain's contraction order is torch's (opt_einsum) choice.
        if len(operands) == 2 and all(isinstance(t, torch.Tensor) for t in operands) and any(
            is_xla(t) for t in operands
        ):
            return torch.ops.aten.einsum.default.decompose(args[0], operands)
    return _einsum_before[1](*args, **kwargs)


@contextlib.contextmanager
def einsum_visible() -> Iterator[None]:
    """Inside the block, ``torch.einsum`` of two XLA tensors runs as its composite (bmm and views).

    A checkpoint region enters it in forward and in replay so that a policy sees einsum's matmul on
    XLA as it does on CPU (a ``bmm``; its batch size classifies it). Same values, same gradients.
    ``torch.einsum`` is swapped for the block's duration and put back after, reference counted over
    threads (another thread's einsum meanwhile also runs the composite: same values). Not a
    TorchFunctionMode: that costs a Python call for every torch function of the region, about a
    seventh of a GPT block's host trace. A reference taken before the block
    (``from torch import einsum``) runs torch_xla's fused einsum, which no dispatch mode sees.

    Example:
        >>> with xla.einsum_visible():
        ...     y = torch.einsum("ij,jk->ik", a, b)   # aten.bmm under a dispatch mode, on XLA too
    """
    global _einsum_users, _einsum_before
    with _einsum_lock:
        if _einsum_users == 0:
            _einsum_before = (torch.einsum, torch.functional.einsum)
            torch.einsum = torch.functional.einsum = _visible_einsum
        _einsum_users += 1
    try:
        yield
    finally:
        with _einsum_lock:
            _einsum_users -= 1
            if _einsum_users == 0:
                torch.einsum, torch.functional.einsum = _einsum_before
