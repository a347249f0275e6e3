"""``find_blocks(model)``: the repeated transformer blocks of a model, without naming their class.

What a config rule's ``blocks = true`` selects, so one preset fits every architecture.
"""

from __future__ import annotations

from torch import nn

from xla_ckpt import _hf

__all__ = ["find_blocks"]

_CONTAINERS = (nn.ModuleList, nn.Sequential)


def _in_container(model: nn.Module) -> dict[str, nn.Module]:
    """Modules that are direct children of a ModuleList / Sequential, by fully qualified name."""
    out = {}
    for name, m in model.named_modules():
        if isinstance(m, _CONTAINERS):
            for child_name, child in m.named_children():
                out[f"{name}.{child_name}" if name else child_name] = child
    return out


def find_blocks(model: nn.Module) -> list[str]:
    """Fully qualified names of ``model``'s transformer blocks, in module order.

    Hugging Face models: the classes in ``_no_split_modules`` (HF's list of blocks that must stay on
    one device) that sit in a ``ModuleList``, so ``BertEmbeddings`` and the like are left out; failing
    that, every ``GradientCheckpointingLayer``. Any other model: the children of its longest
    ``ModuleList`` / ``Sequential`` whose children are all of one class (ties: the first in module order).
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
            return found
    found = [n for n, m in model.named_modules() if n and _hf.is_gc_layer(m)]
    if found:
        return found
    best: list[str] = []
    for name, m in model.named_modules():
        if not isinstance(m, _CONTAINERS):
            continue
        children = list(m.named_children())
        if children and len({type(c) for _, c in children}) == 1 and len(children) > len(best):
            best = [f"{name}.{c}" if name else c for c, _ in children]
    return best

