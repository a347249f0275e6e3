"""Configs from files and presets: TOML, YAML and JSON load into the same ``Config`` objects."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping, Union

from xla_ckpt._api.config import Config, ConfigError, parse
from xla_ckpt._base import presets as _presets

__all__ = ["load_config", "presets"]


def _read(path: str) -> Any:
    ext = os.path.splitext(path)[1].lower()
    with open(path, "rb") as f:
        raw = f.read()
    if ext == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib  # noqa: PLC0415
        else:  # pragma: no cover
            import tomli as tomllib  # noqa: PLC0415
        return tomllib.loads(raw.decode("utf-8"))
    if ext in (".yaml", ".yml"):
        import yaml  # noqa: PLC0415

        return yaml.safe_load(raw) or {}
    if ext == ".json":
        return json.loads(raw)
    raise ConfigError(f"{path}: unsupported config extension {ext!r}; use .toml, .yaml, .yml or .json")


def _locate(path: str) -> str:
    """A file path for ``path``: a preset name (``"full"``, ``"full.yaml"``) or a config file path."""
    if os.path.isfile(path):
        return path
    preset = _presets.preset_path(path)
    if preset is not None:
        return preset
    names = ", ".join(_presets.preset_names()) or "(none found: reinstall xla_ckpt)"
    if not os.path.splitext(path)[1] and os.sep not in path and "/" not in path:
        raise ConfigError(f"{path}: no preset of this name; presets: {names} (xla_ckpt.presets() describes "
                          "them); or give the path of a .toml, .yaml/.yml or .json config file")
    raise ConfigError(f"{path}: no such config file; give an existing .toml, .yaml/.yml or .json path, or a "
                      f"preset name: {names}")


def load_config(path: Union[str, os.PathLike[str], Mapping[str, Any]]) -> Config:
    """Load and validate a preset by name, or a config file (``.toml``, ``.yaml``/``.yml``, ``.json``).

    A name without a folder (``"megatron_selective"``, ``"full.yaml"``) that is not an existing file
    is a shipped preset (``xla_ckpt.presets()`` lists them).

    Example:
        >>> cfg = xla_ckpt.load_config("megatron_selective")
        >>> cfg = xla_ckpt.load_config("my_configs/llama.toml")
    """
    if isinstance(path, Mapping):
        return parse(path)  # the same data as a file's, already read
    given = os.fspath(path)
    path = _locate(given)
    # A preset found by name is named so in plans and errors (its file is inside the install).
    source = path if path == given else f"preset {given} ({os.path.basename(path)})"
    try:
        data = _read(path)
    except ConfigError:
        raise
    except Exception as e:  # syntax errors of any of the three formats
        raise ConfigError(f"{source}: cannot parse: {e}") from None
    return parse(data, source)


def presets() -> dict[str, str]:
    """Shipped presets: name -> description, sorted by name.

    Example:
        >>> xla_ckpt.presets()["megatron_selective"]
        'Megatron-style selective recompute: ...'
        >>> xla_ckpt.apply(model, "megatron_selective")
    """
    return {n: load_config(_presets.preset_path(n) or n).description for n in _presets.preset_names()}
