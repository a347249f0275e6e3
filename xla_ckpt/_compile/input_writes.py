"""In-place writes to a compiled graph's inputs inside a region: saved, never recomputed from the input.

Under ``torch.compile`` AOTAutograd traces a region functionally: ``b.add_(0.5)`` on a graph input
``b`` (an argument, a parameter, a buffer) becomes ``b1 = add(b, 0.5)``, later ops read ``b1``, and
the graph's epilogue copies ``b1`` into ``b`` once the forward has run. A node the partitioner
recomputes in backward reads its inputs *then*: ``add(b, 0.5)`` recomputed from ``b`` reads the
written ``b`` and gives ``b + 1.0``, and every gradient through it is silently wrong (torch warns that
"the checkpointed region [must] not contain in-place ops"; a counter buffer, a region input written
in place, an ``instance_norm`` writing its running statistics through ``alias().copy_`` all hit it).

So the lowering asks :class:`InputWrites` about each op while AOTAutograd traces (the FX node behind
each tensor tells whether it is the graph input itself or a view of one):

- on torch < 2.15, a view of AOTAutograd's clone of an input it writes is saved (``MUST_SAVE``: an alias,
  no bytes; ``views_input``), and reads and writes of that clone count as the input's;
- an op that writes a graph input is saved (``MUST_SAVE``): its outputs, the values later ops read, are
  kept, and nothing recomputes them from the written input. BatchNorm in training writes its running
  statistics but its outputs do not depend on them (``STATISTICS_ONLY``): it stays under the policy,
  except on XLA. There (``torch.compile(backend="openxla")``) AOTAutograd writes the statistics back in
  its Python epilogue (``running_mean.copy_(new)``), after the forward saved them for the recomputed
  BatchNorm: the copy moves their version, and backward would raise autograd's bare "modified by an
  inplace operation" (a Linear + BatchNorm1d region, every policy; the plain compile runs). On XLA it is saved;
- an op the policy recomputes that read a graph input *before* the region wrote it would read the
  written value in backward: a ``CheckpointError`` names both ops (plain autograd raises on most of these
  too, where it saved the input; this covers the rest).

Only the joint trace has FX nodes (``get_proxy_mode``): the metadata pass before it, and a region torch
runs eagerly (``backend="eager"``, real tensors: torch's own version check raises there) are not judged.
"""

from __future__ import annotations

import operator
from typing import Any, Optional, Sequence, cast

import torch
from torch.utils._pytree import tree_leaves

from xla_ckpt._base import compat as _compat
from xla_ckpt._base.errors import CheckpointError

__all__ = ["InputWrites", "STATISTICS_ONLY"]

aten = torch.ops.aten
# Ops whose written inputs (running statistics) do not feed their outputs in training: recomputing
# them from the written statistics gives the same outputs (the written values are not used again).
STATISTICS_ONLY = frozenset({aten._native_batch_norm_legit.default, aten.native_batch_norm.default,
                             aten._batch_norm_with_update.default})


def _tracer() -> Any:
    from torch.fx.experimental.proxy_tensor import get_proxy_mode  # noqa: PLC0415

    mode = get_proxy_mode()
    return None if mode is None else mode.tracer


def _graph_input(t: Any, tracer: Any, fresh: frozenset) -> Optional[torch.fx.Node]:
    """The graph input (placeholder) ``t`` is, or is a view of; None for values made in the graph.

    ``fresh``: the nodes the op being judged traced (torch >= 2.13 asks after the op ran, so a written
    tensor is already its new value there: ``add(b, 0.5)`` for ``b.add_(0.5)``, ``slice_scatter(b, ...)``
    for a write through a view). The value written is their first argument (functionalization's
    convention: ``self`` first), and a ``getitem``'s source; a functional op's ``<arg>_out`` output is
    the new value of its argument ``arg`` (``_written_argument``).
    """
    node = _node(t, tracer)
    if node is None:  # not traced (a constant): not a graph input
        return None
    while node.op == "call_function":
        target = node.target
        if _input_clone(node):
            return cast(torch.fx.Node, node.args[0])
        if target is operator.getitem and node in fresh:
            written = _written_argument(node.args[0], node.args[1])
            if written is not None:  # a functional op's ``<arg>_out``: the write goes to ``arg``, not ``self``
                node = written
                continue
        through = _through_view(node)
        if not (through or node in fresh) or not node.args or not isinstance(node.args[0], torch.fx.Node):
            return None
        node = node.args[0]
    return node if node.op == "placeholder" else None


def _node(t: torch.Tensor, tracer: Any) -> Optional[torch.fx.Node]:
    """The FX node behind ``t`` in this trace; None for a value not traced (a constant)."""
    from torch._subclasses.functional_tensor import FunctionalTensor  # noqa: PLC0415
    from torch.fx.experimental.proxy_tensor import get_proxy_slot  # noqa: PLC0415

    if isinstance(t, FunctionalTensor):
        t = torch._from_functional_tensor(t.elem)
    # A default, not the miss's RuntimeError: its message formats the tensor, and a 0-dim real constant
    # (``t[1, 0] = 2.0``'s) formats through ``.item()`` under the fake mode, which raises.
    slot = get_proxy_slot(t, tracer, None)
    proxy = getattr(slot, "proxy", None)
    return getattr(proxy, "node", None)


def _input_clone(node: torch.fx.Node) -> bool:
    """Whether ``node`` is AOTAutograd's clone of a graph input (one that requires grad and is written in
    place), which torch < 2.15 recomputes from the written input (``_base.compat.RECOMPUTES_INPUT_CLONE``).
    AOTAutograd adds it before the user's code runs: no stack trace, unlike a user's ``clone``."""
    return (_compat.RECOMPUTES_INPUT_CLONE and node.target is aten.clone.default and bool(node.args)
            and isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder"
            and "stack_trace" not in node.meta)


def _is_view(target: Any) -> bool:
    return isinstance(target, torch._ops.OpOverload) and (target.is_view or target is aten.alias.default)


def _through_view(node: torch.fx.Node) -> bool:
    """Whether ``node`` is a view of its first argument: a view op (``t``, ``select``), or one piece
    (``getitem``) of a view op returning a list (``split``, ``unbind``, ``chunk``: a read through those
    pieces counts too, or a recomputed ``cat`` of ``b.split()`` would read the written ``b``)."""
    if node.target is operator.getitem:
        return bool(node.args) and _is_view(getattr(node.args[0], "target", None))
    return _is_view(node.target)


def _written_argument(src: Any, index: Any) -> Optional[torch.fx.Node]:
    """The argument of ``src`` whose new value is ``src``'s output ``index``, for a functional op's outputs.

    Functionalization turns a mutable op into its ``*_functional`` variant, which returns each written
    argument's new value as ``<arg>_out`` (``rrelu_with_noise_functional(self, noise, ...) -> (Tensor,
    Tensor noise_out)``, BatchNorm's ``running_mean_out``). The write goes to that argument, not to
    ``self``: following ``self`` would call F.rrelu's fresh noise, and BatchNorm's running statistics, a
    write to the op's input (a false CheckpointError after a recomputed read of that input).
    """
    target = getattr(src, "target", None)
    if not isinstance(target, torch._ops.OpOverload) or not isinstance(index, int):
        return None
    returns = target._schema.returns
    name = returns[index].name if 0 <= index < len(returns) else None
    if not name or not name.endswith("_out"):
        return None
    for pos, arg in enumerate(target._schema.arguments):
        if arg.name == name[: -len("_out")]:
            value = src.args[pos] if pos < len(src.args) else src.kwargs.get(arg.name)
            return value if isinstance(value, torch.fx.Node) else None
    return None


class InputWrites:
    """One region's reads and writes of graph inputs while AOTAutograd traces it (module docstring)."""

    def __init__(self, statistics_recomputable: bool = True) -> None:
        # False on XLA: a ``STATISTICS_ONLY`` op writing graph inputs is saved too (module docstring)
        self.statistics_recomputable = statistics_recomputable
        # graph input -> the first op the policy recomputes that read it (its name and module), unwritten so far
        self.read_by_recomputed: dict[torch.fx.Node, tuple[Any, str]] = {}

    def writes_input(self, op: Any, args: tuple, kwargs: dict, module: str, fresh: Sequence[Any] = ()) -> bool:
        """Whether ``op`` (mutable) writes a graph input in place; raises if the policy recomputed a read of it.

        ``fresh``: the FX nodes ``op`` traced, when torch asks after the op (see ``_graph_input``).
        """
        tracer = _tracer()
        if tracer is None:
            return False
        new = frozenset(fresh)
        written = []
        for i, arg in enumerate(op._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            for t in tree_leaves(value):
                node = _graph_input(t, tracer, new) if isinstance(t, torch.Tensor) else None
                if node is not None:
                    written.append(node)
        for node in written:
            reader = self.read_by_recomputed.get(node)
            if reader is not None:
                raise CheckpointError(
                    f"xla_ckpt: op {op} in module '{module or '(the region root)'}' writes in place to an input of "
                    f"the compiled graph (an argument, parameter or buffer) that op {reader[0]} in module "
                    f"'{reader[1] or '(the region root)'}' read before it, and the policy recomputes {reader[0]}: "
                    "under torch.compile the recompute in backward would read the written value, a wrong "
                    "gradient. Clone the input before writing it, save that op (e.g. policies.save_ops), or "
                    "run this region outside torch.compile (the eager engine watches these writes)."
                )
        return bool(written) and (op not in STATISTICS_ONLY or not self.statistics_recomputable)

    def views_input(self, args: tuple) -> bool:
        """Whether a view op's source is AOTAutograd's clone of a graph input written in place, or a view of
        it (``_input_clone``, torch < 2.15): such a view is saved (an alias: no bytes). Recomputed in
        backward it reads the input as the graph's epilogue left it: ``v = a.t(); v.clamp_(-1, 1)`` under
        ``everything_saveable`` would recompute ``t`` from the written ``a`` (autograd's version check
        raises where the plain compile runs). Views of other inputs (a weight's ``t``) stay unmarked: the
        partitioner recomputes views freely."""
        tracer = _tracer()
        if tracer is None or not args or not isinstance(args[0], torch.Tensor):
            return False
        node = _node(args[0], tracer)
        while node is not None and node.op == "call_function":
            if _input_clone(node):
                return True
            if not (_through_view(node) and node.args and isinstance(node.args[0], torch.fx.Node)):
                return False
            node = node.args[0]
        return False

    def read(self, op: Any, args: tuple, kwargs: dict, module: str) -> None:
        """``op``, which the policy recomputes, read these arguments (BatchNorm's reads of its statistics
        are not judged: its outputs do not depend on them, see ``STATISTICS_ONLY``)."""
        tracer = _tracer()
        if tracer is None or op in STATISTICS_ONLY:
            return
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                node = _graph_input(t, tracer, frozenset())
                if node is not None:
                    self.read_by_recomputed.setdefault(node, (op, module))
