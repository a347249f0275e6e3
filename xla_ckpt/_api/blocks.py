"""``find_blocks(model)``: the repeated blocks of a model (transformer layers, the blocks of every stage
of a staged CNN), without naming their class.

What a config rule's ``blocks = true`` selects, so one preset fits every architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from xla_ckpt._api import hf as _hf
from xla_ckpt._api.config import ConfigError

__all__ = ["find_blocks", "blocks_left_out", "blocks_and_left_out", "why_no_blocks", "blocks_not_every_n"]

_CONTAINERS = (nn.ModuleList, nn.Sequential)
# Children of these classes are plain groupings of layers, no block class of their own.
_GENERIC = (nn.ModuleList, nn.Sequential, nn.ModuleDict)


def _in_container(model: nn.Module) -> dict[str, nn.Module]:
    """Modules that are direct children of a ModuleList / Sequential, by fully qualified name."""
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, _CONTAINERS):
            for child_name, child in m.named_children():
                out[f"{name}.{child_name}" if name else child_name] = child
    return out


def _inner_layers(model: nn.Module, found: list[str], listed: dict[str, nn.Module]) -> list[str]:
    """The repeated layers inside ``found`` blocks, when every block holds a list of them, else ``found``.

    HF lists some models' *stages* as their blocks (Swin: ``_no_split_modules = ["SwinStage"]``), each a
    ``ModuleList`` of ``GradientCheckpointingLayer`` layers (``SwinLayer``): the layers are the
    transformer blocks (a whole stage as one region recomputes the stage at once in backward).
    """
    inner: list[str] = []
    for name in found:
        layers = [n for n, m in listed.items() if n.startswith(name + ".") and _hf.is_gc_layer(m)]
        if not layers:
            return found
        inner += layers
    return inner


def _has_children(m: nn.Module) -> bool:
    return next(iter(m.children()), None) is not None


@dataclass
class _Candidate:
    """Blocks of one class (all its uniform containers together), or one container of generic children."""

    cls: type
    names: list[str] = field(default_factory=list)
    order: int = 0  # position of its first container in module order (ties)

    def inside(self, other: "_Candidate") -> bool:
        """Whether some block of ``self`` lies inside a block of ``other``."""
        return any(n.startswith(o + ".") for n in self.names for o in other.names)


def _uniform(model: nn.Module, names: list[str]) -> bool:
    """Whether the blocks are copies of one another (same parameter names and shapes): a transformer stack,
    not the stages of a staged network (whose widths and depths differ)."""
    shapes = {tuple((n, tuple(p.shape)) for n, p in model.get_submodule(b).named_parameters()) for b in names}
    return len(names) > 1 and len(shapes) == 1


def _candidates(model: nn.Module) -> list[_Candidate]:
    """Containers whose children are all one class with submodules, grouped by that class.

    Blocks of a block class count together across containers (a staged CNN holds its blocks in one
    ``Sequential`` per stage, each of another width); children that are themselves plain containers
    (``Sequential`` of layers) are no class of their own: each such container stands alone.
    """
    by_class: dict[type, _Candidate] = {}
    alone: list[_Candidate] = []
    for i, (name, m) in enumerate(model.named_modules()):
        if not isinstance(m, _CONTAINERS):
            continue
        children = list(m.named_children())
        if not children or len({type(c) for _, c in children}) != 1 or not _has_children(children[0][1]):
            continue
        cls = type(children[0][1])
        names = [f"{name}.{c}" if name else c for c, _ in children]
        if issubclass(cls, _GENERIC):
            alone.append(_Candidate(cls, names, i))
        else:
            by_class.setdefault(cls, _Candidate(cls, [], i)).names.extend(names)
    return sorted([*by_class.values(), *alone], key=lambda c: c.order)


def _search(model: nn.Module) -> tuple[list[str], list[str]]:
    """(blocks, why same-class modules or other block classes were left out) for a model HF does not describe."""
    cands = _candidates(model)
    # A stack of identical blocks is the unit even when each block holds a list of its own (MoE experts).
    stacks = [c for c in cands if not issubclass(c.cls, _GENERIC) and _uniform(model, c.names)]
    cands = [c for c in cands if not any(c is not s and c.inside(s) for s in stacks)]
    if not cands:
        return [], []
    best = max(cands, key=lambda c: (len(c.names), -c.order))
    chosen = [best]
    if not issubclass(best.cls, _GENERIC):
        # Encoder and decoder, down and up: every block class about as numerous as the first counts.
        for c in cands:
            if (c is not best and not issubclass(c.cls, _GENERIC) and 2 * len(c.names) >= len(best.names)
                    and not any(c.inside(o) or o.inside(c) for o in chosen)):
                chosen.append(c)
    blocks = sorted((n for c in chosen for n in c.names), key=_position(model))
    return blocks, _left_out(model, chosen, [c for c in cands if c not in chosen], blocks)


def _position(model: nn.Module) -> Any:
    index = {n: i for i, (n, _) in enumerate(model.named_modules())}
    return lambda n: index[n]


def _left_out(model: nn.Module, chosen: list[_Candidate], others: list[_Candidate], blocks: list[str]) -> list[str]:
    """Modules of a chosen block class that are not blocks, and block classes not chosen, each with why."""
    out: list[str] = []
    picked = set(blocks)
    classes = {c.cls for c in chosen if not issubclass(c.cls, _GENERIC)}
    for name, m in model.named_modules():
        if type(m) not in classes or name in picked:
            continue
        holder = next((b for b in blocks if name.startswith(b + ".")), None)
        why = (f"inside block '{holder}' (apply checkpoints the outermost)" if holder else
               "not held in a ModuleList / Sequential of its class alone; select it with a 'match' rule")
        out.append(f"{name or '<root>'} ({type(m).__name__}): {why}")
    top = max(len(c.names) for c in chosen)
    for c in others:  # a class nested with the found blocks (a stage holding them) is no loss
        if issubclass(c.cls, _GENERIC) or any(c.inside(o) or o.inside(c) for o in chosen):
            continue
        shown = ", ".join(c.names[:3]) + (", ..." if len(c.names) > 3 else "")
        out.append(f"{shown} ({len(c.names)} x {c.cls.__name__}): another block class, fewer than half as many "
                   f"as the {top} blocks found; select them with {{'classes': ['{c.cls.__name__}']}}")
    return out


def find_blocks(model: nn.Module) -> list[str]:
    """Fully qualified names of ``model``'s repeated blocks, in module order.

    Hugging Face models (and diffusers'): the classes in ``_no_split_modules`` (HF's list of blocks
    that must stay on one device) that sit in a ``ModuleList``, so ``BertEmbeddings`` and the like are
    left out, or the ``GradientCheckpointingLayer`` layers listed inside them (Swin lists its stages;
    their layers are the blocks); failing that, every ``GradientCheckpointingLayer``. Any other model:
    the children of ``ModuleList`` / ``Sequential`` containers whose children are all of one class and
    have submodules of their own, the containers of one block class counted together (a staged CNN
    holds each stage's blocks in its own ``Sequential``, at another width: every stage counts). The
    most numerous class wins (ties: the first in module order), with every other block class at least
    half as numerous and not nested with it (encoder and decoder, down and up). A list of single layers
    (``nn.Sequential`` of ``nn.Linear``) is not a list of blocks, since checkpointing one layer keeps
    its input anyway; a container of plain ``Sequential`` children stands alone (the longest wins); a
    stack of identical blocks is taken whole, not the lists inside each (MoE experts). Nested finds are
    reported as they are; ``apply`` checkpoints only the outermost, and its report lists what was
    left out, and why (:func:`blocks_left_out`).

    Example:
        >>> xla_ckpt.find_blocks(gpt2)
        ['transformer.h.0', 'transformer.h.1']
        >>> len(xla_ckpt.find_blocks(timm.create_model("resnet18")))  # layer1.0 ... layer4.1
        8
    """
    return _find(model)[0]


def blocks_left_out(model: nn.Module) -> list[str]:
    """What :func:`find_blocks` left out of ``model``, one line each with why (for ``apply``'s report).

    Modules of a block class found that are not blocks (outside a container of their class, or inside
    another block), and other block classes not taken (fewer than half as many as the most numerous).
    """
    return _find(model)[1]


def blocks_and_left_out(model: nn.Module) -> tuple[list[str], list[str]]:
    """``(find_blocks(model), blocks_left_out(model))`` in one search (what ``apply`` reports)."""
    return _find(model)


def _find(model: nn.Module) -> tuple[list[str], list[str]]:
    listed = _in_container(model)
    hf_classes = _hf.hf_block_classes(model)
    if hf_classes:
        found = [n for n, m in listed.items() if type(m).__name__ in hf_classes]
        if found:
            blocks = _inner_layers(model, found, listed)
            return blocks, _hf_left_out(model, hf_classes, blocks)
    found = [n for n, m in model.named_modules() if n and _hf.is_gc_layer(m)]
    if found:
        return found, []
    return _search(model)


def _hf_left_out(model: nn.Module, classes: set[str], blocks: list[str]) -> list[str]:
    """Modules of an HF block class that are neither blocks nor inside or around one (outside any list)."""
    return [f"{n} ({type(m).__name__}): in _no_split_modules but not held in a ModuleList; select it with a "
            "'match' rule" for n, m in model.named_modules()
            if n and type(m).__name__ in classes and n not in blocks
            and not any(n.startswith(b + ".") or b.startswith(n + ".") for b in blocks)]


def why_no_blocks(model: nn.Module) -> str:
    """Why :func:`find_blocks` found nothing in ``model``, and the config rules to write instead."""
    cls = type(model).__name__
    children = list(model.named_children())
    names = [n for n, _ in children][:6]
    classes = sorted({type(c).__name__ for _, c in children if _has_children(c)})[:4]
    single = [type(c).__name__ for _, c in children if not _has_children(c)]
    lines = [
        f"find_blocks found no repeated blocks in {cls}: it looks for a Hugging Face block class "
        "(_no_split_modules) in a ModuleList, a GradientCheckpointingLayer, or a ModuleList / Sequential whose "
        "children are all one class of module with submodules of its own"
    ]
    whole = "xla_ckpt.checkpointed(model, policy='nothing_saveable')"
    if single and len(single) == len(children):
        lines.append(f" ({cls}'s children are single layers ({', '.join(sorted(set(single)))}): checkpointing one "
                     f"layer alone saves nothing, since it keeps its input anyway). Checkpoint the whole model as "
                     f"one region instead: {whole}, or group its layers into block modules (one nn.Module class "
                     "per block, held in an nn.ModuleList) and apply again.")
        return "".join(lines)
    lines.append(". Select the modules yourself: a rule {'match': [" + ", ".join(repr(n) for n in names or ['layers.*'])
                 + "], 'policy': 'nothing_saveable'} (module-name globs, e.g. 'layers.*')")
    if classes:
        lines.append(", or {'classes': [" + ", ".join(map(repr, classes)) + "], 'policy': 'nothing_saveable'}")
    lines.append(f"; or checkpoint the whole model as one region: {whole}.")
    return "".join(lines)


def blocks_not_every_n(model: nn.Module, n: int, source: str) -> list[str]:
    """The blocks that ``every_n_layers = n`` leaves unwrapped: all but blocks 0, n, 2n, ... of
    :func:`find_blocks` (Hugging Face's ``every_n_layers`` counts its layers the same way).

    Raises a ``ConfigError`` naming ``source`` when ``n > 1`` and the model has no blocks to count.

    Example:
        >>> blocks_not_every_n(llama, 2, "<dict>")  # four layers
        ['model.layers.1', 'model.layers.3']
    """
    if n == 1:
        return []
    found = find_blocks(model)
    if not found:
        raise ConfigError(f"{source}: every_n_layers: {n} counts the model's transformer blocks, but "
                         f"{why_no_blocks(model)}")
    return [b for i, b in enumerate(found) if i % n]
