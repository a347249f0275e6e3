"""What a user passes as a policy, resolved once where it enters the library.

``apply``, ``checkpointed``, ``checkpoint`` and ``python -m xla_ckpt explain`` take the same forms: a preset
name, a registered policy name, a ``Config``, a dict, a config file path, a policy object or any
``(OpCall) -> Decision`` function. :func:`resolve` is the one place that tells them apart; an entry then
wants a whole config (:func:`as_config`: a lone policy checkpoints every transformer block) or one
region's policy (:func:`as_policy`: a config gives the one policy its rules use).

Example:
    >>> as_config(xla_ckpt.policies.memory_budget(0.3), "xla_ckpt.apply").checkpoint[0].blocks
    True
    >>> as_policy("megatron_selective", "xla_ckpt.checkpoint")
    dots_with_no_batch_dims_saveable
"""

from __future__ import annotations

import difflib
import os
from typing import Any, Mapping, Union

from torch import nn

from xla_ckpt._api.config import Config, ConfigError, PolicySpec, Rule, parse
from xla_ckpt._api.config_load import load_config
from xla_ckpt._base.presets import preset_names
from xla_ckpt._record.opcall import Policy
from xla_ckpt._policy import registry

__all__ = ["ACCEPTED", "resolve", "as_config", "as_policy"]

ACCEPTED = ("a preset name (xla_ckpt.presets()), a policy name (xla_ckpt.policies.names()), a Config, a dict, a "
            ".toml/.yaml/.yml/.json path, a policy object (e.g. xla_ckpt.policies.memory_budget(0.3)) or an "
            "(OpCall) -> Decision function")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80] + '...' if len(text) > 80 else text}"


def resolve(value: Any, who: str) -> Union[Config, Policy]:
    """``value`` as a ``Config`` (a preset, a file, a dict, a Config) or a policy (a name, an object, a
    function); anything else is a ``TypeError`` naming what was passed and what is accepted.

    Args:
        value: what the user passed.
        who: the entry, for messages (``"xla_ckpt.apply"``).

    Example:
        >>> resolve("dots_saveable", "xla_ckpt.checkpoint")
        dots_saveable
    """
    if isinstance(value, Config):
        return value
    if isinstance(value, str) and value in registry.names():
        return registry.get(value)
    if isinstance(value, str) and value and not os.path.isfile(value) and value not in preset_names() \
            and not os.path.splitext(value)[1] and os.sep not in value and "/" not in value:
        close = [n for n in preset_names() if n.startswith(value)] or difflib.get_close_matches(value, preset_names())
        hint = f" Did you mean the preset {' or '.join(map(repr, close))}?" if close else ""
        raise ConfigError(f"{who}: {value!r} is neither a preset ({', '.join(preset_names())}) nor a policy "
                          f"({', '.join(registry.names())}).{hint}{registry.suggest(value)} A config file is a path "
                          "with .toml, .yaml/.yml or .json.")
    if isinstance(value, (str, os.PathLike)):
        return load_config(value)
    if isinstance(value, Mapping):
        return parse(value)
    if isinstance(value, nn.Module):
        raise TypeError(f"{who}: expected {ACCEPTED}; got the module {type(value).__name__} (is the model passed "
                        "in the policy's place?)")
    if isinstance(value, type):
        raise TypeError(f"{who}: expected {ACCEPTED}; got the class {value.__name__} (a policy class is built "
                        f"first, e.g. {value.__name__}(...))")
    if not callable(value):
        raise TypeError(f"{who}: expected {ACCEPTED}; got {_shown(value)}")
    return value


def as_config(value: Any, who: str) -> Config:
    """What ``apply`` runs: ``value`` resolved; a lone policy checkpoints every transformer block with it."""
    got = resolve(value, who)
    if isinstance(got, Config):
        return got
    return Config(checkpoint=(Rule(policy=PolicySpec.of(got), blocks=True),), source=f"policy {got!r}")


# A config's switches that act on a whole model, not on one region.
_MODEL_SWITCHES = ("patch_linear", "weights_by_reference", "scan")


def as_policy(value: Any, who: str) -> Policy:
    """What one region runs: ``value`` resolved; a config gives the one policy all its rules use."""
    got = resolve(value, who)
    if not isinstance(got, Config):
        return got
    switches = [s for s in _MODEL_SWITCHES if getattr(got, s)]
    if switches:
        raise ConfigError(f"{who}: {got.source} sets {', '.join(switches)}, which act on a whole model: pass it "
                          "to xla_ckpt.apply(model, ...) instead")
    specs = {str(r.policy): r.policy for r in got.checkpoint if r.enabled}
    if len(specs) != 1:
        what = f"{len(specs)} policies ({', '.join(specs)})" if specs else "no policy (it checkpoints nothing)"
        raise ConfigError(f"{who}: {got.source} has {what}; one region takes one: name a policy "
                          f"({', '.join(registry.names())}) or pass a policy object")
    return next(iter(specs.values())).build()
