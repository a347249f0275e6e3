"""Module names under compile: the graph's ``nn_module_stack`` back to the names the eager engine uses."""

from __future__ import annotations

import re
from typing import Any, Optional

from torch import nn

__all__ = ["module_entries", "child", "call_site_name"]

_PATH_PARTS = re.compile(r"\._modules\['([^']+)'\]|\['([^']+)'\]|\[(\d+)\]")


def _normalise(path: str) -> str:
    """Dynamo's ``L['self'].layers[0].attn`` module paths as dotted ``L.self.layers.0.attn`` paths."""
    path = _PATH_PARTS.sub(lambda m: "." + next(g for g in m.groups() if g is not None), path)
    return path


def module_entries(meta: dict[str, Any]) -> list[tuple[str, Any]]:
    stack = meta.get("nn_module_stack") or {}
    return [(_normalise(v[0]), v[1]) for v in stack.values()]


def _same_type(m: nn.Module, typ: Any) -> bool:
    # nn_module_stack holds the class, or (newer torch) its qualified name.
    return type(m) is typ or (isinstance(typ, str) and typ.endswith(type(m).__qualname__))


def child(cur: nn.Module, path: str, typ: Any) -> Optional[tuple[str, nn.Module]]:
    """The submodule of ``cur`` that Dynamo reached as ``path``: its longest suffix naming one.

    Dynamo records access paths (``layers.0.forward.module.attn`` when a wrapper holds the module),
    so the name is rebuilt from the module tree, as eager names it.
    """
    parts = path.split(".")
    for i in range(len(parts)):
        name = ".".join(parts[i:])
        try:
            sub = cur.get_submodule(name)
        except AttributeError:
            continue
        if _same_type(sub, typ):
            return name, sub
    return None


def call_site_name(entries: list[tuple[str, Any]], module: Optional[nn.Module]) -> str:
    """The wrapped module's name from the root the user called, as the eager engine names it.

    Dynamo's paths start at the compiled frame's locals: ``L.self.layers.0`` for ``torch.compile(model)``
    (the root is ``L.self``), ``L.model.layers.0`` for a compiled function given the model.
    """
    if module is None or not entries:
        return ""
    parts = entries[-1][0].split(".")
    return ".".join(parts[2:]) if len(parts) > 2 and parts[0] in ("L", "G") else ""
