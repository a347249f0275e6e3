"""Which layers of a decoder stack one scan body can run: the stack's repeating group.

A scan runs one body per iteration. Layers that are all alike (Llama) make a group of one; layers
that alternate kinds (Gemma 2's sliding and global attention, ``config.layer_types``; Gemma 3's five
sliding to one global) make a group of one layer of each kind in turn, and the scan runs the group
``n / group`` times, each layer of the group its own configuration and per-call arguments (its mask).
A layer's kind: its class, parameter and buffer shapes, every submodule's class and plain attributes
(``layer_idx`` aside) and its ``config.layer_types`` entry. The group is the shortest that repeats
through the whole stack; a stack that repeats none (its kinds do not recur with a period dividing
the depth) is refused, naming the first attribute that differs.
"""

from __future__ import annotations

from typing import Any, Sequence

from torch import nn

from xla_ckpt._api import scan_weights as _weights

__all__ = ["find_stack", "group_size"]

# Per-layer attributes that may differ: the index (used for a KV cache, off under scan) and the mode.
_PER_LAYER = frozenset({"layer_idx", "training"})
# (owner attribute on the model, stack attribute on the owner): a causal LM and its base model, Llama-style
# (``model.layers``) and GPT-2-style (``transformer.h``).
_LAYOUTS = (("model", "layers"), ("", "layers"), ("transformer", "h"), ("", "h"))


def find_stack(model: nn.Module) -> tuple[str, nn.Module, nn.ModuleList]:
    """``(name, owner, layers)``: the decoder stack of an HF causal LM or base model, or a ``ValueError``."""
    for name, attr in _LAYOUTS:
        owner = getattr(model, name, None) if name else model
        if not isinstance(owner, nn.Module):
            continue
        layers = getattr(owner, attr, None)
        if isinstance(layers, nn.ModuleList) and len(layers) > 0:
            return (f"{name}.{attr}" if name else attr), owner, layers
    raise ValueError(
        f"xla_ckpt.apply(scan=True): {type(model).__name__} has no decoder stack at model.model.layers, "
        "model.layers, model.transformer.h or model.h (the layouts of Hugging Face's Llama, Mistral, Qwen2/Qwen3, "
        "Phi-3, Gemma and GPT-2); scan supports those. Apply without scan, or call xla_ckpt.scan_layers on your "
        "own stack of layer(x) modules.")


def _config_of(module: nn.Module) -> dict[str, Any]:
    """The plain configuration attributes of ``module`` (numbers, strings, flags, None, tuples of them)."""
    plain = (int, float, str, bool, type(None))
    out = {}
    for k, v in vars(module).items():
        if k.startswith("_") or k in _PER_LAYER:
            continue
        if isinstance(v, plain) or (isinstance(v, tuple) and all(isinstance(x, plain) for x in v)):
            out[k] = v
    return out


def _kind(layer: nn.Module, layer_type: Any) -> tuple:
    shapes = tuple((k, tuple(t.shape), t.dtype) for k, t in [*_weights.plain_parameters(layer), *layer.named_buffers()])
    subs = tuple((k, type(m), tuple(sorted(_config_of(m).items()))) for k, m in layer.named_modules())
    return (type(layer), layer_type, shapes, subs)


def group_size(model: nn.Module, name: str, layers: nn.ModuleList) -> int:
    """The size of the stack's shortest repeating group of layers, or a ``ValueError`` naming why none repeats."""
    types = getattr(getattr(model, "config", None), "layer_types", None)
    n = len(layers)
    if not isinstance(types, (list, tuple)) or len(types) < n:
        types = [None] * n
    kinds = [_kind(layer, types[i]) for i, layer in enumerate(layers)]
    for p in range(1, n + 1):
        if n % p == 0 and all(kinds[i] == kinds[i % p] for i in range(n)) and (p < n or n == 1):
            return p
    first = next(i for i in range(1, n) if kinds[i] != kinds[0])
    why = (f"config.layer_types[{first}] is {types[first]!r}, [0]'s {types[0]!r}" if types[first] != types[0]
           else _difference(name, layers, first))
    pattern = f"config.layer_types {_runs(types)}; " if types[0] is not None else ""
    raise ValueError(
        f"xla_ckpt.apply(scan=True): {name}: its {n} layers repeat no group of layers ({pattern}{why}). A scan runs "
        "one body, one layer or a group of layers in turn (e.g. [sliding, full] x 4), once per repeat. Apply "
        "without scan.")


def _runs(types: Sequence[Any]) -> str:
    out: list[list[Any]] = []
    for t in types:
        if out and out[-1][0] == t:
            out[-1][1] += 1
        else:
            out.append([t, 1])
    return "[" + ", ".join(f"{t} x{k}" if k > 1 else str(t) for t, k in out) + "]"


def _difference(name: str, layers: nn.ModuleList, i: int) -> str:
    """What makes ``layers[i]`` another kind of layer than ``layers[0]``, named."""
    first, layer = layers[0], layers[i]
    if type(layer) is not type(first):
        return f"{name}[{i}] is {type(layer).__name__}, {name}[0] is {type(first).__name__}"
    shapes0 = {k: (tuple(t.shape), t.dtype) for k, t in [*_weights.plain_parameters(first), *first.named_buffers()]}
    shapes = {k: (tuple(t.shape), t.dtype) for k, t in [*_weights.plain_parameters(layer), *layer.named_buffers()]}
    if shapes != shapes0:
        diff = sorted(set(shapes.items()) ^ set(shapes0.items()))[0][0]
        return f"{name}[{i}].{diff} differs from {name}[0]'s (name, shape or dtype)"
    subs0 = {k: (type(m), _config_of(m)) for k, m in first.named_modules()}
    for k, m in layer.named_modules():
        kind, conf = subs0.get(k, (None, None))
        where = f"{name}[{i}].{k}" if k else f"{name}[{i}]"
        if kind is not type(m) or conf is None:  # conf is None only where kind is
            return f"{where} is {type(m).__name__}, not as in {name}[0]"
        mine = _config_of(m)
        for attr in sorted(mine.keys() | conf.keys()):
            if mine.get(attr) != conf.get(attr):
                return f"{where}.{attr} is {mine.get(attr)!r}, {name}[0]'s is {conf.get(attr)!r}"
    return f"{name}[{i}] differs from {name}[0]"
