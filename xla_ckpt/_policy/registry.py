"""The one registry of policy names: ``register``, ``names``, ``get``, ``resolve``.

Every policy module registers its own names when it is imported (``_policy/__init__`` imports them
all), so this list lives beside nothing it lists and imports none of them: no cycle between the
registry and what it registers. ``names()`` is the only list of names: docs, config validation and
tests read it.

Example:
    >>> from xla_ckpt import policies
    >>> policies.get("save_only_these_names", names=["qkv"])
    save_only_these_names('qkv')
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable

from xla_ckpt._base.presets import preset_names
from xla_ckpt._record.opcall import Policy

__all__ = ["register", "names", "suggest", "get", "resolve"]

_REGISTRY: dict[str, Callable[..., Policy]] = {}


def register(name: str, factory: Callable[..., Policy]) -> None:
    """Add a policy factory under ``name`` (``get(name, **params)`` calls ``factory(**params)``)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"policies.register: name must be an identifier, got {name!r}")
    if name in _REGISTRY:
        raise ValueError(f"policies.register: {name!r} is already registered")
    if not callable(factory):
        raise TypeError(f"policies.register: factory for {name!r} must be callable, got {factory!r}")
    _REGISTRY[name] = factory


def names() -> list[str]:
    """Every registered policy name, sorted."""
    return sorted(_REGISTRY)


def suggest(name: str) -> str:
    """A sentence for an unknown policy ``name``: the registered names it likely meant, and the preset
    it may be (presets such as ``dots`` name a whole ``apply`` config, not a policy)."""
    text = str(name)
    close = [n for n in names() if text and (n.startswith(text) or text in n)]
    close += [n for n in difflib.get_close_matches(text, names(), n=3) if n not in close]
    out = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
    if text in preset_names():
        out += (f" {text!r} is a preset (a whole config for apply: xla_ckpt.apply(model, {text!r})), not a "
                "policy for one module.")
    return out


def get(name: str, **params: Any) -> Policy:
    """The policy registered as ``name``, built with ``params``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown checkpoint policy {name!r}; valid names: {', '.join(names())}.{suggest(name)}")
    factory = _REGISTRY[name]
    try:
        allowed = list(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        allowed = None
    if allowed is not None and (set(params) - set(allowed) or any(
            p.default is inspect.Parameter.empty and k not in params
            for k, p in inspect.signature(factory).parameters.items())):
        takes = ", ".join(allowed) if allowed else "no parameters"
        raise TypeError(f"policy {name!r}: bad parameters {params!r}; it takes: {takes}")
    try:
        return factory(**params)
    except TypeError as e:
        raise TypeError(f"policy {name!r}: bad parameters {params!r}: {e}") from None


def resolve(policy: Any, where: str = "policy") -> Policy:
    """A policy from a registered name or a callable; anything else is a clear error."""
    if isinstance(policy, str):
        return get(policy)
    if callable(policy):
        return policy
    raise TypeError(f"{where}: expected a policy name ({', '.join(names())}) or a callable, got {policy!r}")
