"""The call-time side of ``apply(..., scan=True)``: a Hugging Face decoder stack run as one torch_xla scan.

The model's own forward is not copied: it still loops ``for layer in self.layers`` and calls each
layer with the hidden states and the per-call arguments (mask, position ids and embeddings, cache
flags). Each layer's instance-level ``forward`` (:class:`ScanForward`) defers: layers ``0..n-2``
record their arguments and hand back their input unchanged; the last layer runs the whole stack as one
scan on the first layer's input. Every deferred call is checked against the same layer of the first
repeating group (one layer, or Gemma 2's sliding and global pair: the same hidden states object, the
same argument objects), so a model whose loop changes anything between layers, or passes another
mask than that layer's, is a ``CheckpointError``, never a wrong value. The weights are the stacked
parameters of :mod:`xla_ckpt._api.scan_weights`, read in place. The
owner's (``model.model``'s) hooks start and finish each forward: a forward that stops before the
last layer is an error too.

The per-call tensors enter the scan as inputs broadcast over the repeats (``expand``): torch_xla's
scan traces the body with AOTAutograd on fake tensors, which refuses tensors the body closes over;
gradients into them (if any need one) are summed over the layers by ``expand``'s backward.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_unflatten

from xla_ckpt._api import hf as _hf
from xla_ckpt._api import scan as _scan
from xla_ckpt._api import scan_weights as _weights
from xla_ckpt._base import compat as _compat
from xla_ckpt._base.errors import CheckpointError
from xla_ckpt._record.autocast import autocast_state

__all__ = ["ScanStack", "ScanForward", "backward_hooked"]


def _same(a: Any, b: Any) -> bool:
    """The same per-call argument: tensors by identity, containers item by item, the rest by ``==``."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a is b or a == b)
    except Exception:  # noqa: BLE001  (an object without a usable ==: only identity counts)
        return False


class ScanStack:
    """One scanned decoder stack: its owner (``model.model``), its layers and the body's policy."""

    def __init__(self, owner: nn.Module, name: str, layers: list[nn.Module], policy: Any,
                 fallback: list[Any], weights: _weights.StackedWeights, group: int = 1) -> None:
        self.owner = owner
        self.weights = weights  # the layers' parameters, one stacked parameter per name
        self.group = group  # the repeating group's size: the body runs layers[:group], each repeat on its slices
        self.name = name  # "model.layers", for messages
        self.layers = layers
        self.policy = policy  # a per-op policy (everything_saveable for no checkpointing)
        self.fallback = fallback  # per layer: how it runs off XLA (a checkpointed forward or the plain one)
        # (input, per layer of the group its (args, kwargs), last index called)
        self.pending: Optional[tuple[Any, list[tuple[tuple, dict]], int]] = None
        self.in_body = False
        self.handles: list[Any] = []  # the owner's hooks (``hook``)
        self.bodies: dict[tuple, Any] = {}  # traced-once scan bodies, by _body_key
        self.cache = _hf.cache_plan(type(layers[0]).forward)

    # -- the owner's hooks -------------------------------------------------------------------------------------
    def hook(self) -> None:
        """Put the start and finish hooks (and the stacked weights' end of step) on the owner."""
        owner = self.owner
        self.handles = [owner.register_forward_pre_hook(self.start, with_kwargs=True),
                        owner.register_forward_hook(self.finish, with_kwargs=True),
                        owner.register_forward_hook(self.weights.end, always_call=True)]

    def unhook(self) -> None:
        """Remove what :meth:`hook` put on the owner."""
        for h in self.handles:
            h.remove()
        self.handles = []

    def start(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        self.pending = None
        self.weights.begin()
        cfg = getattr(module, "config", None)
        for flag in ("output_hidden_states", "output_attentions"):
            if kwargs.get(flag, getattr(cfg, flag, False)):
                raise CheckpointError(
                    f"xla_ckpt.apply(scan=True): {type(module).__name__} was called with {flag}=True; the scanned "
                    f"stack {self.name} runs as one loop, so per-layer hidden states and attention maps do not "
                    "exist. Call without it, or apply without scan.")

    def finish(self, module: nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
        if self.pending is not None:
            ran = self.pending[2] + 1
            self.pending = None
            raise CheckpointError(
                f"xla_ckpt.apply(scan=True): {type(module).__name__}'s forward called {ran} of the "
                f"{len(self.layers)} layers of {self.name}; the scan runs when the last layer is called, so the "
                "output would miss layers. Set config.num_hidden_layers to the number of layers, or apply without "
                "scan.")

    # -- the layers' calls -------------------------------------------------------------------------------------
    def call(self, index: int, args: tuple, kwargs: dict) -> Any:
        layer = self.layers[index]
        if self.in_body:  # the scan body itself, traced by torch_xla: the layer's own forward
            return type(layer).forward(layer, *args, **kwargs)
        if self.cache is not None:
            args, kwargs = self.cache.apply(layer, args, kwargs)
        if "hidden_states" in kwargs:
            kwargs = dict(kwargs)
            args = (kwargs.pop("hidden_states"), *args)
        h = args[0] if args else None
        if not self._scannable(layer, h, args, kwargs):
            if self.pending is not None:
                raise self._differs(index, "hidden_states", "is no longer an XLA tensor in training")
            return self.fallback[index](*args, **kwargs)
        rest = args[1:]
        if index == 0:
            hooked = backward_hooked(self.name, self.layers)
            if hooked is not None:
                raise CheckpointError(hooked)
            why = _scan.spmd_error("apply(scan=True)")
            if why is not None:
                raise CheckpointError(why)
            self.pending = (h, [(rest, kwargs)], 0)
        else:
            if self.pending is None or self.pending[2] != index - 1:
                raise CheckpointError(
                    f"xla_ckpt.apply(scan=True): {self.name}[{index}] was called without the layers before it in "
                    "the same forward; a scanned stack runs as a whole, from the owner's forward.")
            h0, calls, _ = self.pending
            if h is not h0:
                raise self._differs(index, "hidden_states", "is not the previous layer's output")
            if index < self.group:
                calls.append((rest, kwargs))
            else:  # the same arguments as the same layer of the first group
                j = index % self.group
                rest0, kwargs0 = calls[j]
                if not _same(rest, rest0):
                    raise self._differs(index, "the positional arguments", f"differ from layer {j}'s")
                for key in kwargs.keys() | kwargs0.keys():
                    if not _same(kwargs.get(key), kwargs0.get(key)):
                        raise self._differs(index, key, f"differs from layer {j}'s")
            self.pending = (h0, calls, index)
        if index < len(self.layers) - 1:
            return h
        assert self.pending is not None  # set above for every index
        h0, calls, _ = self.pending
        self.pending = None
        return self.run(h0, calls)

    def _scannable(self, layer: nn.Module, h: Any, args: tuple, kwargs: dict) -> bool:
        if not isinstance(h, torch.Tensor) or h.device.type != "xla" or _compat.is_compiling():
            return False
        # A KV cache still given (eval with grad, or no grad: generation) is written in place per layer;
        # GPT-2's block takes it positionally.
        if any(kwargs.get(n) is not None for n in _hf.CACHE_ARGS):
            return False
        return not any(i is not None and i < len(args) and args[i] is not None
                       for _, i in (self.cache.caches if self.cache is not None else ()))

    def _differs(self, index: int, what: str, how: str) -> CheckpointError:
        self.pending = None
        return CheckpointError(
            f"xla_ckpt.apply(scan=True): {self.name}[{index}]: {what} {how}; the scan passes one set of per-call "
            "arguments to every layer, so layers called differently (sliding and global attention layers, a "
            "changed mask or hidden state between layers) cannot be scanned. Apply without scan.")

    def run(self, h: torch.Tensor, calls: list[tuple[tuple, dict]]) -> torch.Tensor:
        """The whole stack as one torch_xla scan over the stacked parameters, one repeat of the group a step."""
        from torch_xla.experimental.scan import scan  # noqa: PLC0415

        layers, group = self.layers, self.group
        reps = len(layers) // group
        if layers[0].training:
            _scan._dropout_modules(layers)
            _attention_dropout(layers[:group])
        flat, spec = tree_flatten(calls)
        where = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor)]
        consts = [flat[i].expand(reps, *flat[i].shape) for i in where]
        params = self.weights.params()  # stacked between steps: the scan reads them in place
        per = [dict(m.named_buffers()) for m in layers]  # (few and small: stacked per step)
        buffers = {f"{j}.{k}": torch.stack([b[k] for b in per[j::group]]) for j in range(group) for k in per[j]}
        # Grad and autocast modes shape the trace too (an autocast turned on between steps would
        # otherwise reuse the fp32 body): part of the key.
        modes = (torch.is_grad_enabled(), tuple(autocast_state([h.device])))
        key = _body_key(flat, spec, (layers[0].training, tuple(_state_of(m) for m in layers[:group]), modes,
                                     tuple(t.requires_grad for t in [*params.values(), *buffers.values()])))
        body = self.bodies.get(key) if key is not None else None
        if body is None:
            body = self._body([None if isinstance(v, torch.Tensor) else v for v in flat], spec, where)
            if key is not None:
                self.bodies[key] = body
        # A cached body traces once per shapes: torch_xla then reuses its forward and backward graphs
        # (``is_fn_pure``); a new body (per-call values it cannot key) is traced on every call.
        out, _ = scan(body, h, (params, buffers, consts), partition_fn=_scan.partition_fn(self.policy),
                      is_fn_pure=key is not None)
        return out

    def _body(self, flat: list[Any], spec: Any, where: list[int]) -> Any:
        """The scan body: the group's layers in turn on one repeat's parameters and their per-call arguments."""
        templates = self.layers[:self.group]

        def body(carry: torch.Tensor, x: Any) -> tuple[torch.Tensor, None]:
            p, b, c = x
            vals = list(flat)
            for i, t in zip(where, c, strict=True):
                vals[i] = t
            calls = tree_unflatten(vals, spec)
            self.in_body = True
            try:
                with self.weights.in_body(p):  # the templates' stacked weights read this repeat's slices
                    for j, (template, (a, kw)) in enumerate(zip(templates, calls, strict=True)):
                        mine = {k[len(str(j)) + 1:]: t for k, t in b.items() if k.startswith(f"{j}.")}
                        carry = torch.func.functional_call(template, mine, (carry, *a), kw, strict=False)
                        if not isinstance(carry, torch.Tensor):
                            raise CheckpointError(
                                f"xla_ckpt.apply(scan=True): {type(template).__name__} returned "
                                f"{type(carry).__name__}, not the hidden states tensor; only layers that return a "
                                "tensor can be scanned. Apply without scan.")
            finally:
                self.in_body = False
            return carry, None

        return body


_PLAIN = (int, float, str, bool, type(None))


def _state_of(layer: nn.Module) -> tuple:
    """The layer's plain attributes (and its attention implementation): a change means a new trace."""
    out = []
    for name, m in layer.named_modules():
        out.append((name, tuple(sorted((k, v) for k, v in vars(m).items() if type(v) in _PLAIN))))
    cfg = next((m.config for m in layer.modules() if hasattr(m, "config")), None)  # self_attn, GPT-2's attn
    return (tuple(out), str(getattr(cfg, "_attn_implementation", None)))


def _body_key(flat: list[Any], spec: Any, state: tuple) -> Optional[tuple]:
    """What the traced body depends on besides shapes: the argument structure and the non-tensor values
    (only plain ones: an object of another type might change unseen, so such a call is not cached)."""
    vals = []
    for v in flat:
        if isinstance(v, torch.Tensor):
            vals.append(("tensor", v.requires_grad))
        elif type(v) in _PLAIN:
            vals.append((type(v).__name__, v))
        else:
            return None
    return (str(spec), tuple(vals), state)


def _attention_dropout(layers: list[nn.Module]) -> None:
    """Raise on attention dropout (HF attention modules: ``attention_dropout`` > 0, used in training)."""
    for i, layer in enumerate(layers):
        for name, m in layer.named_modules():
            p = getattr(m, "attention_dropout", None)
            if isinstance(p, float) and not isinstance(p, bool) and p > 0 and m.training:
                where = f"layers[{i}].{name}" if name else f"layers[{i}]"
                raise _scan._random_error(f"attention dropout: {where}.attention_dropout is {p} in training mode")


def backward_hooked(name: str, layers: list[nn.Module]) -> Optional[str]:
    """Why layers with a backward hook cannot be scanned (FSDPv2 wrapped around each layer adds one), or None."""
    for i, layer in enumerate(layers):
        for sub, m in layer.named_modules():
            if m._backward_hooks or m._backward_pre_hooks:
                where = f"{name}[{i}].{sub}" if sub else f"{name}[{i}]"
                return (f"xla_ckpt.apply(scan=True): {where} ({type(m).__name__}) has a backward hook "
                        "(SpmdFullyShardedDataParallel wrapped around each layer adds one: its optimization barrier); "
                        "a scan has no per-layer backward to run it on, and the hook wraps each layer's input and "
                        "output. Under FSDPv2 wrap the root model only (it shards every parameter), or apply "
                        "without scan.")
    return None


class ScanForward:
    """Instance-level ``forward`` of a scanned layer (see the module docstring)."""

    def __init__(self, stack: ScanStack, index: int) -> None:
        self.stack = stack
        self.index = index

    @property
    def __self__(self) -> nn.Module:
        return self.stack.layers[self.index]

    @property
    def __func__(self) -> Any:
        return type(self.__self__).forward

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.stack.call(self.index, args, kwargs)
