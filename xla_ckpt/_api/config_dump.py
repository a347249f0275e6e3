"""A ``Config`` back to plain data and to TOML: what ``load_config`` reads gives the same ``Config`` again.

``fit`` recommends a ``Config``; ``python -m xla_ckpt fit --write config.toml`` writes it with
:func:`to_toml`. The stdlib reads TOML (``tomllib``) but does not write it, and a config holds only
strings, numbers, booleans, lists and tables, so the writer is small and covers exactly that.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from xla_ckpt._api.config import Config, ConfigError, PolicySpec, Rule

__all__ = ["config_data", "to_toml"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _spec_data(spec: PolicySpec) -> Any:
    if spec.built is not None:
        raise ConfigError(f"{spec.name}: a policy object or function in a config cannot be written as data; register "
                          "it (xla_ckpt.policies.register('mine', lambda: my_policy)) and write policy = 'mine'")
    if not spec.params:
        return spec.name
    return {"name": spec.name, **{k: _value_data(v) for k, v in spec.params}}


def _value_data(v: Any) -> Any:
    if isinstance(v, PolicySpec):
        return _spec_data(v)
    if isinstance(v, tuple):
        return [_value_data(x) for x in v]
    return v


def _rule_data(rule: Rule) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if rule.blocks:
        out["blocks"] = True
    if rule.match:
        out["match"] = list(rule.match)
    if rule.classes:
        out["classes"] = list(rule.classes)
    if rule.every != 1:
        out["every"] = rule.every
    if not rule.enabled:
        out["enabled"] = False
    out["policy"] = _spec_data(rule.policy)
    return out


def config_data(cfg: Config) -> dict[str, Any]:
    """``cfg`` as the plain data a config file holds (``xla_ckpt.load_config(data) == cfg``).

    Example:
        >>> config_data(xla_ckpt.load_config({"checkpoint": [{"blocks": True, "budget": 0.3}]}))
        {'checkpoint': [{'blocks': True, 'policy': {'name': 'memory_budget', 'fraction': 0.3}}]}
    """
    out: dict[str, Any] = {}
    if cfg.description:
        out["description"] = cfg.description
    for switch in ("patch_linear", "weights_by_reference", "verify", "scan"):
        if getattr(cfg, switch):
            out[switch] = True
    if not cfg.correct_outside:  # on by default
        out["correct_outside"] = False
    if cfg.every_n_layers != 1:
        out["every_n_layers"] = cfg.every_n_layers
    out["checkpoint"] = [_rule_data(r) for r in cfg.checkpoint]
    return out


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # JSON's escapes (\" \\ \n \uXXXX) are TOML basic-string escapes
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_toml(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"to_toml: cannot write {type(v).__name__} {v!r} (a config holds strings, numbers, "
                    "booleans, lists and tables)")


def to_toml(cfg: Config, header: str = "") -> str:
    """``cfg`` as a TOML document ``xla_ckpt.load_config`` reads back into an equal ``Config``.

    Args:
        cfg: the config. header: text written first as ``#`` comment lines (why this config).

    Example:
        >>> open("config.toml", "w").write(to_toml(xla_ckpt.fit(...).recommended))
    """
    data = config_data(cfg)
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    for k, v in data.items():
        if k != "checkpoint":
            lines.append(f"{_key(k)} = {_toml(v)}")
    for rule in data["checkpoint"]:
        lines += ["", "[[checkpoint]]"] + [f"{_key(k)} = {_toml(v)}" for k, v in rule.items()]
    return "\n".join(lines) + "\n"
