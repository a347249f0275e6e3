"""``find_blocks(model)``: the repeated transformer blocks of a model, without naming their class.

What a config rule's ``blocks = true`` selects, so one preset fits every architecture.
"""

from __future__ import annotations

from torch import nn

from xla_ckpt._api import hf as _hf

__all__ = ["find_blocks", "why_no_blocks"]

_CONTAINERS = (nn.ModuleList, nn.Sequential)


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


def find_blocks(model: nn.Module) -> list[str]:
    """Fully qualified names of ``model``'s transformer blocks, in module order.

    Hugging Face models: the classes in ``_no_split_modules`` (HF's list of blocks that must stay on
    one device) that sit in a ``ModuleList``, so ``BertEmbeddings`` and the like are left out, or the
    ``GradientCheckpointingLayer`` layers listed inside them (Swin lists its stages; their layers are
    the blocks); failing that, every ``GradientCheckpointingLayer``. Any other model: the children of
    its longest ``ModuleList`` / ``Sequential`` whose children are all of one class and have submodules
    of their own (ties: the first in module order): a list of single layers (``nn.Sequential`` of
    ``nn.Linear``) is not a list of blocks, since checkpointing one layer keeps its input anyway.
    Nested finds are reported as they are; ``apply`` checkpoints only the outermost.

    Example:
        >>> xla_ckpt.find_blocks(gpt2)
        ['transformer.h.0', 'transformer.h.1']
    """
    listed = _in_container(model)
    hf_classes = _hf.hf_block_classes(model)
    if hf_classes:
        found = [n for n, m in listed.items() if type(m).__name__ in hf_classes]
        if found:
            return _inner_layers(model, found, listed)
    found = [n for n, m in model.named_modules() if n and _hf.is_gc_layer(m)]
    if found:
        return found
    best: list[str] = []
    for name, m in model.named_modules():
        if not isinstance(m, _CONTAINERS):
            continue
        children = list(m.named_children())
        if (children and len({type(c) for _, c in children}) == 1 and _has_children(children[0][1])
                and len(children) > len(best)):
            best = [f"{name}.{c}" if name else c for c, _ in children]
    return best


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
