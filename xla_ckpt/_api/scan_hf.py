"""``apply(..., scan=True)``: find a Hugging Face decoder stack, check its layers can be scanned, install.

Found: ``model.model.layers`` (a causal LM: Llama, Mistral, Qwen2/Qwen3, Phi-3, Gemma) or
``model.layers`` (the base model); GPT-2-style ``model.transformer.h`` or ``model.h``. Scanned: layers of
one class whose parameters, buffers and configuration attributes are equal (``layer_idx`` aside); where they
differ (Gemma 2/3's sliding and global layers, ``config.layer_types`` not all equal) the error names the
attribute. Everything is checked before the model changes; the call-time side is :mod:`xla_ckpt._api.scan_stack`.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

from torch import nn

from xla_ckpt._api.scan_stack import ScanForward, ScanStack, backward_hooked

__all__ = ["find_stack", "check_scannable", "install", "uninstall", "scanned_stack"]

_STACK = "_xla_ckpt_scan_stack"
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


def check_scannable(model: nn.Module, name: str, layers: nn.ModuleList) -> None:
    """Raise a ``ValueError`` naming why the layers of ``name`` cannot run as one scan body."""
    cfg = getattr(model, "config", None)
    types = getattr(cfg, "layer_types", None)
    if isinstance(types, (list, tuple)) and len(set(types)) > 1:
        raise ValueError(
            f"xla_ckpt.apply(scan=True): {name}: config.layer_types is not all equal ({sorted(set(types))}, e.g. "
            "Gemma's sliding-window and global attention layers): each kind gets its own mask, and one scan body "
            "runs one kind. Apply without scan.")
    first = layers[0]
    shapes0 = {k: (tuple(t.shape), t.dtype) for k, t in [*first.named_parameters(), *first.named_buffers()]}
    subs0 = {k: (type(m), _config_of(m)) for k, m in first.named_modules()}
    for i, layer in enumerate(layers):
        if type(layer) is not type(first):
            raise ValueError(f"xla_ckpt.apply(scan=True): {name}[{i}] is {type(layer).__name__}, {name}[0] is "
                             f"{type(first).__name__}; a scan runs one layer class. Apply without scan.")
        shapes = {k: (tuple(t.shape), t.dtype) for k, t in [*layer.named_parameters(), *layer.named_buffers()]}
        if shapes != shapes0:
            diff = sorted(set(shapes.items()) ^ set(shapes0.items()))[0][0]
            raise ValueError(f"xla_ckpt.apply(scan=True): {name}[{i}].{diff} differs from {name}[0]'s (name, shape "
                             "or dtype); scanned layers stack their parameters. Apply without scan.")
        for k, m in layer.named_modules():
            kind, conf = subs0.get(k, (None, None))
            where = f"{name}[{i}].{k}" if k else f"{name}[{i}]"
            if kind is not type(m) or conf is None:  # conf is None only where kind is
                raise ValueError(f"xla_ckpt.apply(scan=True): {where} is {type(m).__name__}, not as in {name}[0]; "
                                 "a scan runs one layer structure. Apply without scan.")
            mine = _config_of(m)
            for attr in sorted(mine.keys() | conf.keys()):
                if mine.get(attr) != conf.get(attr):
                    raise ValueError(
                        f"xla_ckpt.apply(scan=True): {where}.{attr} is {mine.get(attr)!r}, {name}[0]'s is "
                        f"{conf.get(attr)!r} (e.g. sliding-window and global attention layers); one scan body runs "
                        "one configuration. Apply without scan.")


def install(model: nn.Module, name: str, owner: nn.Module, layers: nn.ModuleList, policy: Any,
            fallback: list[Any]) -> ScanStack:
    """Give each layer its scanned ``forward`` and the owner its start/finish hooks; returns the stack."""
    stack = ScanStack(owner, name, list(layers), policy, fallback)
    for i, layer in enumerate(layers):
        layer.forward = ScanForward(stack, i)
    stack.handles = [owner.register_forward_pre_hook(stack.start, with_kwargs=True),
                     owner.register_forward_hook(stack.finish, with_kwargs=True)]
    model.__dict__[_STACK] = stack
    return stack


def uninstall(model: nn.Module) -> None:
    """Undo :func:`install` (nothing when the model has no scanned stack)."""
    stack = model.__dict__.pop(_STACK, None)
    if not isinstance(stack, ScanStack):
        return
    for h in getattr(stack, "handles", ()):
        h.remove()
    for layer in stack.layers:
        if isinstance(layer.__dict__.get("forward"), ScanForward):
            del layer.forward


def scanned_stack(model: nn.Module) -> Optional[ScanStack]:
    """The :class:`ScanStack` an ``apply(scan=True)`` installed on ``model``, or None."""
    stack = model.__dict__.get(_STACK)
    return stack if isinstance(stack, ScanStack) else None


def plain(layer: nn.Module) -> Any:
    """How a layer runs off XLA under no checkpointing: its class's forward."""
    return functools.partial(type(layer).forward, layer)


def plan_scan(model: nn.Module, cfg: Any, final: list[tuple[str, nn.Module, int]], built: dict[int, Any],
              owned: dict[int, nn.Module]) -> tuple[Any, list[tuple[str, nn.Module, int]], str]:
    """Validate ``scan = true`` for ``model`` before anything changes.

    Returns ``(install_args, final_without_the_layers, description)``: the stack's layers leave the
    modules that :func:`xla_ckpt.apply` wraps; the rule that selected them (all of them, one rule)
    gives the scan body's policy, none selected means no checkpointing (everything saved).
    """
    from xla_ckpt._api import scan as _scan  # noqa: PLC0415
    from xla_ckpt._api.config import ConfigError  # noqa: PLC0415
    from xla_ckpt._api.wrap import _CheckpointedForward, checkpoint_policy  # noqa: PLC0415

    def fail(msg: str) -> ConfigError:
        return ConfigError(f"{cfg.source}: scan: {msg}")

    if cfg.patch_linear or cfg.weights_by_reference:
        raise fail("scan = true cannot be combined with patch_linear or weights_by_reference (their hooks and "
                   "custom autograd functions do not run inside torch_xla's traced scan body); use a preset "
                   "without them (megatron_selective instead of fsdp_xla).")
    why = _scan.spmd_error("apply(scan=True)")
    if why is not None:
        raise fail(why)
    try:
        name, owner, layers = find_stack(model)
        check_scannable(model, name, layers)
    except ValueError as e:
        raise fail(str(e)) from None
    hooked = backward_hooked(name, list(layers))
    if hooked is not None:
        raise fail(hooked)
    names = [f"{name}.{i}" for i in range(len(layers))]
    index = {n: i for i, n in enumerate(names)}
    rules: dict[int, int] = {}
    rest = []
    for n, m, i in final:
        if n in index:
            rules[index[n]] = i
            continue
        if any(n.startswith(ln + ".") for ln in names):
            raise fail(f"module '{n}' inside a scanned layer is selected by checkpoint[{i}]; the scan body is "
                       "marked op by op by the layers' policy, so select the layers themselves (blocks = true).")
        if n == "" or name.startswith(n + "."):
            raise fail(f"module '{n or '<root>'}' around the scanned stack {name} is selected by checkpoint[{i}]; "
                       "select the layers themselves (blocks = true).")
        rest.append((n, m, i))
    if rules and (len(rules) != len(layers) or len(set(rules.values())) > 1):
        chosen = ", ".join(f"{names[j]}: checkpoint[{r}]" for j, r in sorted(rules.items()))
        raise fail(f"the layers of {name} are checkpointed unevenly ({chosen} of {len(layers)} layers); one scan "
                   "body runs every layer, so one rule must select all of them (no 'every', no overrides).")
    for j, layer in enumerate(layers):
        current = None if id(layer) in owned else checkpoint_policy(layer)
        if current is not None:
            raise fail(f"{names[j]} is wrapped with checkpointed({current!r}); call xla_ckpt.uncheckpointed on it.")
    rule = next(iter(rules.values())) if rules else None
    policy = built[rule] if rule is not None else "everything_saveable"
    try:
        _scan._per_op(policy)
    except (TypeError, ValueError) as e:
        raise fail(str(e).replace("scan_layers", "apply(scan=True)")) from None
    fallback = [(_CheckpointedForward(layer, policy, None, cfg.verify) if rule is not None else plain(layer))
                for layer in layers]
    shown = str(cfg.checkpoint[rule].policy) if rule is not None else "none (everything_saveable)"
    what = f"{name}: {len(layers)} {type(layers[0]).__name__} as one scan, body policy {shown}"
    return (name, owner, layers, policy, fallback), rest, what
