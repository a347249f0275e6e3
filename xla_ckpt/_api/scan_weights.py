"""A scanned stack's weights kept stacked: one ``Parameter`` per weight name, the layers reading slices.

torch_xla's scan takes each weight as one tensor of all layers (``[n, *shape]``). Stacking the
layers' own parameters on every step would copy the stack's weights and hand their grads back
stacked, then split (one more copy); kept stacked between steps, the scan reads them in place and
writes their grads in one piece, and the optimizer steps the stacked tensors.

The model still looks like the plain one:

- ``named_parameters()`` / ``parameters()`` give one stacked parameter per weight name, registered
  where layer 0's was and under its name (``model.layers.0.mlp.up_proj.weight``, shape
  ``[n, ...]``; for a repeating group of layers, one per place in the group, stacked over the
  repeats, at the first repeat's names): name-based optimizer groups (weight decay off for norms
  and biases) split it as they split every layer's, and elementwise optimizers (SGD, Adam, AdamW)
  step it as they step each.
- ``state_dict()`` gives the plain keys, each a slice of its stacked parameter, in the plain order;
  ``load_state_dict`` of a plain state dict copies each value into its slice.
- ``layer.mlp.up_proj.weight`` reads that layer's slice (a view): a layer run alone (off XLA,
  generation with a KV cache) computes what it did.

Each module that had a stacked weight gets a subclass of its own class (same name) whose
attribute for that weight is a property, and whose state-dict methods present the plain tensors.

Example:
    >>> weights = stack(list(model.model.layers))   # what apply(model, preset, scan=True) does
    >>> model.model.layers[3].mlp.up_proj.weight     # layer 3's slice of the stacked parameter
    >>> unstack(weights)                             # every layer its own parameters again
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import torch
from torch import nn

from xla_ckpt._base import compat as _compat
from xla_ckpt._base.errors import CheckpointError

__all__ = ["StackedWeights", "stack", "unstack", "stacked_of", "plain_parameters", "why_not_stackable"]

_SLOT = "_xla_ckpt_stacked"
_CLASSES: dict[tuple[type, frozenset[str]], type] = {}


class _Slot:
    """What a module of a layer reads its stacked weights from (``index``: the layer's repeat of the group)."""

    def __init__(self, weights: "StackedWeights", index: int, paths: dict[str, str], order: list[str]) -> None:
        self.weights = weights
        self.index = index
        self.paths = paths  # attribute ("weight") -> name in the stack ("0.mlp.up_proj.weight")
        self.order = order  # the module's parameter names as registered before stacking


class StackedWeights:
    """The stacked parameters of ``layers`` and where each layer's modules read them."""

    def __init__(self, layers: list[nn.Module], holders: dict[str, tuple[nn.Module, str]], group: int) -> None:
        self.layers = layers
        self.group = group  # layers in the repeating group: a stacked parameter has len(layers) // group slices
        # name in the stack ("0.mlp.up_proj.weight") -> (the module of the group's first repeat that registers
        # the stacked parameter, attribute)
        self.holders = holders
        self.body: Optional[dict[str, torch.Tensor]] = None  # the slices torch_xla's scan body runs layer 0 on
        self.unbound: Optional[dict[str, tuple]] = None  # one forward's slices (unbind: one grad, not n)

    def stacked(self, key: str) -> torch.Tensor:
        module, attr = self.holders[key]
        return module._parameters[attr]  # type: ignore[return-value]

    def params(self) -> dict[str, torch.Tensor]:
        """The stacked parameters by name in the stack (``"0.mlp.up_proj.weight"``): the scan's inputs, no copy."""
        return {key: self.stacked(key) for key in self.holders}

    def read(self, key: str, index: int) -> torch.Tensor:
        if self.body is not None:  # inside the traced scan body (the group's first layers as templates)
            return self.body[key]
        t = self.stacked(key)
        got = self.unbound.get(key) if self.unbound is not None else None
        if got is not None and got[0] is t and got[1] == t._version and got[2] == torch.is_grad_enabled():
            return got[3][index]
        return t[index]

    @contextlib.contextmanager
    def in_body(self, slices: dict[str, torch.Tensor]) -> Iterator[None]:
        self.body = slices
        try:
            yield
        finally:
            self.body = None

    def begin(self) -> None:
        """A forward of the stack's owner starts: layers run one by one read one ``unbind`` per weight
        (its backward stacks the grads once; a ``select`` per layer would add ``n`` full-size grads)."""
        self.unbound = None
        params = self.params()
        # Not on XLA: there the scan reads the stacked weights (these would be dead graph nodes, host time
        # on every step), and a layer run alone traces selects that XLA fuses.
        if _compat.is_compiling() or any(t.device.type == "xla" for t in params.values()):
            return
        grad = torch.is_grad_enabled()
        self.unbound = {key: (t, t._version, grad, t.unbind(0)) for key, t in params.items()}

    def end(self, *_: Any, **__: Any) -> None:
        self.unbound = None


def stacked_of(module: nn.Module) -> Optional[StackedWeights]:
    slot = module.__dict__.get(_SLOT)
    return slot.weights if isinstance(slot, _Slot) else None


def plain_parameters(layer: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``layer.named_parameters()`` as the plain layer had them (a stacked layer: its slices)."""
    out = []
    for prefix, m in layer.named_modules():
        slot = m.__dict__.get(_SLOT)
        names = slot.order if isinstance(slot, _Slot) else list(m._parameters)
        for n in names:
            p = getattr(m, n) if isinstance(slot, _Slot) and n in slot.paths else m._parameters.get(n)
            if p is not None:
                out.append((f"{prefix}.{n}" if prefix else n, p))
    return out


def why_not_stackable(model: nn.Module, name: str, layers: list[nn.Module], group: int = 1) -> Optional[str]:
    """Why the layers' parameters cannot become one stacked parameter per name, or None."""
    if stacked_of(layers[0]) is not None or any(stacked_of(m) is not None for m in layers[0].modules()):
        return None  # stacked by an earlier apply: kept
    uses: dict[int, int] = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        uses[id(p)] = uses.get(id(p), 0) + 1
    firsts = [dict(layer.named_parameters(remove_duplicate=False)) for layer in layers[:group]]
    for i, layer in enumerate(layers):
        first = firsts[i % group]
        for k, p in layer.named_parameters(remove_duplicate=False):
            where = f"{name}[{i}].{k}"
            if uses.get(id(p), 0) > 1:
                return (f"xla_ckpt.apply(scan=True): {where} is the same Parameter as another of the model's (tied "
                        "weights); a scanned stack keeps one stacked parameter per weight name, which would untie "
                        "them. Apply without scan.")
            if p.requires_grad != first[k].requires_grad:
                return (f"xla_ckpt.apply(scan=True): {where}.requires_grad is {p.requires_grad}, "
                        f"{name}[{i % group}]'s is {first[k].requires_grad}; a scanned stack trains every layer's "
                        "copy of a weight or none. Freeze whole weight names, or apply without scan.")
            if p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None):
                return (f"xla_ckpt.apply(scan=True): {where} has a gradient hook (register_hook or "
                        "register_post_accumulate_grad_hook); a scanned stack replaces the layers' parameters by "
                        "stacked ones, so the hook would never run. Remove it, or apply without scan.")
    return None


def _stacked_class(cls: type, attrs: frozenset[str]) -> type:
    key = (cls, attrs)
    if key not in _CLASSES:
        ns: dict[str, Any] = {attr: property(_getter(attr)) for attr in sorted(attrs)}
        ns.update(_save_to_state_dict=_save, _load_from_state_dict=_load, __reduce_ex__=_reduce, _xla_ckpt_plain=cls,
                  _xla_ckpt_attrs=attrs, __module__=cls.__module__, __qualname__=cls.__qualname__)
        _CLASSES[key] = type(cls.__name__, (cls,), ns)
    return _CLASSES[key]


def _reduce(self: nn.Module, protocol: int) -> tuple:
    # Pickled (torch.save of the model, deepcopy) as its plain class and stacked attributes: the subclass
    # is made at run time, so no module attribute names it.
    cls = type(self)
    return (_new, (cls._xla_ckpt_plain, cls._xla_ckpt_attrs), self.__dict__)  # type: ignore[attr-defined]


def _new(plain: type, attrs: frozenset[str]) -> nn.Module:
    return object.__new__(_stacked_class(plain, attrs))


def _getter(attr: str) -> Any:
    def get(self: nn.Module) -> torch.Tensor:
        slot = self.__dict__[_SLOT]
        return slot.weights.read(slot.paths[attr], slot.index)

    return get


@contextlib.contextmanager
def _plain_view(module: nn.Module) -> Iterator[None]:
    """``module._parameters`` as before stacking (its slices in their places) for torch's state-dict code."""
    slot: _Slot = module.__dict__[_SLOT]
    own = module.__dict__["_parameters"]
    view: dict[str, Any] = {}
    for n in slot.order:
        view[n] = slot.weights.stacked(slot.paths[n])[slot.index] if n in slot.paths else own.get(n)
    view.update((n, p) for n, p in own.items() if n not in view)
    module.__dict__["_parameters"] = view
    try:
        yield
    finally:
        module.__dict__["_parameters"] = own


def _save(self: nn.Module, destination: Any, prefix: str, keep_vars: bool) -> None:
    with _plain_view(self):
        type(self)._xla_ckpt_plain._save_to_state_dict(self, destination, prefix, keep_vars)  # type: ignore[attr-defined]


def _load(self: nn.Module, state_dict: Any, prefix: str, local_metadata: dict, strict: bool, missing_keys: list,
          unexpected_keys: list, error_msgs: list) -> None:
    if local_metadata.get("assign_to_params_buffers", False):
        raise CheckpointError(
            f"xla_ckpt.apply(scan=True): load_state_dict(assign=True) at '{prefix.rstrip('.')}': assign replaces "
            "parameter objects, and a scanned stack keeps one stacked parameter per weight name (the layers read "
            "slices of it). Load with assign=False (values are copied into the slices), or apply without scan.")
    with _plain_view(self), torch.no_grad():
        type(self)._xla_ckpt_plain._load_from_state_dict(  # type: ignore[attr-defined]
            self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)


def stack(layers: list[nn.Module], group: int = 1) -> StackedWeights:
    """Replace the layers' parameters by one stacked parameter per name and place in the repeating group of
    ``group`` layers (stacked over the repeats; checked by :func:`why_not_stackable`)."""
    from xla_ckpt._base import xla as _xla  # noqa: PLC0415

    mods = [dict(layer.named_modules()) for layer in layers]
    positions = [[k for k, _ in layers[j].named_parameters()] for j in range(group)]
    holders: dict[str, tuple[nn.Module, str]] = {}
    new: dict[str, nn.Parameter] = {}
    for j, paths in enumerate(positions):
        for path in paths:
            mod, _, attr = path.rpartition(".")
            ps = [m[mod]._parameters[attr] for m in mods[j::group]]
            with torch.no_grad():
                p = nn.Parameter(torch.stack([q.detach() for q in ps]), requires_grad=ps[0].requires_grad)
                if any(q.grad is not None for q in ps):  # grads accumulated before apply are kept
                    p.grad = torch.stack([q.grad if q.grad is not None else torch.zeros_like(q) for q in ps])
            holders[f"{j}.{path}"] = (mods[j][mod], attr)  # named as in the stack: "1.mlp.up_proj.weight"
            new[f"{j}.{path}"] = p
    if any(_xla.is_xla(p) for p in new.values()):
        # Computed now, not inside the first step's program (which would hold both copies at once).
        _xla.materialize([t for p in new.values() for t in (p, p.grad) if t is not None])
    weights = StackedWeights(list(layers), holders, group)
    for i, m in enumerate(mods):
        j, rep = i % group, i // group
        for mod in dict.fromkeys(path.rpartition(".")[0] for path in positions[j]):
            module = m[mod]
            attrs = {path.rpartition(".")[2]: f"{j}.{path}" for path in positions[j] if path.rpartition(".")[0] == mod}
            module.__dict__[_SLOT] = _Slot(weights, rep, attrs, list(module._parameters))
            for attr, key in attrs.items():
                if rep == 0:
                    module._parameters[attr] = new[key]  # same key: named_parameters keeps the plain order
                else:
                    del module._parameters[attr]
            module.__class__ = _stacked_class(type(module), frozenset(attrs))
    return weights


def unstack(weights: StackedWeights) -> None:
    """Give every layer its own parameters again (copies of its slices; the stacked ones are dropped)."""
    stacked = weights.params()  # before layer 0's modules give theirs up
    for layer in weights.layers:
        for module in layer.modules():
            slot = module.__dict__.get(_SLOT)
            if not isinstance(slot, _Slot) or slot.weights is not weights:
                continue
            own = module._parameters
            plain: dict[str, Any] = {}
            for n in [*slot.order, *(k for k in own if k not in slot.order)]:
                if n not in slot.paths:
                    plain[n] = own.get(n)
                    continue
                t = stacked[slot.paths[n]]
                with torch.no_grad():
                    p = nn.Parameter(t[slot.index].clone(), requires_grad=t.requires_grad)
                    if t.grad is not None:
                        p.grad = t.grad[slot.index].clone()
                plain[n] = p
            module.__class__ = type(module)._xla_ckpt_plain  # type: ignore[attr-defined]
            del module.__dict__[_SLOT]
            module.__dict__["_parameters"] = plain
