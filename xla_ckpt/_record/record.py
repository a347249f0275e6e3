"""Forward of a checkpoint region: what each op was, what the replay must reproduce, what was decided.

Every ATen op that ``fn`` runs (views and detaches aside) becomes one *position*. A position records
what the replay must see again (the op, the shapes/dtypes of its tensor arguments and the values of
its other arguments, the shapes/dtypes of its outputs) and the policy's decision, so the replay can
check each position and fail loudly instead of computing a different gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch.utils._pytree import tree_leaves

from xla_ckpt._base.errors import CheckpointError, fn_name
from xla_ckpt._record.opcall import Decision

__all__ = [
    "CheckpointError", "OpInfo", "op_info", "draws", "signature", "arg_scan", "out_scan", "describe_mismatch",
    "Record", "tensors", "written", "out_meta", "LEAF_TYPES", "fn_name",
]

aten = torch.ops.aten


# Values that are never containers: the per-op walks below skip them without asking pytree.
LEAF_TYPES = frozenset({int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout,
                     torch.memory_format})


def tensors(tree: Any) -> list[torch.Tensor]:
    """The tensors in ``tree``, in pytree order (plain tuples and lists walked here: the per-op case)."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    out: list[torch.Tensor] = []
    _collect(tree, out)
    return out


def _collect(x: Any, out: list[torch.Tensor]) -> None:
    tp = type(x)
    if tp is tuple or tp is list:
        for y in x:
            if isinstance(y, torch.Tensor):
                out.append(y)
            elif type(y) not in LEAF_TYPES:
                _collect(y, out)
    elif isinstance(x, torch.Tensor):
        out.append(x)
    elif tp is dict:  # keyword arguments: pytree's order (insertion)
        _collect(tuple(x.values()), out)
    elif tp not in LEAF_TYPES:  # namedtuples, torch.Size, other registered pytree nodes
        out.extend(t for t in tree_leaves(x) if isinstance(t, torch.Tensor))


# Functionalization turns views into *_copy ops on XLA: they are views for our purposes. Which ones
# comes from their schema (``Tag.view_copy``), so that every view op torch adds is one (``unfold_copy``,
# ``view_as_complex_copy``: a write through such a view must count as a write to its base). ``_unsafe_view``
# has no tag; ``narrow_copy`` is tagged but is a real copy a user calls (``narrow`` reaches
# functionalization as ``slice``). A view reads its base alone: a tagged op that reads a second tensor
# is no view, whatever its tag says. torch tags ``slice_scatter`` (how functionalization writes a slice
# back into its base) ``view_copy``; taken for a view of its base, its output lost the written values'
# producers, and a saved view around it let the replay run on a stand-in of the region's input.
_VIEW_COPY_TAG = torch.Tag.view_copy
_VIEW_COPIES = frozenset({aten._unsafe_view})
_NOT_VIEWS = frozenset({aten.narrow_copy})


_TENSOR_TYPE = torch._C.TensorType.get()


def _tensor_typed(t: Any) -> bool:
    """A schema argument type that holds tensors: ``Tensor``, ``Tensor?``, ``Tensor[]``, ``Tensor?[]``."""
    while isinstance(t, (torch._C.OptionalType, torch._C.ListType)):
        t = t.getElementType()
    return t.isSubtypeOf(_TENSOR_TYPE)


def _reads_one_tensor(op: Any) -> bool:
    """Whether ``op`` takes a single tensor argument (a view's base), by its schema."""
    return sum(_tensor_typed(a.type) for a in op._schema.arguments) == 1
# Neither decided nor replayed by position, just run:
# - detach / lift_fresh: emitted or skipped depending on context (torch's own SAC ignores them too);
# - views: free to replay, must alias their replayed base, and on XLA functionalization emits a
#   varying number of them (a layer norm's input view appears in forward, not in the recompute);
# - _propagate_xla_data: torch_xla's bookkeeping after an in-place op (no value of its own).
_IGNORED = frozenset({aten.detach, aten.lift_fresh, aten.lift_fresh_copy})


# Ops whose schema declares no write but whose kernels update their running statistics in place when
# training (``native_batch_norm(input, weight, bias, running_mean, running_var, training, ...)``, and
# its cuDNN / MIOpen forms): the engine must know the write to replay it from the forward's values and
# to leave the statistics written once (not knowing it, a BatchNorm's ``running_mean`` moves twice per step).
_UNDECLARED_WRITES: dict[Any, tuple[int, ...]] = {
    p: (3, 4) for p in (aten.native_batch_norm, aten.cudnn_batch_norm, aten.miopen_batch_norm)
}


@dataclass(frozen=True)
class OpInfo:
    """Facts about an op overload, computed once per overload (the hot path is one dict lookup)."""

    skipped: bool  # not a position (views, detach, ...)
    mutable: bool  # its schema says it writes to one of its arguments: always replayed
    random: bool  # tagged nondeterministic_seeded: may draw from a generator (see ``draws`` for one call)
    writes: tuple[int | str, ...] = ()  # positions / keyword names of the arguments it writes to (schema or not)
    propagate: bool = False  # torch_xla's _propagate_xla_data (an in-place op's trace on XLA)
    quiet: tuple[tuple[int, str, Any, Any], ...] = ()  # (position, name, default, value): no draw at that value


_INFO: dict[Any, OpInfo] = {}
INFO = _INFO  # read-only for the dispatch modes: ``INFO.get(op) or op_info(op)`` costs no call once known

# ``nondeterministic_seeded`` is a tag of the op, not of the call: an op drawing nothing for some
# arguments is tagged all the same (SDPA at dropout_p=0 would be refused as a random op under
# torch.compile). Argument name -> the value with which the op draws nothing, any one of them being
# enough. Measured on torch 2.9's CPU generator (its state before and after the call); CUDA's
# attention kernels (flash, efficient, cudnn) are expected to take a Philox offset only at dropout_p > 0,
# not measured on a GPU here (tests/integration/compile/test_compiled_random.py measures the CPU). Not listed:
# they draw even then: native_dropout(p=0, train=True) (its mask is bernoulli_(1 - p), which draws) and bernoulli
# at p=0 or 1 (one uniform per element): treated as random, their draws are replayed exactly.
_QUIET_WHEN: dict[str, dict[str, Any]] = {
    "native_dropout": {"train": False},
    "dropout": {"p": 0.0, "train": False},
    "alpha_dropout": {"p": 0.0, "train": False},
    "rrelu_with_noise": {"training": False},
    "rrelu_with_noise_": {"training": False},
    "rrelu_with_noise_functional": {"training": False},
    "_efficient_attention_forward": {"dropout_p": 0.0},
    "_flash_attention_forward": {"dropout_p": 0.0},
}
_NUMBERS = (float, int, bool)  # a SymFloat or a tensor argument is not known: the call draws


def _quiet(op: Any) -> tuple[tuple[int, str, Any, Any], ...]:
    name = op._schema.name.split("::")[-1]
    when = _QUIET_WHEN.get(name)
    if when is None and name.startswith("_scaled_dot_product_"):  # every SDPA kernel, forward or backward
        when = {"dropout_p": 0.0}
    if not when:
        return ()
    return tuple(
        (i, a.name, a.default_value, when[a.name]) for i, a in enumerate(op._schema.arguments) if a.name in when
    )


def op_info(op: Any) -> OpInfo:
    """The facts about ``op``, computed once (the dispatch modes look ``INFO`` up first, inline)."""
    info = _INFO.get(op)
    if info is None:
        packet = op.overloadpacket
        propagate = op._schema.name == "aten::_propagate_xla_data"
        writes = _UNDECLARED_WRITES.get(packet) or tuple(
            (a.name if a.kwarg_only else i)
            for i, a in enumerate(op._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        )
        skipped = packet in _IGNORED or op.is_view or packet in _VIEW_COPIES or propagate or (
            _VIEW_COPY_TAG in op.tags and packet not in _NOT_VIEWS and not writes  # ``out=`` forms write
            and _reads_one_tensor(op))
        random = torch.Tag.nondeterministic_seeded in op.tags
        info = _INFO[op] = OpInfo(
            skipped=skipped,
            mutable=op._schema.is_mutable,
            random=random,
            writes=writes,
            propagate=propagate,
            quiet=_quiet(op) if random else (),
        )
    return info


def draws(info: OpInfo, args: tuple, kwargs: dict) -> bool:
    """Whether this call of the op draws random numbers (advances a generator), not just the op's tag.

    ``scaled_dot_product_attention(..., dropout_p=0.0)`` and ``native_dropout(x, p, train=False)`` carry
    torch's ``nondeterministic_seeded`` tag and draw nothing: their recompute needs no RNG replay, and
    under compile they are no random op. Callers on a per-op path test ``info.random`` first (most
    ops are not tagged, and that keeps them free of this call).

    Args:
        info: the op's :func:`op_info`.
        args, kwargs: the call's arguments, as a dispatch mode receives them.

    Example:
        >>> q = torch.randn(1, 1, 4, 8)
        >>> op = aten._scaled_dot_product_flash_attention_for_cpu.default
        >>> draws(op_info(op), (q, q, q, 0.0), {}), draws(op_info(op), (q, q, q, 0.1), {})
        (False, True)
    """
    if not info.random:
        return False
    for index, name, default, value in info.quiet:
        given = args[index] if index < len(args) else kwargs.get(name, default)
        if type(given) in _NUMBERS and given == value:
            return False
    return True


def written(info: OpInfo, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors a mutable op writes to."""
    out = []
    for w in info.writes:
        a = kwargs.get(w) if isinstance(w, str) else (args[w] if w < len(args) else None)
        out.extend(tensors(a))
    return out


def _sig(a: Any, found: list[torch.Tensor]) -> Any:
    if isinstance(a, torch.Tensor):
        found.append(a)
        return (a.shape, a.dtype)
    if isinstance(a, (list, tuple)):
        return tuple([_sig(x, found) for x in a])
    return a


def arg_scan(args: tuple, kwargs: dict) -> tuple[tuple, list[torch.Tensor]]:
    """One pass over an op's arguments: its :func:`signature` and its tensor arguments, in order.

    Forward and replay take it before the op runs (an in-place op may change its arguments' shapes).
    """
    found: list[torch.Tensor] = []
    sig = []
    for a in args:  # a loop, tensors inline: Python 3.11 makes a comprehension and each _sig a call (per op)
        if isinstance(a, torch.Tensor):
            found.append(a)
            sig.append((a.shape, a.dtype))
        else:
            sig.append(_sig(a, found))
    return (tuple(sig), tuple([(k, _sig(v, found)) for k, v in kwargs.items()]) if kwargs else ()), found


def signature(args: tuple, kwargs: dict) -> tuple:
    """What the replay must feed this position again: tensor shapes/dtypes and every other argument.

    Values of tensors are not compared (that is what ``verify=True`` does); Python numbers, sizes,
    dtypes and flags are, so a scale or a size picked by Python-side state (a counter, ``random``)
    that differs on recompute is caught here.
    """
    return arg_scan(args, kwargs)[0]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except Exception:  # objects without a usable == (compared by identity)
        return a is b


def describe_mismatch(forward: tuple, replay: tuple) -> Optional[str]:
    """None when the two signatures agree (NaN equals NaN), else a short description of the first difference."""
    if forward == replay or _same(forward, replay):
        return None
    (fa, fk), (ra, rk) = forward, replay
    for i, (f, r) in enumerate(zip(fa, ra, strict=False)):  # unequal counts are reported after the shared ones
        if not _same(f, r):
            return f"argument {i}: forward {_show(f)}, recompute {_show(r)}"
    if len(fa) != len(ra):
        return f"{len(fa)} arguments in forward, {len(ra)} on recompute"
    return f"keyword arguments: forward {_show(fk)}, recompute {_show(rk)}"


def _show(s: Any) -> str:
    if isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], torch.Size):
        return f"tensor{tuple(s[0])} {s[1]}"
    if isinstance(s, tuple):
        return "(" + ", ".join(_show(x) for x in s) + ")"
    return repr(s)


def out_meta(out: Any) -> tuple:
    """Shapes and dtypes of an op's tensor outputs (what the replay's outputs must match)."""
    if isinstance(out, torch.Tensor):
        return ((out.shape, out.dtype),)
    return tuple([(t.shape, t.dtype) for t in tensors(out)])


def out_scan(out: Any) -> tuple[list[torch.Tensor], tuple, bool]:
    """One pass over an op's outputs: the tensors, their :func:`out_meta`, and whether ``out`` is only
    tensors (one tensor, or a tuple/list of tensors: what :func:`spec_of` and a stand-in can rebuild)."""
    if isinstance(out, torch.Tensor):
        return [out], ((out.shape, out.dtype),), True
    outs = tensors(out)
    only = isinstance(out, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in out)
    return outs, tuple([(t.shape, t.dtype) for t in outs]), only


@dataclass(slots=True)
class Record:
    """What forward ran at one position (no tensors: metadata only)."""

    op: Any
    info: OpInfo
    decision: Decision
    sig: tuple  # see signature()
    meta: tuple  # shapes/dtypes of the tensor outputs
    module: str
    tag: Optional[str]
    draw: Any = None  # random ops: the generator and its states around the op (_record.replay_state.Draw)
    spec: Any = None  # eager: how to make a stand-in for the outputs (see stand_in)
    live: bool = True  # False: backward needs nothing this op makes (see _record.liveness)
