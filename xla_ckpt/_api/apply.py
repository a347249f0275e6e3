"""``apply(model, config)``: checkpoint the modules a config selects, and switch the library features."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from torch import nn

from xla_ckpt._api import hf as _hf
from xla_ckpt._api.by_reference import by_reference_hooked, hook_by_reference, unhook_by_reference
from xla_ckpt._api.blocks import blocks_and_left_out, blocks_not_every_n, why_no_blocks
from xla_ckpt._api.config import Config, Rule, glob_regex
from xla_ckpt._api.forms import ACCEPTED, as_config
from xla_ckpt._api import scan_hf as _scan_hf
from xla_ckpt._api.hf_roles import tag_roles
from xla_ckpt._api.outside import correct_outside, uncorrect_outside
from xla_ckpt._ops.linear import patch_linear, unpatch_linear
from xla_ckpt._api.wrap import _CheckpointedForward, checkpoint_policy, checkpointed, uncheckpointed
from xla_ckpt._base.errors import refuse_torchscript
from xla_ckpt._base.warn import warn_once
from xla_ckpt._record.opcall import Policy

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
    """What :func:`apply` did: wrapped modules, rules that matched nothing, switches.

    ``blocks_left_out``: what ``blocks = true`` left out, each with why (:func:`xla_ckpt.find_blocks`);
    ``own_checkpointing_off``: the modules whose own checkpointing flag (Hugging Face's or diffusers'
    ``gradient_checkpointing``, timm's ``grad_checkpointing``) apply turned off; ``scanned``: the
    decoder stack that runs as one scan (``scan = true``), described, or "";
    ``corrected_outside``: the ``nn.Linear`` / ``nn.LayerNorm`` modules outside the checkpointed ones
    that keep on XLA what they keep on CPU (``correct_outside``, on by default: :mod:`xla_ckpt._api.outside`);
    ``every_n_layers_skipped``: the blocks ``every_n_layers`` left unwrapped;
    ``tagged``: the Hugging Face projections inside the checkpointed modules tagged by role, name -> tag
    (``qkv``, ``attn_proj``, ``mlp_up``, ``mlp_gate``, ``mlp_down``, ``router``: :mod:`xla_ckpt._api.hf_roles`).
    ``on_xla``: the model's parameters were on an XLA device when applied (``corrected_outside`` is printed
    only then: elsewhere the correction does nothing).
    """

    wrapped: list[Wrapped] = field(default_factory=list)
    unmatched_rules: list[str] = field(default_factory=list)
    nested_skipped: list[str] = field(default_factory=list)
    blocks_left_out: list[str] = field(default_factory=list)
    own_checkpointing_off: list[str] = field(default_factory=list)
    patch_linear: bool = False
    weights_by_reference: bool = False
    source: str = ""
    scanned: str = ""
    corrected_outside: list[str] = field(default_factory=list)
    tagged: dict[str, str] = field(default_factory=dict)
    every_n_layers_skipped: list[str] = field(default_factory=list)
    on_xla: bool = False

    def __str__(self) -> str:
        lines = [f"plan from {self.source}: {len(self.wrapped)} modules checkpointed"]
        lines += [f"  {w.name or '<root>':32s} {w.cls:24s} {w.policy}   (rule {w.rule})" for w in self.wrapped]
        lines += [f"  WARNING rule matched nothing: {r}" for r in self.unmatched_rules]
        lines += [f"  skipped (inside a checkpointed module): {n}" for n in self.nested_skipped]
        lines += [f"  left out by blocks = true: {n}" for n in self.blocks_left_out]
        lines += [f"  left plain by every_n_layers: {n}" for n in self.every_n_layers_skipped]
        lines += [f"  model's own checkpointing turned off: {n or '<root>'}" for n in self.own_checkpointing_off]
        if self.scanned:
            lines.append(f"  scanned: {self.scanned}")
        if self.tagged:
            lines.append(f"  tagged by role: {_roles(self.tagged)}")
        lines.append(f"  patch_linear={self.patch_linear} weights_by_reference={self.weights_by_reference}")
        if self.corrected_outside and self.on_xla:
            n = len(self.corrected_outside)  # names in the field: an unwrapped block's layers would make a long line
            lines.append(f"  correct_outside: {n} nn.Linear / nn.LayerNorm module{'s' * (n != 1)} outside the "
                         "checkpointed ones corrected (on XLA they keep what CPU keeps)")
        return "\n".join(lines)


def _roles(tagged: dict[str, str]) -> str:
    """``qkv x24 (e.g. model.layers.0.self_attn.q_proj), ...``: each tag, how many modules, one example."""
    first: dict[str, str] = {}
    count: dict[str, int] = {}
    for name, role in tagged.items():
        first.setdefault(role, name)
        count[role] = count.get(role, 0) + 1
    return ", ".join(f"{r} x{count[r]} (e.g. {first[r]})" for r in first)


def _matches(rule: Rule, name: str, module: nn.Module, blocks: frozenset[str]) -> bool:
    if rule.blocks and name not in blocks:
        return False
    if rule.match and not any(glob_regex(g).match(name) for g in rule.match):
        return False
    return not rule.classes or type(module).__name__ in rule.classes


def apply(model: nn.Module, config: Union[Config, Mapping[str, Any], str, os.PathLike[str], Policy], *,
          scan: Optional[bool] = None) -> ApplyReport:
    """Checkpoint the modules of ``model`` that ``config`` selects; returns what was done.

    Args:
        model: the root module; rules match fully qualified names below it ("" is the root).
        config: a preset name (``xla_ckpt.presets()``), a ``Config``, a dict, a ``.toml`` / ``.yaml`` /
            ``.json`` path; or a policy name, a policy object (``xla_ckpt.policies.memory_budget(0.3)``) or an
            ``(OpCall) -> Decision`` function, which checkpoints every transformer block with it (as
            ``blocks = true``). Anything else is a ``TypeError`` naming the forms.
        scan: run the Hugging Face decoder stack (``model.model.layers``) as one torch_xla scan whose
            body the blocks' policy marks (trace and compile time flat in depth); overrides the
            config's ``scan``. None: the config's (default False).

    Rules apply in order; a later rule overrides earlier ones for the modules it selects
    (``enabled = false`` leaves them unwrapped). ``every = n`` keeps every n-th module the rule
    matches; ``blocks = true`` selects the transformer blocks (:func:`xla_ckpt.find_blocks`);
    ``every_n_layers = n`` (a top-level key) leaves all but blocks 0, n, 2n, ... plain, whatever the rules
    select in them (Hugging Face's ``every_n_layers``). A rule that matches nothing is reported, and warned
    about once per rule and process. Everything is validated before the model is
    changed. The model's own gradient checkpointing (Hugging Face's, diffusers', timm's), if on, is
    turned off with a warning (one checkpoint per module), and checkpointed modules run without a KV
    cache in training.
    Applying again to the same model replaces what the earlier ``apply`` did (its wrappers, its
    ``patch_linear``, its root forward): ``apply(model, "none")`` undoes it, the same config is a no-op.
    ``model.forward``'s signature is kept (HF ``Trainer`` filters dataset columns by it).
    When something is checkpointed, the stock ``nn.Linear`` and ``nn.LayerNorm`` modules outside it keep
    on XLA what they keep on CPU (no transposed weight copy, no normalized copy of the input; the same
    values and grads; ``correct_outside = false`` in the config leaves them stock).
    With ``scan``, the per-call arguments (mask, positions, rotary embeddings) pass once to the scan;
    alternating layers (sliding and global attention) scan as their repeating group, a stack that
    repeats none is an error naming why; the layers' weights become one stacked parameter per name
    (at layer 0's name: create the optimizer after ``apply``), while ``state_dict`` keeps the plain
    keys and loads plain checkpoints; off XLA (or under ``torch.compile``) the layers run one by one.

    Example:
        >>> report = xla_ckpt.apply(model, "megatron_selective")
        >>> print(report)
        >>> xla_ckpt.apply(model, xla_ckpt.policies.memory_budget(0.3))
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"xla_ckpt.apply: expected the model (an nn.Module) first and the config second, got "
                        f"{type(model).__name__} {model!r:.80} as the model; the config may be {ACCEPTED}")
    cfg = as_config(config, "xla_ckpt.apply")
    if scan is not None:
        if not isinstance(scan, bool):
            raise TypeError(f"xla_ckpt.apply: scan must be True, False or None, got {scan!r}")
        cfg = dataclasses.replace(cfg, scan=scan)
    named = list(model.named_modules(remove_duplicate=True))
    plan: dict[str, tuple[nn.Module, int]] = {}
    report = ApplyReport(source=cfg.source, patch_linear=cfg.patch_linear,
                         weights_by_reference=cfg.weights_by_reference)
    blocks: frozenset[str] = frozenset()
    if any(r.blocks for r in cfg.checkpoint):
        found, report.blocks_left_out = blocks_and_left_out(model)
        blocks = frozenset(found)
    for i, rule in enumerate(cfg.checkpoint):
        matched = [(n, m) for n, m in named if _matches(rule, n, m, blocks)]
        if not matched:
            report.unmatched_rules.append(f"{cfg.source}: checkpoint[{i}] ({rule.describe()})")
        for n, m in matched[:: rule.every]:
            if rule.enabled:
                plan[n] = (m, i)
            else:
                plan.pop(n, None)
    skipped = blocks_not_every_n(model, cfg.every_n_layers, cfg.source)
    for n in [n for n in plan if any(n == b or n.startswith(b + ".") for b in skipped)]:
        plan.pop(n)  # in a block every_n_layers leaves plain (its own modules too)
    report.every_n_layers_skipped = skipped
    selected = sorted(plan)
    built = {i: cfg.checkpoint[i].policy.build() for i in {i for _, i in plan.values()}}
    final: list[tuple[str, nn.Module, int]] = []
    earlier = _earlier_apply(model)
    owned = earlier.owned()
    for n in selected:
        if any(n.startswith(p + ".") or p == "" for p in selected if p != n):
            report.nested_skipped.append(n)
            continue
        m, i = plan[n]
        refuse_torchscript(m, f"{cfg.source}: checkpoint[{i}]: module '{n}'")
        current = None if id(m) in owned else checkpoint_policy(m)
        if current is not None and current != built[i]:
            raise ValueError(
                f"{cfg.source}: checkpoint[{i}]: module '{n}' is already checkpointed with {current!r}; "
                "call xla_ckpt.uncheckpointed on it first"
            )
        final.append((n, m, i))
    stack = None
    if cfg.scan:
        stack, final, report.scanned = _scan_hf.plan_scan(model, cfg, final, built, owned)
    _hf.refuse_our_kwargs(model, "apply")  # a policy handed to HF's own checkpointing: an error, nothing changed
    # Validated: now change the model.
    earlier.undo(model, keep_scan_weights=stack is not None)
    report.own_checkpointing_off = _hf.turn_off_own_checkpointing(model, "apply")
    if cfg.patch_linear:
        patch_linear(model)
    for n, m, i in final:
        checkpointed(m, policy=built[i], verify=cfg.verify)
        report.wrapped.append(Wrapped(n, type(m).__name__, str(cfg.checkpoint[i].policy), i))
    report.tagged = tag_roles(model, [n for n, _, _ in final])  # HF projections: names policies select them
    if stack is not None:
        _scan_hf.install(model, *stack)
    if cfg.correct_outside and final:  # nothing checkpointed (the "none" preset): the model stays stock
        report.corrected_outside = correct_outside(model, [n for n, _, _ in final])
        report.on_xla = any(p.device.type == "xla" for p in model.parameters())
    by_reference = cfg.weights_by_reference and not by_reference_hooked(model)
    if by_reference:
        # Hooks, not a replaced forward: FSDP wrappers accept the module (``_api/by_reference.py`` says why).
        hook_by_reference(model)
    _Applied.record(model, {n: m for n, m, _ in final}, cfg.patch_linear, by_reference,
                    bool(report.corrected_outside))
    why = f" {why_no_blocks(model)}" if any(r.blocks for r in cfg.checkpoint) and not blocks else ""
    for r in report.unmatched_rules:
        # Once per rule and process: applying the same config to each new model would repeat it every time.
        text = f"xla_ckpt.apply: rule matched no module: {r}.{why if '(blocks' in r else ''}"
        warn_once(("apply-unmatched", text), f"{text} Fix its match / classes (print(dict(model.named_modules())) "
                  "lists the names and classes), or remove the rule.")
    return report


@dataclass
class _Applied:
    """What one :func:`apply` changed on a model, kept on the model so that applying again replaces it.

    Only what apply itself did is undone: modules the user wrapped with ``checkpointed`` stay (a
    conflicting policy there is still an error), and a module re-wrapped since is left alone.
    Kept in the model's ``__dict__`` (not a buffer or a submodule: ``state_dict`` keys, ``repr`` and
    ``named_modules`` are unchanged; it pickles and deep-copies with the model).
    """

    modules: dict[str, nn.Module] = field(default_factory=dict)
    policies: dict[str, Any] = field(default_factory=dict)
    patch_linear: bool = False
    by_reference: bool = False
    outside: bool = False

    @staticmethod
    def record(model: nn.Module, wrapped: dict[str, nn.Module], linear: bool, by_reference: bool,
               outside: bool) -> None:
        policies = {n: checkpoint_policy(m) for n, m in wrapped.items()}
        model.__dict__[_APPLIED] = _Applied(dict(wrapped), policies, linear, by_reference, outside)

    def owned(self) -> dict[int, nn.Module]:
        """The modules that still carry the instance wrapper this apply gave them, by ``id``."""
        return {id(m): m for n, m in self.modules.items()
                if isinstance(m.__dict__.get("forward"), _CheckpointedForward)
                and checkpoint_policy(m) == self.policies[n]}

    def undo(self, model: nn.Module, keep_scan_weights: bool = False) -> None:
        """Undo in reverse order: the root's by-reference hooks, the outside corrections, the wrappers (a patched
        Linear's sits on its patch), the patch."""
        if self.by_reference:
            unhook_by_reference(model)
        if self.outside:
            uncorrect_outside(model)
        _scan_hf.uninstall(model, keep_weights=keep_scan_weights)  # scanning again: the stacked weights stay
        for m in self.owned().values():
            uncheckpointed(m)
        if self.patch_linear:
            unpatch_linear(model)
        model.__dict__.pop(_APPLIED, None)


_APPLIED = "_xla_ckpt_applied"


def _earlier_apply(model: nn.Module) -> _Applied:
    """What an earlier :func:`apply` on ``model`` did (empty when none did)."""
    earlier = model.__dict__.get(_APPLIED)
    return earlier if isinstance(earlier, _Applied) else _Applied()
