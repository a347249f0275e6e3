"""``apply(..., scan=True)``: find a Hugging Face decoder stack, check its layers can be scanned, install.

Found: ``model.model.layers`` (a causal LM: Llama, Mistral, Qwen2/Qwen3, Phi-3, Gemma) or
``model.layers`` (the base model); GPT-2-style ``model.transformer.h`` or ``model.h``. Scanned: the
stack's repeating group of layers (one layer where all are alike; Gemma 2's sliding and global pair),
found by :mod:`xla_ckpt._api.scan_pattern`; its weights are stacked by :mod:`xla_ckpt._api.scan_weights`.
Everything is checked before the model changes; the call-time side is :mod:`xla_ckpt._api.scan_stack`.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

from torch import nn

from xla_ckpt._api import scan_weights as _weights
from xla_ckpt._api.scan_pattern import find_stack, group_size
from xla_ckpt._api.scan_stack import ScanForward, ScanStack, backward_hooked

__all__ = ["find_stack", "group_size", "install", "uninstall", "scanned_stack", "plain_grads"]

_STACK = "_xla_ckpt_scan_stack"
_KEPT = "_xla_ckpt_scan_weights"  # stacked weights an apply that scans again keeps (no unstack + restack)


def install(model: nn.Module, name: str, owner: nn.Module, layers: nn.ModuleList, policy: Any,
            fallback: list[Any], group: int = 1) -> ScanStack:
    """Stack the layers' weights, give each layer its scanned ``forward`` and the owner its start/finish hooks."""
    kept = model.__dict__.pop(_KEPT, None)
    same = isinstance(kept, _weights.StackedWeights) and kept.layers == list(layers) and kept.group == group
    weights = kept if same else None
    if weights is None:
        if isinstance(kept, _weights.StackedWeights):
            _weights.unstack(kept)
        weights = _weights.stack(list(layers), group)
    stack = ScanStack(owner, name, list(layers), policy, fallback, weights, group)
    for i, layer in enumerate(layers):
        layer.forward = ScanForward(stack, i)
    stack.hook()
    model.__dict__[_STACK] = stack
    return stack


def uninstall(model: nn.Module, keep_weights: bool = False) -> None:
    """Undo :func:`install` (nothing when the model has no scanned stack).

    ``keep_weights``: an :func:`install` follows at once (apply scanning again), which takes the stacked
    weights as they are: the parameters an optimizer holds stay the model's.
    """
    stack = model.__dict__.pop(_STACK, None)
    if not isinstance(stack, ScanStack):
        return
    stack.unhook()
    for layer in stack.layers:
        if isinstance(layer.__dict__.get("forward"), ScanForward):
            del layer.forward
    if keep_weights:
        model.__dict__[_KEPT] = stack.weights
    else:
        _weights.unstack(stack.weights)


def scanned_stack(model: nn.Module) -> Optional[ScanStack]:
    """The :class:`ScanStack` an ``apply(scan=True)`` installed on ``model``, or None."""
    stack = model.__dict__.get(_STACK)
    return stack if isinstance(stack, ScanStack) else None


def plain_grads(model: nn.Module) -> dict[str, Any]:
    """Every parameter's grad by its plain name, as ``named_parameters()`` would give it without scan.

    A scanned stack's stacked parameter (``model.layers.0.mlp.up_proj.weight``, ``[n, ...]``) gives one
    grad per layer (``model.layers.{i}.mlp.up_proj.weight``: a slice of its grad, or None).

    Example:
        >>> norms = {k: g.norm() for k, g in plain_grads(model).items() if g is not None}
    """
    stack = scanned_stack(model)
    if stack is None:
        return {k: p.grad for k, p in model.named_parameters()}
    weights = stack.weights
    stacked = weights.params()  # name in the stack ("1.mlp.up_proj.weight") -> stacked parameter
    ids = {id(p) for p in stacked.values()}
    out: dict[str, Any] = {}
    done = False
    for k, p in model.named_parameters():
        if id(p) not in ids:
            out[k] = p.grad
        elif not done:  # the stack where its first parameter is, layer by layer: the plain order
            done = True
            for i in range(len(stack.layers)):
                j = i % weights.group
                for key, t in stacked.items():
                    if key.startswith(f"{j}."):
                        g = t.grad
                        out[f"{stack.name}.{i}.{key[len(str(j)) + 1:]}"] = None if g is None else g[i // weights.group]
    return out


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
        group = group_size(model, name, layers)
    except ValueError as e:
        raise fail(str(e)) from None
    hooked = backward_hooked(name, list(layers)) or _weights.why_not_stackable(model, name, list(layers), group)
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
    what = f"{name}: {len(layers)} {type(layers[0]).__name__} as one scan"
    if group > 1:
        what += f" of {len(layers) // group} groups of {group} (config.layer_types repeating)"
    return (name, owner, layers, policy, fallback, group), rest, f"{what}, body policy {shown}"
