"""``apply(model, config)``: checkpoint the modules a config selects, and switch the library features."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from torch import nn

from xla_ckpt._api import hf as _hf
from xla_ckpt._api.by_reference import hook_by_reference
from xla_ckpt._api.blocks import find_blocks, why_no_blocks
from xla_ckpt._api.config import Config, Rule, glob_regex
from xla_ckpt._api.config_load import as_config
from xla_ckpt._hooks.linear import patch_linear
from xla_ckpt._api.wrap import checkpoint_policy, checkpointed

__all__ = ["apply", "ApplyReport", "Wrapped"]


@dataclass(frozen=True)
class Wrapped:
    """One module wrapped by :func:`apply`."""

    name: str
    cls: str
    policy: str
    rule: int


@dataclass
class ApplyReport:
    """What :func:`apply` did: wrapped modules, rules that matched nothing, switches."""

    wrapped: list[Wrapped] = field(default_factory=list)
    unmatched_rules: list[str] = field(default_factory=list)
    nested_skipped: list[str] = field(default_factory=list)
    patch_linear: bool = False
    weights_by_reference: bool = False
    source: str = ""

    def __str__(self) -> str:
        lines = [f"plan from {self.source}: {len(self.wrapped)} modules checkpointed"]
        lines += [f"  {w.name or '<root>':32s} {w.cls:24s} {w.policy}   (rule {w.rule})" for w in self.wrapped]
        lines += [f"  WARNING rule matched nothing: {r}" for r in self.unmatched_rules]
        lines += [f"  skipped (inside a checkpointed module): {n}" for n in self.nested_skipped]
        lines.append(f"  patch_linear={self.patch_linear} weights_by_reference={self.weights_by_reference}")
        return "\n".join(lines)


def _matches(rule: Rule, name: str, module: nn.Module, blocks: frozenset[str]) -> bool:
    if rule.blocks and name not in blocks:
        return False
    if rule.match and not any(glob_regex(g).match(name) for g in rule.match):
        return False
    return not rule.classes or type(module).__name__ in rule.classes


def apply(model: nn.Module, config: Union[Config, Mapping[str, Any], str, os.PathLike[str]]) -> ApplyReport:
    """Checkpoint the modules of ``model`` that ``config`` selects; returns what was done.

    Args:
        model: the root module; rules match fully qualified names below it ("" is the root).
        config: a ``Config``, a dict, a preset name (``xla_ckpt.presets()``) or a ``.toml`` / ``.yaml`` /
            ``.json`` path.

    Rules apply in order; a later rule overrides earlier ones for the modules it selects
    (``enabled = false`` leaves them unwrapped). ``every = n`` keeps every n-th module the rule
    matches; ``blocks = true`` selects the transformer blocks (:func:`xla_ckpt.find_blocks`). A rule
    that matches nothing is reported and warned about. Everything is validated before the model is
    changed. Hugging Face's own gradient checkpointing, if on, is turned off with a warning (one
    checkpoint per module), and checkpointed modules run without a KV cache in training.
    ``model.forward``'s signature is kept (HF ``Trainer`` filters dataset columns by it).

    Example:
        >>> report = xla_ckpt.apply(model, "megatron_selective")
        >>> print(report)
    """
    cfg = as_config(config)
    named = list(model.named_modules(remove_duplicate=True))
    plan: dict[str, tuple[nn.Module, int]] = {}
    report = ApplyReport(source=cfg.source, patch_linear=cfg.patch_linear,
                         weights_by_reference=cfg.weights_by_reference)
    blocks = frozenset(find_blocks(model)) if any(r.blocks for r in cfg.checkpoint) else frozenset()
    for i, rule in enumerate(cfg.checkpoint):
        matched = [(n, m) for n, m in named if _matches(rule, n, m, blocks)]
        if not matched:
            report.unmatched_rules.append(f"{cfg.source}: checkpoint[{i}] ({rule.describe()})")
        for n, m in matched[:: rule.every]:
            if rule.enabled:
                plan[n] = (m, i)
            else:
                plan.pop(n, None)
    selected = sorted(plan)
    built = {i: cfg.checkpoint[i].policy.build() for i in {i for _, i in plan.values()}}
    final: list[tuple[str, nn.Module, int]] = []
    for n in selected:
        if any(n.startswith(p + ".") or p == "" for p in selected if p != n):
            report.nested_skipped.append(n)
            continue
        m, i = plan[n]
        current = checkpoint_policy(m)
        if current is not None and current != built[i]:
            raise ValueError(
                f"{cfg.source}: checkpoint[{i}]: module '{n}' is already checkpointed with {current!r}; "
                "call xla_ckpt.uncheckpointed on it first"
            )
        final.append((n, m, i))
    # Validated: now change the model.
    _hf.turn_off_hf_checkpointing(model, "apply")
    if cfg.patch_linear:
        patch_linear(model)
    for n, m, i in final:
        checkpointed(m, policy=built[i], verify=cfg.verify)
        report.wrapped.append(Wrapped(n, type(m).__name__, str(cfg.checkpoint[i].policy), i))
    if cfg.weights_by_reference:
        # Hooks, not a replaced forward: FSDP wrappers accept the module (issue 31).
        hook_by_reference(model)
    why = f" {why_no_blocks(model)}" if any(r.blocks for r in cfg.checkpoint) and not blocks else ""
    for r in report.unmatched_rules:
        warnings.warn(f"xla_ckpt.apply: rule matched no module: {r}.{why if '(blocks' in r else ''}", UserWarning,
                      stacklevel=2)
    return report
